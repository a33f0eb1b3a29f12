"""The library entry point: diagnose(paths) -> Diagnosis. The CLI is a thin layer over this."""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator, Optional

from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.engine.loader import Rulebook, load_rulebook
from slurmdoc.engine.matcher import Matcher
from slurmdoc.errors import InputError
from slurmdoc.ingest.activity import ActivityTracker
from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.damage import ANSI, FENCE_WORDS, repair
from slurmdoc.ingest.escaped import escaped_lines, unescape_frame
from slurmdoc.ingest.prefilter import ENGINES, Prefilter
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.ingest.scan import Budget, Scan
from slurmdoc.ingest.scan import block_size as scan_block
from slurmdoc.ingest.sources import Input, make_inputs, read_lines
from slurmdoc.models import Diagnosis, LogLine, SourceInfo


def _parser(inputs: list[Input]) -> PrefixParser:
    """A prefix parser for these inputs, dating glog times (no year) by the newest input's
    modification time, in UTC, so neither the order of the files, which one was written
    first, nor the process's time zone changes them; with no file, by the time now."""
    newest = None
    for inp in inputs:
        if inp.info.path != "<stdin>":
            try:
                m = os.stat(inp.info.path).st_mtime
            except OSError:
                continue
            newest = m if newest is None else max(newest, m)
    t = datetime.now(timezone.utc) if newest is None else datetime.fromtimestamp(newest, timezone.utc)
    t = t.replace(tzinfo=None)
    return PrefixParser(t.year, until=t)


NULS = re.compile("\x00+")
DAMAGE_CHARS = frozenset("\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1c\x1d\x1e\x1f\x7f\ufffd")
DAMAGE = re.compile("^[\x01-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\ufffd]+")


def split_line(parser: PrefixParser, src: SourceInfo, lineno: int, raw: str) -> list[LogLine]:
    """One input line as LogLine(s); `\\r` segments share their line number.

    ANSI colour/cursor sequences are removed first: they are terminal decoration, and they
    would hide prefixes and exception lines from the parser. A list, not a generator: nearly
    every line is one LogLine, and this runs for every line parsed.
    """
    if "\x1b" in raw:
        raw = ANSI.sub("", raw)
    if "\x00" in raw or raw[:1] in DAMAGE_CHARS:
        # a run of NULs is a hole a crash left mid-write (the bytes never written, newline
        # included): what follows is a record of its own, prefix and all, like a `\r` segment;
        # other damage (control bytes, undecodable bytes) before a record's prefix is dropped
        raw = "\r".join(DAMAGE.sub("", seg) for seg in NULS.sub("\r", raw).split("\r")).strip("\r")
    segments: Optional[list[str]] = None
    if "\\" in raw:
        if "\\n" in raw and (pieces := escaped_lines(raw)) is not None:
            # a traceback kept inside a string (a JSON record's field, a repr): the lines it
            # holds, each a piece of this line as a `\r` segment is
            segments = [seg for piece in pieces for seg in piece.split("\r")]
        elif (frame := unescape_frame(raw)) is not None:
            raw = frame  # a frame of such a string printed with real line breaks
    if segments is None:
        if "\r" not in raw and (ll := parser.parse_one(src, lineno, raw)) is not None:
            return [ll]
        segments = raw.split("\r")
    # `\r` progress updates and records glued to them: one LogLine per piece,
    # pieces without a prefix of their own belong to the line's first printer
    out: list[LogLine] = []
    head: Optional[LogLine] = None
    for seg in segments:
        for piece in parser.split_glued(seg):
            ll = parser.parse(src, lineno, piece, head)
            if head is None:
                head = ll
            out.append(ll)
    return out


def iter_loglines(inputs: list[Input], warnings: list[str], on_bytes: Optional[Callable[[int], None]] = None, exact: bool = False) -> Iterator[LogLine]:
    """Every input line as LogLine(s), in order (the line-by-line reader); paste damage is
    undone as `diagnose` does, unless `exact` (every physical line, as it is)."""
    parser = _parser(inputs)
    for inp in inputs:
        numbered = ((n, raw, True) for n, raw in read_lines(inp, warnings, on_bytes))
        for lineno, raw, _ in numbered if exact else repair(numbered):
            yield from split_line(parser, inp.info, lineno, raw)


