"""Per-stream assembly of lines into events.

A stream is everything one printer wrote (one rank, one launcher, one file with no
prefixes). In each stream, Python tracebacks, including chained ones ("During handling of
the above exception ..."), become one event keeping their frames, exception lines and the
message lines that follow (e.g. torchrun's ChildFailedError summary). Every other line that
the rule pack's keywords find interesting becomes a one-line event. Events are bounded in
size, so memory depends on the number of streams, not on the log's length.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Callable, Iterator, Optional

from slurmdoc.models import Event, LogLine

TB_HEADER = re.compile(r"\s{0,4}(?:\+ )?(?:Exception Group )?Traceback \(most recent call last\):\s*$")
CHAIN_MARKER = re.compile(
    r"\s{0,4}(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$"
)
# `pkg.mod.SomeError: message`, `KeyboardInterrupt`, `torch.OutOfMemoryError: ...`
EXC_LINE = re.compile(r"(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:\[[^\]]*\])?(?::(?: .*)?)?$")
RECORD_START = re.compile(
    r"\[?[IWEF]\d{4} \d\d:\d\d|\[?\d{4}-\d\d-\d\d[T _]\d\d:\d\d|Traceback \(most|terminate called|frame #\d+:"
)

EMBEDDED_TB = re.compile(r"\s{0,4}Original Traceback \(most recent call last\):\s*$")
BANNER = re.compile(r"[=\-]{10,}\s*$")
# lines PyTorch appends to CUDA error messages, unindented
KNOWN_CONTINUATIONS = ("CUDA kernel errors might", "For debugging consider passing", "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Device-side assertion")

MAX_STREAMS = 50_000  # beyond this many printers, idle streams are forgotten
MAX_EVENT_LINES = 400
MAX_TAIL_LINES = 2000
MAX_FOREIGN = 50


class _Stream:
    __slots__ = ("mode", "event", "pending", "foreign", "tail", "held", "last_ts", "ts_gen", "banners", "embedded", "last_seq")

    def __init__(self) -> None:
        self.mode = "idle"  # idle | frames | tail | gap | chain
        self.event: Optional[Event] = None
        self.pending = 0
        self.foreign = 0
        self.tail = 0
        self.held: list[LogLine] = []
        self.banners = 0
        self.embedded = False
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

    # ---- public -----------------------------------------------------------------
    def feed(self, line: LogLine) -> Iterator[Event]:
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
        yield from self._step(st, line)
        if st.mode == "idle":
            if self.active:
                self.active.pop(line.stream, None)
        else:
            self.active[line.stream] = st

    def skipped(self) -> None:
        """Some lines were not fed (the fast reader skipped them)."""
        self.gen += 1

    def busy(self, horizon: int = 2048) -> bool:
        """Is some stream in the middle of an event that its next lines may continue?

        A stream silent for `horizon` lines no longer counts: a rank that died in the
        middle of printing must not keep the reader parsing every line to the end.
        """
        floor = self.seq - horizon
        return any(st.last_seq > floor for st in self.active.values())

    def flush(self) -> Iterator[Event]:
        for st in self.streams.values():
            yield from self._close(st)
        self.streams.clear()
        self.active.clear()

    # ---- internals --------------------------------------------------------------
    def _when(self, st: _Stream, line: LogLine) -> Optional[datetime]:
        if line.ts is not None:
            return line.ts
        if st.last_ts is not None and st.ts_gen == self.gen:
            return st.last_ts
        src = self.source_ts.get(line.source)
        if src is not None and self.source_gen.get(line.source) == self.gen:
            return src  # the neighbours' time is closer than this stream's last, stale one
        return st.last_ts or src

    def _idle(self, st: _Stream, line: LogLine) -> Iterator[Event]:
        t = line.text
        if "Traceback" in t and TB_HEADER.match(t):
            st.event = Event("traceback", line, [t], [line.lineno], ts=self._when(st, line), seq=self.seq)
            st.mode = "frames"
            st.pending = 0
            st.foreign = 0
            st.tail = 0
            st.embedded = False
            return
        if t and not self.quiet and self.interesting(t):
            yield Event("line", line, [t], [line.lineno], ts=self._when(st, line), seq=self.seq)

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

    def _close(self, st: _Stream) -> Iterator[Event]:
        ev = st.event
        held = st.held
        st.event = None
        st.held = []
        st.mode = "idle"
        if ev is not None:
            yield ev
        for h in held:
            yield from self._idle(st, h)

    def _step(self, st: _Stream, line: LogLine) -> Iterator[Event]:
        mode = st.mode
        if mode == "idle":
            yield from self._idle(st, line)
            return
        ev = st.event
        assert ev is not None
        t = line.text
        if mode == "frames":
            if not t or t[0] in " \t":
                self._append(ev, line)
            elif TB_HEADER.match(t):
                st.pending += 1
                self._append(ev, line)
            elif EXC_LINE.match(t):
                self._append(ev, line)
                ev.exception_idx.append(len(ev.lines) - 1)
                if st.embedded:
                    ev.origin_idx = len(ev.lines) - 1
                    st.embedded = False
                if st.pending > 0:
                    st.pending -= 1
                else:
                    st.mode = "tail"
                    st.tail = 0
                    st.banners = 0
            else:
                st.foreign += 1
                if st.foreign > MAX_FOREIGN:
                    yield from self._close(st)
                yield from self._idle_foreign(st, line)
            return
        if mode == "tail":
            if st.banners == 1 and st.tail < MAX_TAIL_LINES:
                # inside a banner-framed block (torchrun's summary): everything up to the
                # closing banner belongs to it, blank lines included
                st.tail += 1
                self._append(ev, line)
                if t.startswith("=") and BANNER.match(t):
                    st.banners += 1
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
            elif st.tail < MAX_TAIL_LINES and self._continues(st, ev, t):
                st.tail += 1
                self._append(ev, line)
            else:
                yield from self._close(st)
                yield from self._idle(st, line)
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
                yield from self._close(st)
                yield from self._idle(st, line)
            return
        if mode == "chain":
            if not t.strip():
                self._append(ev, line)
            elif TB_HEADER.match(t):
                self._append(ev, line)
                st.mode = "frames"
                st.pending = 0
            else:
                yield from self._close(st)
                yield from self._idle(st, line)
            return

    @staticmethod
    def _continues(st: _Stream, ev: Event, t: str) -> bool:
        """Is `t` more of the exception message (not the program's next output)?

        Indented lines, a banner-framed block (torchrun's ChildFailedError summary), lines
        after a message ending in ':', and PyTorch's fixed CUDA-error addenda continue it.
        """
        if BANNER.match(t):
            if t[0] == "=":
                st.banners += 1
            return True
        if st.banners == 1 or t[0] in " \t":
            return True
        if RECORD_START.match(t):
            return False
        if ev.lines[-1].rstrip().endswith(":"):
            return True
        return t.startswith(KNOWN_CONTINUATIONS)

    def _idle_foreign(self, st: _Stream, line: LogLine) -> Iterator[Event]:
        """A line that interrupts a traceback (another printer in the same stream)."""
        t = line.text
        if t and not self.quiet and self.interesting(t):
            yield Event("line", line, [t], [line.lineno], ts=self._when(st, line), seq=self.seq)
