"""The library entry point: diagnose(paths) -> Diagnosis. The CLI is a thin layer over this."""

from __future__ import annotations

import os
import re
from datetime import datetime
from typing import Callable, Optional

from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.engine.loader import Rulebook, load_rulebook
from slurmdoc.engine.matcher import Matcher
from slurmdoc.errors import InputError
from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.ingest.sources import Input, make_inputs, read_lines
from slurmdoc.models import Diagnosis, LogLine


def _default_year(inputs: list[Input]) -> int:
    for inp in inputs:
        if inp.info.path != "<stdin>":
            try:
                return datetime.fromtimestamp(os.stat(inp.info.path).st_mtime).year
            except OSError:
                continue
    return datetime.now().year


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def iter_loglines(inputs: list[Input], warnings: list[str], on_bytes: Optional[Callable[[int], None]] = None):
    """Every input line as LogLine(s), in order; `\\r` segments share their line number.

    ANSI colour/cursor sequences are removed first: they are terminal decoration, and they
    would hide prefixes and exception lines from the parser.
    """
    parser = PrefixParser(_default_year(inputs))
    for inp in inputs:
        src = inp.info
        for lineno, raw in read_lines(inp, warnings, on_bytes):
            if "\x1b" in raw:
                raw = ANSI.sub("", raw)
            if "\r" in raw or parser.glued(raw):
                # `\r` progress updates and records glued to them: one LogLine per piece,
                # pieces without a prefix of their own belong to the line's first printer
                head: Optional[LogLine] = None
                for seg in raw.split("\r"):
                    for piece in parser.split_glued(seg):
                        ll = parser.parse(src, lineno, piece, head)
                        if head is None:
                            head = ll
                        yield ll
            else:
                yield parser.parse(src, lineno, raw)


def diagnose(
    paths: list[str],
    rulebook: Optional[Rulebook] = None,
    rule_dirs: Optional[list[str]] = None,
    skew: float = 1.0,
    on_bytes: Optional[Callable[[int], None]] = None,
) -> Diagnosis:
    """Read the logs at `paths` (files, directories, globs, '-'), and name the root cause.

    Raises InputError when nothing readable is found, RuleError for an invalid rule pack.
    """
    book = rulebook if rulebook is not None else load_rulebook(rule_dirs)
    warnings: list[str] = []
    inputs = make_inputs(paths, warnings)
    matcher = Matcher(book)
    assembler = Assembler(matcher.interesting)
    analyzer = Analyzer([i.info for i in inputs], skew=skew)
    lines = 0
    note = analyzer.note_stream
    seen = analyzer.seen
    for ll in iter_loglines(inputs, warnings, on_bytes):
        lines += 1
        if ll.stream not in seen and ll.origin == "rank":
            note(ll.stream, ll.who)  # only printers with a rank count for the layout
        for ev in assembler.feed(ll):
            m = matcher.classify(ev)
            if m is not None:
                analyzer.add(ev, m)
    for ev in assembler.flush():
        m = matcher.classify(ev)
        if m is not None:
            analyzer.add(ev, m)
    if lines == 0:
        if warnings:
            raise InputError(warnings[-1])
        raise InputError(f"{', '.join(i.info.path for i in inputs)}: input is empty, nothing to diagnose")
    warnings.extend(matcher.timeouts)
    return analyzer.finish(lines, tuple(i.info.path for i in inputs), warnings)


# The Slurm integration's entry points (triage, diagnose_job, epilog) live in slurmdoc.slurm;
# they are re-exported here so `slurmdoc.api` stays the one library surface.
from slurmdoc.slurm.api import triage  # noqa: E402,F401