_PREFILTERS: dict[tuple, Prefilter] = {}


def _superset():
    """engine.superset, imported only when a quiet search is built (6 ms a run otherwise)."""
    from slurmdoc.engine import superset

    return superset


def _prefilter(matcher: Matcher, engine: str) -> Prefilter:
    """The compiled prefilter of a rule set's keywords, built once per process: a scan of
    thousands of jobs diagnoses each with the same rules (compiling costs tens of ms per job).
    The keywords of rules that can be judged line by line are guarded by the rules' line
    supersets (a quiet search, for a log with such a keyword on almost every line)."""
    keywords = matcher.keywords
    # the guards come from the rules' patterns and scopes: another rule set, another prefilter
    key = (tuple(keywords[0]), tuple(keywords[1]), engine,
           tuple((r.id, r.spec.scope, r.spec.ignore_case, tuple(p.pattern for p in r.patterns)) for r in matcher.book.rules))
    pf = _PREFILTERS.get(key)
    if pf is None:
        if len(_PREFILTERS) >= 4:
            _PREFILTERS.clear()
        rules = matcher.book.rules
        # a colour code can split a keyword in the raw bytes (`: \x1b[31merror\x1b[0m: `): a
        # coloured line is read whole, its codes taken off, and the rules' keywords tried again
        # a paste's code fences (both of Markdown's) are searched for too: the reader records one as a break between
        # excerpts (damage.repair), which the exact reader sees on every line
        pf = _PREFILTERS[key] = Prefilter([*keywords[0], *FENCE_WORDS], keywords[1], engine=engine, marks=("\x1b[",),
                                          guards=lambda: _superset().line_guards(rules), guards_key=lambda: _superset().guards_key(rules))
    return pf


