"""Run each rule's own examples through the whole pipeline.

A `match` example must be classified as that rule by the full pack (so a higher-priority
rule cannot silently steal it) with the expected captures; a `no_match` example must not
produce a finding of that rule; a `todo_match` example is a known miss and is reported if
it starts to pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from slurmdoc.engine.loader import Rule, Rulebook
from slurmdoc.engine.matcher import Match, Matcher
from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import Event, SourceInfo


@dataclass(frozen=True)
class ExampleResult:
    rule_id: str
    kind: str  # match | no_match | todo_match
    index: int
    ok: bool
    detail: str


def classify_text(matcher: Matcher, text: str) -> list[tuple[Event, Optional[Match]]]:
    """Every event that `text` (one or more log lines) yields, with its classification."""
    src = SourceInfo(index=0, path="<example>")
    parser = PrefixParser(2000)
    asm = Assembler(matcher.interesting)
    out: list[tuple[Event, Optional[Match]]] = []
    for i, raw in enumerate(text.split("\n"), 1):
        for ev in asm.feed(parser.parse(src, i, raw)):
            out.append((ev, matcher.classify(ev)))
    for ev in asm.flush():
        out.append((ev, matcher.classify(ev)))
    return out


def check_rule(rule: Rule, matcher: Matcher) -> list[ExampleResult]:
    results: list[ExampleResult] = []
    ex = rule.spec.examples
    for i, example in enumerate(ex.matches()):
        got = [m for _, m in classify_text(matcher, example.text) if m is not None]
        mine = [m for m in got if rule.id in (m.rule.id, m.via)]
        if not mine:
            others = ", ".join(sorted({m.rule.id for m in got})) or "no rule"
            results.append(ExampleResult(rule.id, "match", i, False, f"not classified as {rule.id} (got: {others})"))
            continue
        caps = mine[0].captures
        wrong = {k: (v, caps.get(k)) for k, v in example.captures.items() if caps.get(k) != v}
        if wrong:
            detail = "; ".join(f"{k}: expected {v!r}, got {g!r}" for k, (v, g) in wrong.items())
            results.append(ExampleResult(rule.id, "match", i, False, f"captures differ: {detail}"))
        else:
            results.append(ExampleResult(rule.id, "match", i, True, "ok"))
    for i, text in enumerate(ex.no_match):
        got = [m for _, m in classify_text(matcher, text) if m is not None and rule.id in (m.rule.id, m.via)]
        results.append(ExampleResult(rule.id, "no_match", i, not got, "ok" if not got else f"{rule.id} matched text it must not match"))
    for i, text in enumerate(ex.todo_match):
        got = [m for _, m in classify_text(matcher, text) if m is not None and rule.id in (m.rule.id, m.via)]
        results.append(ExampleResult(rule.id, "todo_match", i, not got, "known miss" if not got else "now matches: move it to match"))
    return results


def check_book(book: Rulebook) -> list[ExampleResult]:
    matcher = Matcher(book)
    out: list[ExampleResult] = []
    for rule in book.rules:
        out.extend(check_rule(rule, matcher))
    return out
