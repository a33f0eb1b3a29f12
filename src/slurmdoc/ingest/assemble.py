"""Per-stream assembly of lines into events.

A stream is everything one printer wrote (one rank, one launcher, one file with no
prefixes). In each stream, Python tracebacks, including chained ones ("During handling of
the above exception ..."), become one event keeping their frames, exception lines and the
message lines that follow (e.g. torchrun's ChildFailedError summary). Every other line that
the rule pack's keywords find interesting becomes a one-line event. Events are bounded in
size, so memory depends on the number of streams, not on the log's length.

Logs are often fragments, so a traceback is also assembled from what is left of it (see
Event.form): frames with no header above them (a paste that starts mid-traceback), frames
cut before their exception line (the log ends, or a gap such as `[... trimmed ...]` or a
blank line and unrelated output follows), and an exception line standing alone. Rich's
box-drawn tracebacks count as tracebacks too. A header printed behind a rank prefix whose
frames follow with no prefix (`[RANK 1] <time> [ERROR] Traceback ...` from a logging call)
keeps those frames.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Callable, Optional

from slurmdoc.ingest.activity import is_progress
from slurmdoc.models import Event, LogLine, RankRef

TB_HEADER = re.compile(
    r"\s{0,4}(?:\+ )?(?:Exception Group )?Traceback \(most recent call last\):\s*$"
    r"|╭─+ Traceback \(most recent call last\) ─+╮\s*$"  # rich
)
# a frame line: `  File "x.py", line 3, in f` (also without `, in f`: a SyntaxError's),
# or rich's `│ /path/x.py:3 in f  │`
FRAME = re.compile(r'\s*File "[^"\n]+", line \d+(?:, in \S.*)?\s*$|│ \S+:\d+ in \S+\s*│?\s*$')
# the lines of a rich traceback's box
BOX = ("│", "╰", "╭")
# a class name that says it is an exception, then its message: an exception line that can
# stand alone (`RuntimeError: ...`, `torch.OutOfMemoryError: ...`, `pkg.mod.SomeException`)
# (`Wrapper(InnerType): ...`: a task framework's exception wrapping a worker's, e.g. Ray's)
EXC_ALONE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:\((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\))?(?::(?: .*)?)?\s*$")
# a paste's marks for left-out lines: `...`, `…`, `[... trimmed ...]`, `<...>`, `(12 lines omitted)`
ELISION = re.compile(r"\s*(?:\.{3,}|…|[\[(<]\s*(?:\.{2,}|…)[^\])>]*[\])>]|[\[(<]?\s*\d+ (?:more )?lines? (?:omitted|trimmed|skipped|hidden|elided)\W*)\s*$")
CHAIN_MARKER = re.compile(
    r"\s{0,4}(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$"
)
# `pkg.mod.SomeError: message`, `KeyboardInterrupt`, `torch.OutOfMemoryError: ...`
# an exception line: `Name: message`, a dotted `module.name`, or a bare `Name` (classes are
# capitalised: a lowercase word after the frames, bare or before a colon, `env: ...`, is the
# program's next output)
EXC_LINE = re.compile(r"(?:(?:[A-Za-z_][\w]*\.)+[A-Za-z_]\w*|[A-Z_]\w*)(?:\[[^\]]*\]|\((?:[A-Za-z_]\w*\.)*[A-Z]\w*\))?(?::(?: .*)?)?$")
RECORD_START = re.compile(
    r"\[?[IWEF]\d{3,4} \d\d:\d\d|\[?\d{4}-\d\d-\d\d[T _]\d\d:\d\d|Traceback \(most|terminate called|frame #\d+:"
)

# a log record's level at the start of a line: `INFO:root:`, `WARNING:torch...`, `[INFO]`, `[W ...]`
LOG_LEVEL = re.compile(r"\[?(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL|NOTICE)\b[\]:| ]|\[[IWEF][ \d]|\[?\d\d:\d\d:\d\d\b")
PROGRESS = re.compile(r"\d+%\||\d+/\d+ \[\d|it/s\]|s/it\]")
# torchrun's summary: a failure entry's head `[0]:` and its fields `  rank      : 5 (local_rank: 1)`
ENTRY_HEAD = re.compile(r"\s*\[\d+\]:\s*$")
# what torchrun writes in an entry's traceback field when the worker recorded none
NO_TRACEBACK = "To enable traceback see"
# the heads of torchrun's summary sections; a paste or a tail may start at one of them
# (older torchelastic: `Root Cause:`, `Other Failures:`, and a `msg:` field for the traceback)
SUMMARY_HEAD = re.compile(r"\s*(?:Root Cause(?: \(first observed failure\))?|(?:Other )?Failures):\s*$")
# the lines a traceback event begins at in a stream in no event (_idle): a header, a frame, an
# exception line standing alone, a launcher summary's head. A `traceback`-scope rule judges only
# such events: the quiet search (engine.superset) looks for its keywords only on lines one of
# these may match, so a keyword of one added here must begin its event here too
STARTS = (TB_HEADER, FRAME, EXC_ALONE, SUMMARY_HEAD)
ENTRY_FIELD = re.compile(r"\s*(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
# the worker's error record (JSON) under an empty `msg:` field: its "message" is the exception line
RECORD_MESSAGE = re.compile(r'\s*"message"\s*:\s*"((?:[^"\\]|\\.)*)"?')
# an error record's class, on the line above its message (`"name": "KeyError",` then `"message":
# "..."`: an error object as JSON, what a notebook's error output is copied as; nbformat's
# `"ename"` / `"evalue"`), or on the same line (a record printed compact)
RECORD_NAME = re.compile(r'\s*[{,]?\s*"e?name"\s*:\s*"((?:[A-Za-z_]\w*\.)*[A-Z]\w*)"\s*,?\s*(?:"(?:message|evalue)"\s*:\s*"((?:[^"\\]|\\.)*)"?.*)?$')
RECORD_VALUE = re.compile(r'\s*"(?:message|evalue)"\s*:\s*"((?:[^"\\]|\\.)*)"?')
# a program saying the traceback it logs next is harmless
WAIVER = re.compile(r"(?:safe|safely) (?:to )?(?:be )?ignored?\b|can (?:be )?(?:safely )?ignored?\b|(?:you )?may ignore (?:this|the following)|ignoring (?:this|the following) (?:error|exception)", re.I)
# Python's own head above a traceback it prints for an exception it drops, the unraisable
# hook's (`Exception ignored in: <obj>`, also `... ignored on/while ...`): raised where nothing
# can catch it (a `__del__`, a finalizer, a callback, a thread's teardown at exit), so it is
# never a failure. (threading's `Exception in thread <name>:` is no such head: that thread's
# work stopped, and what follows from it is judged as any error is, earliest first, outlived
# when its printer goes on)
# Older Pythons print `Error in atexit._run_exitfuncs:` above an exit handler's exception,
# which is dropped the same way (the exit status stays the program's own).
UNRAISED = re.compile(r"\s{0,4}(?:Exception ignored (?:in|on|while)\b|Error in atexit\._run_exitfuncs:\s*$)")
# a launcher naming the process whose traceback it prints next (torch.multiprocessing.spawn)
TOLD = re.compile(r"\s*-- Process (\d+) terminated with the following error:\s*$")
EMBEDDED_TB = re.compile(r"\s{0,4}Original Traceback \(most recent call last\):\s*$")
BANNER = re.compile(r"[=\-]{10,}\s*$")
# older torchelastic's border around its summary (its sections are banners)
BORDER = re.compile(r"\*{10,}\s*$")
# lines PyTorch appends to CUDA error messages, unindented
KNOWN_CONTINUATIONS = ("CUDA kernel errors might", "For debugging consider passing", "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Device-side assertion")

MAX_STREAMS = 50_000  # beyond this many printers, idle streams are forgotten
MAX_EVENT_LINES = 400
MAX_TAIL_LINES = 2000
MAX_FOREIGN = 50
MAX_MESSAGE_LINES = 40  # unindented lines an exception message may run on for


def _bare(line: LogLine) -> bool:
    """A line printed with no prefix at all (no rank, label, host or tag)."""
    w = line.who
    return line.origin == "unknown" and not line.offset and line.tag is None and line.node is None and w.label is None and w.rank is None and w.local is None


class _Stream:
    __slots__ = ("mode", "event", "pending", "foreign", "tail", "held", "last_ts", "ts_gen", "banners", "embedded", "carried", "last_seq", "gap", "plain", "colon", "stack", "indent", "entry", "told", "waives", "unraised", "unraised_open", "entry_seq", "open_summary", "summary_done", "record")

    def __init__(self) -> None:
        self.mode = "idle"  # idle | frames | tail | gap | chain
        self.event: Optional[Event] = None
        self.pending = 0
        self.foreign = 0
        self.tail = 0
        self.held: list[LogLine] = []
        self.banners = 0
        self.embedded = False
        self.carried = False  # the message under the exception line holds frames (a traceback it carries)
        self.gap = False  # frames were followed by a blank line or an elision mark
        self.plain = 0  # unindented lines an exception message ran on for
        self.colon = False  # the stream's previous line ended in ':' (it may introduce a stack)
        self.waives = False  # the stream's previous line said what follows is harmless
        self.unraised = False  # the stream's previous line was Python's head for an exception it dropped
        self.unraised_open = False  # ... and that head's object was cut by a line break (`... of` / `<obj>>`)
        self.stack = False  # frames with no header, after a line introducing them
        self.indent: Optional[int] = None  # the indentation of the traceback's first frame
        self.entry: list[LogLine] = []  # the failure entry of a launcher summary being read
        self.entry_seq: Optional[int] = None  # that entry is the Root Cause: the summary's place in the order
        self.open_summary = False  # a summary pasted without its opening banner: no closing one to wait for
        self.summary_done = False  # a launcher summary's closing banner was read: nothing after it is its own
        self.told: Optional[int] = None  # a launcher said whose traceback comes next (its process index)
        self.record: Optional[str] = None  # the stream's previous line named an error record's class
        self.last_ts: Optional[datetime] = None
        self.ts_gen = 0
        self.last_seq = 0


class Assembler:
    def __init__(self, interesting: Callable[[str], bool]) -> None:
        self.interesting = interesting
        self.streams: dict[tuple, _Stream] = {}
        self.source_ts: dict[int, datetime] = {}
        self.source_gen: dict[int, int] = {}
        self.seq = 0
        self.gen = 0  # bumped when lines went unseen: timestamps seen before may be stale
        self.active: dict[tuple, _Stream] = {}  # streams in the middle of an event
        self.quiet = False  # set by the reader: no trigger word on the current input line
        self.last: Optional[tuple[tuple, _Stream]] = None  # the stream of the previous line, while in an event

    # ---- public -----------------------------------------------------------------
    def feed(self, line: LogLine) -> list[Event]:
        """The events `line` completes (a list, not a generator: most lines complete none, and
        this runs for every line parsed)."""
        self.seq += 1
        st = self.streams.get(line.stream)
        if st is None:
            if len(self.streams) >= MAX_STREAMS:
                # bounded memory whatever the prefixes look like: keep only streams that
                # are in the middle of a traceback
                self.streams = {k: v for k, v in self.streams.items() if v.mode != "idle"}
            st = self.streams[line.stream] = _Stream()
        if line.ts is not None:
            st.last_ts = line.ts
            st.ts_gen = self.gen
            self.source_ts[line.source] = line.ts
            self.source_gen[line.source] = self.gen
        st.last_seq = self.seq
        owner = self._owner(st, line) if self.last is not None else None
        if owner is not None:
            # a bare line continuing the traceback the previous line belonged to
            line = LogLine(line.source, line.lineno, line.raw, line.offset, line.text, owner.first.origin, owner.first.who, owner.first.node, owner.first.tag, line.ts, owner.first.stream)
            st = self.streams[line.stream]
            st.last_seq = self.seq
        out: list[Event] = []
        self._step(st, line, out)
        t = line.text
        st.colon = t.rstrip().endswith(":")
        st.record = m.group(1) if 'name"' in t and (m := RECORD_NAME.match(t)) is not None and m.group(2) is None else None
        st.waives = "gnor" in t and WAIVER.search(t) is not None
        if ("xception ignored" in t or "atexit" in t) and UNRAISED.match(t) is not None:
            # the head names the object; a long repr wraps onto one more line, ending in `>`
            st.unraised, st.unraised_open = True, not t.rstrip().endswith((">", ":"))
        else:
            st.unraised = st.unraised_open and t.rstrip().endswith(">")
            st.unraised_open = False
        self.last = (line.stream, st) if st.mode != "idle" else None
        if st.mode == "idle":
            if self.active:
                self.active.pop(line.stream, None)
        else:
            self.active[line.stream] = st
        return out

    def skipped(self) -> None:
        """Some lines were not fed (the fast reader skipped them)."""
        self.gen += 1
        self.last = None  # the next line does not follow the last one fed

    def busy(self, horizon: int = 2048) -> bool:
        """Is some stream in the middle of an event that its next lines may continue?

        A stream silent for `horizon` lines no longer counts: a rank that died in the
        middle of printing must not keep the reader parsing every line to the end.
        """
        floor = self.seq - horizon
        return any(st.last_seq > floor for st in self.active.values())

    def _owner(self, st: _Stream, line: LogLine) -> Optional[Event]:
        """The traceback a line with no prefix at all continues, if any.

        A header printed behind a prefix (`[RANK 1] <time> [ERROR] Traceback ...`: a logging
        call given a formatted traceback) is followed by frames with no prefix; they belong
        to the header's printer while they look like a traceback's frames and the bare
        stream is not in a traceback of its own.
        """
        last = self.last
        if last is None or st.mode != "idle" or not _bare(line):
            return None
        stream, owner = last
        if stream == line.stream or owner.event is None or _bare(owner.event.first):
            return None
        t = line.text
        if owner.mode == "frames" and (not t.strip() or t[0] in " \t" or t.startswith(BOX) or FRAME.match(t) or EXC_LINE.match(t)):
            return owner.event
        if owner.mode == "tail" and t[:1] in (" ", "\t"):
            return owner.event
        return None

    def flush(self) -> list[Event]:
        out: list[Event] = []
        for st in self.streams.values():
            self._close(st, out)
        self.streams.clear()
        self.active.clear()
        return out

    # ---- internals --------------------------------------------------------------
    def _when(self, st: _Stream, line: LogLine) -> Optional[datetime]:
        if line.ts is not None:
            return line.ts
        src = self.source_ts.get(line.source)
        stream_fresh = st.last_ts is not None and st.ts_gen == self.gen
        if src is not None and self.source_gen.get(line.source) == self.gen and not stream_fresh:
            return src  # the neighbours' time is closer than this stream's last, stale one
        if st.last_ts is not None and src is not None:
            # no earlier than the latest time printed before it in its file
            return max(st.last_ts, src)
        return st.last_ts or src

    def _idle(self, st: _Stream, line: LogLine, out: list[Event]) -> None:
        t = line.text
        if "Traceback" in t and TB_HEADER.match(t):
            self._start(st, line, "whole", "frames")
            return
        if t[-1:] == ":" and SUMMARY_HEAD.match(t):
            # a launcher summary whose banner and ChildFailedError were cut off (or stand
            # apart from it, another printer's line between them): its entries are read as in
            # a whole one, up to the first line that is none of its own (an entry, a field, a
            # field's indented traceback, a banner). Whatever the prefilter found on the line:
            # `Failures:` holds no rule's keyword, and the exact reader starts here too
            self._start(st, line, "alone", "tail")
            st.banners = 1
            st.open_summary = True
            return
        if t and not self.quiet:
            if ("File" in t or t[0] == "│") and FRAME.match(t):
                # a paste that starts mid-traceback; or a stack that the previous line
                # announced (a warning's "Traceback of forward call ...:", logging's
                # stack_info): that one is a traceback only if an exception line ends it
                stack = st.colon
                self._start(st, line, "headerless", "frames")
                st.stack = stack
                return
            if ("Error" in t or "Exception" in t) and EXC_ALONE.match(t):
                # an exception line with no frames above it; its message may run on
                ev = self._start(st, line, "alone", "tail")
                ev.exception_idx.append(0)
                return
            rec, name = None, st.record
            if '"message"' in t or '"evalue"' in t:
                rec = RECORD_VALUE.match(t)
                if rec is None and 'name"' in t and (both := RECORD_NAME.match(t)) is not None and both.group(2) is not None:
                    rec, name = both, both.group(1)  # the class and its message on one line
            if rec is not None:
                value = _json_text(rec.group(rec.lastindex or 1)).lstrip().split("\n", 1)[0]
                if name is not None and not EXC_ALONE.match(value) and EXC_ALONE.match(name):
                    # the record's class stands in a field of its own: the exception line is
                    # the class and the message, as Python prints it
                    value = f"{name}: {value}"
                if ("Error" in value or "Exception" in value) and EXC_ALONE.match(value):
                    # an error record's message (pretty-printed JSON) naming an exception:
                    # what torchelastic's @record writes for a process that failed, and logs
                    # when the agent itself fails; read as its first line, an exception alone
                    one = LogLine(line.source, line.lineno, line.raw, line.offset, value, line.origin, line.who, line.node, line.tag, line.ts, line.stream)
                    ev = Event("traceback", one, [value], [line.lineno], ts=self._when(st, line), seq=self.seq, form="alone")
                    ev.exception_idx.append(0)
                    out.append(ev)
                    return
            if self.interesting(t):
                out.append(Event("line", line, [t], [line.lineno], ts=self._when(st, line), seq=self.seq))

    def _start(self, st: _Stream, line: LogLine, form: str, mode: str) -> Event:
        waived, unraised = st.waives, st.unraised
        if st.told is not None and form == "whole":
            # `-- Process 2 terminated with the following error:` (torch.multiprocessing.spawn)
            # then the child's own traceback: that process printed it
            who = RankRef(line.source, local=st.told, node_index=line.who.node_index, via="launcher")
            line = LogLine(line.source, line.lineno, line.raw, line.offset, line.text, "rank", who, line.node, line.tag, line.ts, line.stream)
            st.told = None
        ev = st.event = Event("traceback", line, [line.text], [line.lineno], ts=self._when(st, line), seq=self.seq, form=form, waived=waived, unraised=unraised)  # type: ignore[arg-type]
        st.open_summary = False
        st.summary_done = False
        st.mode = mode
        st.pending = 0
        st.foreign = 0
        st.tail = 0
        st.banners = 0
        st.plain = 0
        st.gap = False
        st.stack = False
        st.indent = None
        st.embedded = False
        st.carried = False
        return ev

    def _append(self, ev: Event, line: LogLine) -> None:
        if len(ev.lines) >= MAX_EVENT_LINES:
            # drop the oldest frame line after the head, never an exception line: long
            # chains keep the exception they started with and the ones that followed
            keep = set(ev.exception_idx)
            cut = MAX_EVENT_LINES // 4
            while cut in keep and cut < len(ev.lines) - 1:
                cut += 1
            del ev.lines[cut]
            del ev.linenos[cut]
            ev.exception_idx = [i - 1 if i > cut else i for i in ev.exception_idx]
            if ev.origin_idx > cut:
                ev.origin_idx -= 1
            ev.truncated += 1
        ev.lines.append(line.text)
        ev.linenos.append(line.lineno)

    def _close(self, st: _Stream, out: list[Event]) -> None:
        if st.entry:
            entry, st.entry = st.entry, []
            seq, st.entry_seq = st.entry_seq, None
            self._entry_events(entry, out, seq)
        ev = st.event
        held = st.held
        st.event = None
        st.held = []
        st.mode = "idle"
        if ev is not None and not ev.exception_idx and st.stack:
            ev = None  # a printed stack with no exception after it: not a failure
        if ev is not None:
            if not ev.exception_idx:
                ev.form = "cut"
                while len(ev.lines) > 1 and not ev.lines[-1].strip():
                    ev.lines.pop()  # blank lines after the last frame are the gap, not the traceback
                    ev.linenos.pop()
            out.append(ev)
        for h in held:
            self._idle(st, h, out)

    def _step(self, st: _Stream, line: LogLine, out: list[Event]) -> None:
        mode = st.mode
        if "terminated with the following error" in line.text and (m := TOLD.match(line.text)) is not None:
            st.told = int(m.group(1))
        if mode == "idle":
            self._idle(st, line, out)
            return
        ev = st.event
        assert ev is not None
        t = line.text
        if mode == "frames":
            if not t.strip():
                self._append(ev, line)
                st.gap = True
            elif t[0] in " \t" and st.indent and len(t) - len(body := t.lstrip()) < st.indent and EXC_LINE.match(body) and not FRAME.match(t):
                # the traceback printed indented as a whole (pasted in an indented block, or
                # under a launcher's field whose head was cut off): its exception line stands
                # left of its frames, as an unindented one does; read without the indentation
                self._append(ev, line)
                ev.exception_idx.append(len(ev.lines) - 1)
                ev.lines[-1] = body
                self._raised(st, ev)
            elif t[0] in " \t" or t.startswith(BOX):
                if st.indent is None and "File" in t and FRAME.match(t):
                    st.indent = len(t) - len(t.lstrip())
                self._append(ev, line)
                st.gap = ELISION.match(t) is not None
            elif TB_HEADER.match(t):
                st.pending += 1
                st.gap = False
                self._append(ev, line)
            elif st.gap and not EXC_ALONE.match(t) and not FRAME.match(t):
                if ELISION.match(t):
                    self._append(ev, line)
                else:
                    # frames, a gap, then something else: the traceback was cut
                    self._close(st, out)
                    self._idle(st, line, out)
            elif ELISION.match(t):
                self._append(ev, line)
                st.gap = True
            elif FRAME.match(t):
                self._append(ev, line)  # a frame whose indentation was lost
            elif EXC_LINE.match(t):
                self._append(ev, line)
                ev.exception_idx.append(len(ev.lines) - 1)
                self._raised(st, ev)
            else:
                st.foreign += 1
                if st.foreign > MAX_FOREIGN:
                    self._close(st, out)
                self._idle_foreign(st, line, out)
            return
        if mode == "tail":
            if st.summary_done and t.strip():
                if t[-1:] == ":" and SUMMARY_HEAD.match(t):
                    # another section of it (older torchelastic closes `Root Cause:` with a
                    # banner, then prints `Other Failures:`, closed by a border of asterisks,
                    # not a banner: it ends there, or where a line is none of its own)
                    st.summary_done = False
                    st.banners = 1
                    st.open_summary = True
                    st.tail += 1
                    self._append(ev, line)
                    self._summary_entry(st, line, out)
                else:
                    # after a launcher summary's closing banner: the program's next output (no
                    # message runs on past it)
                    self._close(st, out)
                    self._idle(st, line, out)
            elif st.banners == 1 and st.open_summary and t.strip() and not t[0].isspace() and not (
                    ENTRY_HEAD.match(t) or ENTRY_FIELD.match(t) or SUMMARY_HEAD.match(t) or BANNER.match(t) or t.startswith("<")):
                # the end of a summary pasted without its banners: the next line is not its own
                st.open_summary = False
                if t[0] == "*" and BORDER.match(t):
                    # older torchelastic's closing border: the summary's last line
                    self._append(ev, line)
                    self._close(st, out)
                    return
                self._close(st, out)
                self._idle(st, line, out)
            elif st.banners == 1 and st.tail < MAX_TAIL_LINES:
                # inside a banner-framed block (torchrun's summary): everything up to the
                # closing banner belongs to it, blank lines included
                st.tail += 1
                self._append(ev, line)
                self._summary_entry(st, line, out)
                if t.startswith("=") and BANNER.match(t):
                    st.banners += 1
                    st.summary_done = any(SUMMARY_HEAD.match(x) for x in ev.lines)
            elif not t.strip():
                st.mode = "gap"
                st.held = [line]
            elif EMBEDDED_TB.match(t):
                # an exception re-raised with the original traceback in its message
                self._append(ev, line)
                st.mode = "frames"
                st.pending = 0
                st.embedded = True
            elif CHAIN_MARKER.match(t):
                # the blank line before it went to another stream (torch's excepthook
                # prefixes every line of a traceback except the empty ones)
                self._append(ev, line)
                st.mode = "chain"
            elif st.carried and ("Error" in t or "Exception" in t) and EXC_ALONE.match(t):
                # frames under an exception line are a traceback its message carries (Ray's
                # RayTaskError prints the remote task's frames under its head): the exception
                # they end in was raised inside, by the process that failed, and is where the
                # failure started; nested carriers (a task that waited on a task) end at the
                # innermost
                self._append(ev, line)
                ev.exception_idx.append(len(ev.lines) - 1)
                ev.origin_idx = len(ev.lines) - 1
                st.carried = False
                st.tail = 0
                st.plain = 0
            elif st.tail < MAX_TAIL_LINES and self._continues(st, ev, t):
                st.tail += 1
                self._append(ev, line)
                if t[0] in " \t" and "File" in t and FRAME.match(t):
                    st.carried = True
            else:
                self._close(st, out)
                self._idle(st, line, out)
            return
        if mode == "gap":
            if not t.strip() and len(st.held) < 3:
                st.held.append(line)
            elif CHAIN_MARKER.match(t):
                for h in st.held:
                    self._append(ev, h)
                st.held = []
                self._append(ev, line)
                st.mode = "chain"
            else:
                self._close(st, out)
                self._idle(st, line, out)
            return
        if mode == "chain":
            if not t.strip():
                self._append(ev, line)
            elif TB_HEADER.match(t) or FRAME.match(t):
                self._append(ev, line)
                st.mode = "frames"
                st.pending = 0
                st.gap = False
                if ev.form == "alone":
                    ev.form = "headerless"
            elif EXC_ALONE.match(t):
                # a chain pasted without its frames
                self._append(ev, line)
                ev.exception_idx.append(len(ev.lines) - 1)
                st.mode = "tail"
                st.tail = 0
                st.plain = 0
                st.banners = 0
                st.summary_done = st.open_summary = False  # a new exception's message: a summary before it is over
            else:
                self._close(st, out)
                self._idle(st, line, out)
            return

    @staticmethod
    def _raised(st: _Stream, ev: Event) -> None:
        """After the exception line of the frames being read."""
        if st.embedded:
            ev.origin_idx = len(ev.lines) - 1
            st.embedded = False
        if st.pending > 0:
            st.pending -= 1
        else:
            st.mode = "tail"
            st.tail = 0
            st.plain = 0
            st.banners = 0
            st.summary_done = st.open_summary = False  # a new exception's message: a summary before it is over

    def _continues(self, st: _Stream, ev: Event, t: str) -> bool:
        """Is `t` more of the exception message (not the program's next output)?

        Indented lines, a banner-framed block (torchrun's ChildFailedError summary), lines
        after a message ending in ':', and PyTorch's fixed CUDA-error addenda continue it.
        Other unindented lines continue it up to the next structure: a timestamped or
        levelled log record, a traceback's header or frame, a progress bar, an elision mark,
        or a line a rule has a word for (its own event).
        """
        if BANNER.match(t):
            if t[0] == "=":
                st.banners += 1
            return True
        if st.banners == 1:
            return True
        if t[0] in " \t":
            return not PROGRESS.search(t)  # a progress bar is the program's next output
        if RECORD_START.match(t) or t.startswith(BOX):
            return False
        if t.startswith(KNOWN_CONTINUATIONS):
            return True
        if ev.lines[-1].rstrip().endswith(":"):
            # what the message announced, unless it is the program's next progress line
            return not (PROGRESS.search(t) or is_progress(t))
        if st.plain >= MAX_MESSAGE_LINES or LOG_LEVEL.match(t) or PROGRESS.search(t) or FRAME.match(t) or ELISION.match(t) or self.interesting(t) or is_progress(t):
            return False
        st.plain += 1
        return True

    def _summary_entry(self, st: _Stream, line: LogLine, out: list[Event]) -> None:
        """Collect one failure entry (`[0]:`, time, host, rank, exitcode, error_file,
        traceback) of torchrun's summary; when it ends, its `traceback :` field becomes
        events of its own, printed by the rank the entry names: a signal line
        (`Signal 9 (SIGKILL) received by PID N`) or the worker's whole traceback, which the
        rules then classify like any other."""
        t = line.text
        if ENTRY_HEAD.match(t) or BANNER.match(t):
            entry, st.entry = st.entry, ([line] if ENTRY_HEAD.match(t) else [])
            seq, st.entry_seq = st.entry_seq, None
            ev = st.event
            if ENTRY_HEAD.match(t) and ev is not None and len(ev.lines) >= 2 and ev.lines[-2].lstrip().startswith("Root Cause"):
                st.entry_seq = ev.seq
            if entry:
                self._entry_events(entry, out, seq)
        elif st.entry and len(st.entry) < MAX_EVENT_LINES:
            st.entry.append(line)

    def _entry_events(self, entry: list[LogLine], out: list[Event], first_seq: Optional[int] = None) -> None:
        # the summary lists other failures before its Root Cause, the one torchrun saw first:
        # that entry's events take the summary's own place in the order of events
        seq = first_seq if first_seq is not None else self.seq
        rank = node = None
        field = None
        for i, ll in enumerate(entry):
            m = ENTRY_FIELD.match(ll.text)
            if m is None:
                continue
            key, value = m.group(1), m.group(2)
            if key == "rank":
                words = value.split()  # (none: a field cut or damaged after its colon)
                rank = int(words[0]) if words and words[0].isdigit() else None
            elif key == "host":
                node = value.strip() or None
            elif key == "traceback" and not value.startswith(NO_TRACEBACK):
                field = i
            elif key == "msg" and field is None:
                if value.strip():
                    field = i
                else:  # the error record below it names the exception
                    field = next((j for j in range(i + 1, len(entry)) if RECORD_MESSAGE.match(entry[j].text)), None)
        code = next((i for i, ll in enumerate(entry) if (m := ENTRY_FIELD.match(ll.text)) and m.group(1) == "exitcode"), None)
        if field is None:
            # the entry is cut before its traceback field (a paste, a tail), or the field
            # says only that none was recorded: its exit code is the launcher's whole report
            # on that rank
            if code is None:
                return
            field = code
        elif code is not None and (fm := ENTRY_FIELD.match(entry[field].text)) is not None and fm.group(1) == "traceback" and not _field_stands(fm.group(2)):
            # a traceback field that is no traceback and no exception (`Signal 9 (SIGKILL)
            # received by PID N`, or such a line cut short) restates the exit code above it:
            # the exit code is the entry's report, cited where the launcher states it
            field = code
        head = entry[field]
        if (rec := RECORD_MESSAGE.match(head.text)) is not None:
            value = _json_text(rec.group(1))
        else:
            key, value = ENTRY_FIELD.match(head.text).group(1, 2)  # type: ignore[union-attr]
            value = value.rstrip()
            if key == "exitcode":
                value = head.text.strip()  # `exitcode  : 2 (pid: N)`, as the rules know it
            elif key == "msg" and len(value) > 1 and value[0] == value[-1] == '"':
                value = _json_text(value[1:-1])
        if not value or value.startswith("<"):
            return  # <N/A>: torchrun has no traceback for it
        who = RankRef(head.source, rank=rank, via="launcher") if rank is not None else head.who  # the summary names the rank
        stream = (head.source, "summary", rank, node)

        def at(ll: LogLine, text: str) -> LogLine:
            return LogLine(ll.source, ll.lineno, ll.raw, len(ll.raw) - len(text), text, "rank" if rank is not None else ll.origin, who, node or ll.node, None, ll.ts, stream)

        first = at(head, value)
        if TB_HEADER.match(value):
            # the worker's own traceback, indented under the field: read it like any other
            rest = [ll for ll in entry[field + 1 :] if ll.text.strip()]
            cut = min((len(ll.text) - len(ll.text.lstrip()) for ll in rest), default=0)
            lines = [first, *(at(ll, ll.text[cut:]) for ll in rest)]
        elif rec is not None or (("Error" in value or "Exception" in value) and EXC_ALONE.match(value)):
            lines = [first]  # an exception line alone: read as one, so that it is classified like one
        else:
            out.append(Event("line", first, [value], [head.lineno], ts=head.ts, seq=seq, form="reported"))
            return
        inner = Assembler(self.interesting)
        inner.seq = seq
        for ll in lines:
            out.extend(inner.feed(ll))
        out.extend(inner.flush())

    def _idle_foreign(self, st: _Stream, line: LogLine, out: list[Event]) -> None:
        """A line that interrupts a traceback (another printer in the same stream)."""
        t = line.text
        if t and not self.quiet and self.interesting(t):
            out.append(Event("line", line, [t], [line.lineno], ts=self._when(st, line), seq=self.seq))


# half of a UTF-16 pair escaped alone in JSON (`\ud800`): decoded, no character UTF-8 can hold
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _field_stands(value: str) -> bool:
    """Is a summary entry's `traceback :` field read on its own: a worker's traceback or an
    exception line (more than the entry's exit code says), or nothing (empty, `<N/A>`: no
    event at all)?"""
    value = value.strip()
    return not value or value.startswith("<") or bool(TB_HEADER.match(value) or (("Error" in value or "Exception" in value) and EXC_ALONE.match(value)))


def _json_text(text: str) -> str:
    """A JSON string's content (`\\"` and `\\n` undone); as it is when it does not decode (a cut
    one). An escape of half a character (a lone surrogate) becomes U+FFFD, as undecodable bytes
    do in the reader, so that every report, ledger line and page can be written as UTF-8."""
    try:
        value = json.loads('"' + text + '"')
    except ValueError:
        return text
    return LONE_SURROGATE.sub("\ufffd", value) if "\\u" in text else value