def diagnose(
    paths: list[str],
    rulebook: Optional[Rulebook] = None,
    rule_dirs: Optional[list[str]] = None,
    skew: float = 1.0,
    on_bytes: Optional[Callable[[int], None]] = None,
    budget: Optional[Budget] = Budget(),
    stats: Optional[dict] = None,
    tail_bytes: Optional[int] = None,
    facts: Optional[dict] = None,
    traces: Optional[str] = None,
) -> Diagnosis:
    """Read the logs at `paths` (files, directories, globs, '-'), and name the root cause.

    `tail_bytes`: read only the last bytes of each log file (a diagnosis cut short by a
    time budget); sources keep the file's path and line numbers.

    `budget` sets how much the fast reader parses around what the prefilter finds (see
    ingest/scan.py); `budget=None` parses every line. `stats`, when given, receives the
    reader's counts (lines, lines parsed, prefilter hits, prefilter engine). `facts`: what is
    known of the job from outside the log, for the remediation (`job_facts` of its accounting).
    `traces`: the ranks' flight-recorder dumps (a directory, a `<prefix>` of `<prefix><rank>`
    files, or one file), read and fused with the log's verdict (diagnosis.recorder).
    Raises InputError when nothing readable is found (or the dumps are unreadable), RuleError
    for an invalid rule pack.
    """
    recorded = None
    if traces is not None:  # read first: a bad path is the user's error before any log is read
        from slurmdoc.diagnosis.recorder import read_verdict

        recorded = read_verdict(traces)
    book = rulebook if rulebook is not None else load_rulebook(rule_dirs)
    warnings: list[str] = []
    inputs = make_inputs(paths, warnings, tail_bytes)
    matcher = Matcher(book)
    assembler = Assembler(matcher.interesting)
    analyzer = Analyzer([i.info for i in inputs], skew=skew)
    facts = dict(facts or {})
    if "job" not in facts and all(os.path.basename(i.info.path).startswith("slurm-") for i in inputs):
        # Slurm's default output name says which job it is (slurm-%j.out)
        from slurmdoc.slurm.locate import job_of_default_name

        job = job_of_default_name([i.info.path for i in inputs])
        if job is not None:
            facts["job"] = job
    analyzer.facts = facts
    parser = _parser(inputs)
    prefilter = None
    if budget is not None:
        engine = os.environ.get("SLURMDOC_PREFILTER", "auto")
        if engine not in ENGINES:
            raise InputError(f"SLURMDOC_PREFILTER={engine!r} is not a prefilter", f"use one of {', '.join(ENGINES)}")
        try:
            prefilter = _prefilter(matcher, engine)
        except RuntimeError as e:
            raise InputError(f"SLURMDOC_PREFILTER={engine}: {e}", "install it, or use auto") from None
    tracker = ActivityTracker(sources=[i.info for i in inputs])
    observe = tracker.observe
    note = analyzer.note_stream
    seen = analyzer.seen
    hosts = analyzer.line_hosts
    classify = matcher.classify
    add = analyzer.add

    def settle() -> None:
        """Classify what the assembler holds: nothing being assembled goes on past here."""
        for ev in assembler.flush():
            m = classify(ev)
            if m is not None:
                add(ev, m)

    lines = parsed = hits = 0
    buffer: Optional[bytearray] = None
    for inp in inputs:
        if prefilter is not None and budget is not None:
            head, tail = budget.per_input(len(inputs))
            if buffer is None:
                buffer = bytearray(scan_block())
            reader = Scan(inp, prefilter, head, tail, budget, warnings, assembler.busy, assembler.skipped, on_bytes, seen.__len__, buffer)
            numbered: Iterable[tuple[int, str, bool]] = reader
        else:
            reader = None
            numbered = ((n, raw, True) for n, raw in read_lines(inp, warnings, on_bytes))
        src = inp.info
        n = 0
        breaks = src.excerpt_breaks
        gone = 0  # the breaks (a paste's code fences) the lines fed so far have passed
        for n, raw, hit in repair(numbered, breaks):  # paste damage undone before prefixes are parsed
            if len(breaks) > gone and breaks[gone] < n:
                # a fence ended a pasted excerpt: nothing being assembled goes on past it
                while gone < len(breaks) and breaks[gone] < n:
                    gone += 1
                settle()
            parsed += 1
            assembler.quiet = not hit
            for ll in split_line(parser, src, n, raw):
                observe(ll)
                if ll.stream not in seen:
                    if ll.origin == "rank":
                        note(ll.stream, ll.who)  # only printers with a rank count for the layout
                    if ll.node is not None and len(hosts) < 2 and ll.node not in hosts:
                        hosts.add(ll.node)  # two hosts tagging lines: a multi-node job
                if parser.late:
                    for stream, who in parser.take_late():
                        note(stream, who)  # ranks a prefix was confirmed for after their lines
                for ev in assembler.feed(ll):
                    m = classify(ev)
                    if m is not None:
                        add(ev, m)
        if reader is not None:
            lines += reader.lines
            hits += reader.hits
        else:
            lines += n
    settle()
    if stats is not None:
        stats.update(lines=lines, parsed=parsed, hits=hits, engine=prefilter.engine if prefilter else "exact")
    if lines == 0:
        if warnings:
            raise InputError(warnings[-1])
        raise InputError(f"{', '.join(i.info.path for i in inputs)}: input is empty, nothing to diagnose")
    warnings.extend(matcher.timeouts)
    diag = analyzer.finish(lines, tuple(i.info.path for i in inputs), warnings, activity=tracker.result())
    if recorded is not None:
        from slurmdoc.diagnosis.recorder import fuse_recorder

        diag = fuse_recorder(diag, recorded, traces or "")
    return diag


# The Slurm integration's entry points (triage, diagnose_job, epilog) live in slurmdoc.slurm;
# they are re-exported here so `slurmdoc.api` stays the one library surface, and imported
# only when asked for, so that `diagnose` does not pay for them at start-up.
def __getattr__(name: str):
    if name.startswith("_"):  # `from slurmdoc.api import diagnose` asks for __path__: no import for that
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import slurmdoc.slurm.api as slurm_api

    obj = getattr(slurm_api, name, None)
    if obj is not None and getattr(obj, "__module__", None) == slurm_api.__name__:
        return obj  # a function or class defined there, not something it imported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
