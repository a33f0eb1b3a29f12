"""The bundled rule pack: every rule's own examples, and properties every rule must have."""

from __future__ import annotations

import pytest

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.schema import CATEGORIES
from slurmdoc.engine.selftest import check_book

BOOK = load_rulebook()
RESULTS = check_book(BOOK)


@pytest.mark.parametrize("result", [r for r in RESULTS if r.kind != "todo_match"], ids=lambda r: f"{r.rule_id}-{r.kind}-{r.index}")
def test_rule_example(result):
    assert result.ok, f"{result.rule_id} {result.kind}[{result.index}]: {result.detail}"


def test_known_misses_still_missing():
    # a todo example that starts to pass must be promoted to `match`
    promoted = [f"{r.rule_id} todo_match[{r.index}]" for r in RESULTS if r.kind == "todo_match" and not r.ok]
    assert not promoted, f"now matching, move to match: {promoted}"


def test_pack_covers_the_first_catalog():
    cats = {r.category for r in BOOK.rules}
    for needed in ("cuda_oom", "host_oom", "killed", "shape_divisibility", "import_error", "nccl_timeout", "sigterm_cascade", "time_limit", "python_exception"):
        assert needed in cats, needed


def test_every_rule_has_a_known_category_and_examples():
    for r in BOOK.rules:
        assert r.category in CATEGORIES
        assert r.spec.examples.match and r.spec.examples.no_match, r.id


def test_symptom_categories_are_never_plain_causes():
    # NCCL timeouts and SIGTERM deaths are echoes: they may only lead when nothing else failed
    for r in BOOK.rules:
        if r.category in ("nccl_timeout", "sigterm_cascade"):
            assert r.role == "symptom", r.id
