#!/usr/bin/env python3
"""Fuzz target: arbitrary bytes through slurmdoc's public entry points.

`one_input(data)` must never raise anything but slurmdoc's documented InputError (a
one-line error, exit 2): not on a log, a gzip of it, a damaged gzip, two files, or a rule
file. The first byte picks what the rest is fed as. Every diagnosis is rendered in all
three formats and the JSON is checked against the contract's schema.

By hand, with coverage guidance (atheris, a libFuzzer front end: `pip install atheris`):

    python fuzz/fuzz_diagnose.py -max_total_time=600            # seeds from tests/forms
    python fuzz/fuzz_diagnose.py CORPUS_DIR -runs=200000 -seed=1

In CI the same target runs for a fixed budget under Hypothesis (tests/test_fuzz.py).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("log", "gzip", "raw-gzip", "two-files", "rule")


class Target:
    """Holds the rule book, the schema and a scratch directory across executions."""

    def __init__(self, workdir: str | None = None) -> None:
        from slurmdoc.engine.loader import load_rulebook

        self.book = load_rulebook()
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="slurmdoc-fuzz-"))
        self.schema = json.loads((ROOT / "tests" / "contract_schema.json").read_text())
        self.executions = 0

    def one_input(self, data: bytes) -> str:
        """Run one input; returns the mode used. Raises on a bug."""
        from slurmdoc.errors import InputError

        self.executions += 1
        mode = MODES[data[0] % len(MODES)] if data else "log"
        body = data[1:]
        if mode == "rule":
            self._rule(body)
            return mode
        paths = []
        if mode == "log":
            paths.append(self._write("job.log", body))
        elif mode == "gzip":
            paths.append(self._write("job.log.gz", gzip.compress(body, mtime=0)))
        elif mode == "raw-gzip":  # gzip magic, then whatever: damaged and truncated streams
            paths.append(self._write("job.log.gz", b"\x1f\x8b" + body))
        else:
            cut = body.find(b"\n", len(body) // 2)
            paths.append(self._write("rank_0.log", body[: cut + 1]))
            paths.append(self._write("rank_1.log", body[cut + 1 :]))
        try:
            from slurmdoc.api import diagnose

            d = diagnose(paths, rulebook=self.book)
        except InputError:
            return mode
        self._render(d)
        return mode

    def _write(self, name: str, data: bytes) -> str:
        p = self.dir / name
        p.write_bytes(data)
        return str(p)

    def _render(self, d) -> None:
        import jsonschema
        from rich.console import Console

        from slurmdoc.report.json_format import render as render_json
        from slurmdoc.report.markdown import render as render_md
        from slurmdoc.report.terminal import render as render_term

        doc = json.loads(render_json(d))
        jsonschema.validate(doc, self.schema)
        assert (doc["root_cause"] is None) == (doc["status"] == "no_failure")
        render_md(d)
        render_term(d, Console(file=io.StringIO(), width=100, no_color=True))

    def _rule(self, body: bytes) -> None:
        from slurmdoc.engine.loader import Rulebook, load_file
        from slurmdoc.engine.matcher import Matcher
        from slurmdoc.engine.selftest import check_rule
        from slurmdoc.errors import RuleError

        path = Path(self._write("fuzz-rule.yaml", body))
        try:
            rule = load_file(path, "fuzz")
        except RuleError:
            return
        check_rule(rule, Matcher(Rulebook(self.book.rules + [rule])))


def seed_corpus(max_bytes: int = 4096) -> list[bytes]:
    """Real log shapes to start from: the hand-written forms, the torchrun fixtures, rules."""
    seeds = []
    for p in sorted((ROOT / "tests" / "forms").glob("*.log")) + sorted((ROOT / "fixtures").rglob("*.log")):
        seeds.append(b"\x00" + p.read_bytes()[:max_bytes])
    for p in sorted((ROOT / "rules").rglob("*.yaml"))[:10]:
        seeds.append(bytes([MODES.index("rule")]) + p.read_bytes())
    return seeds


def main() -> None:
    import atheris

    with atheris.instrument_imports():
        import slurmdoc.api  # noqa: F401
        import slurmdoc.engine.loader  # noqa: F401

    target = Target()
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):  # no corpus dir given: make one from the seeds
        corpus = Path(tempfile.mkdtemp(prefix="slurmdoc-corpus-"))
        for i, s in enumerate(seed_corpus()):
            (corpus / f"seed{i:03d}").write_bytes(s)
        args.append(str(corpus))
    atheris.Setup(args, target.one_input)
    try:
        atheris.Fuzz()
    finally:
        sys.stderr.write(f"executions: {target.executions}\n")


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    main()
