"""Fast reading: block reads, one multi-pattern prefilter over whole blocks, and full
parsing only where a diagnosis can need it.

A training log is almost all progress lines that no rule cares about. Parsing every line
in Python costs microseconds a line, about a minute per GiB. Instead each input is read
in large blocks into one reused buffer and searched, block at a time, for every trigger
literal of the rule pack at once (the prefilter, prefilter.py). Lines are parsed only in:

- the head of each input (start-up banners: who the ranks are, the layout, the date);
- the tail of each input (each rank's last activity, the launcher's last words);
- a window around every prefilter hit: a few lines before it (the rank's recent
  timestamps), the hit, and on while any rank is in the middle of a traceback, then a few
  lines more (a traceback's frames and a launcher's summary carry no trigger words).

Everything else is only counted (newlines), so line numbers stay exact. The consumer
tells the scanner when it is in the middle of a multi-line record (`busy`) and is told
when lines were skipped (`skipped`), so it can stop trusting the timestamps it saw before.
"""

from __future__ import annotations

import io
import queue
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, NoReturn, Optional

from slurmdoc.ingest.damage import MAX_HOLD, MIN_WIDTH
from slurmdoc.ingest.prefilter import WRAP_HEAD, WRAP_SAMPLE, Prefilter, count_lf, dense, wrap_width
from slurmdoc.ingest.sources import MAX_LINE, MAX_LINE_WARNINGS, READ_ERRORS, SNIFF, Gunzipped, Input, _Prefixed, _utf16_lines, damage, looks_binary, read_failure


BLOCK = 8 << 20


@dataclass(frozen=True)
class Budget:
    """How much is parsed line by line around what the prefilter finds."""

    head: int = 1 << 20  # bytes at the start of all inputs together
    tail: int = 2 << 20  # bytes at the end of all inputs together
    # per input, however many inputs there are: up to 512 inputs (per-rank files of 512
    # ranks) share the budget of one, so a job's log costs the same whether it was written
    # to one file or to one per rank; more inputs get these floors each
    min_head: int = 2 << 10
    min_tail: int = 4 << 10
    max_head: int = 32 << 20  # the head grows while new ranks keep appearing in it, up to this
    before: int = 32  # lines parsed before a hit
    after: int = 32  # lines parsed after the last hit of a window

    def per_input(self, n: int) -> tuple[int, int]:
        n = max(n, 1)
        return max(self.head // n, self.min_head), max(self.tail // n, self.min_tail)


def block_size() -> int:
    """The block size, read at call time (tests shrink it)."""
    return BLOCK

# An input with AHEAD_MIN blocks or more left after its first one (or of unknown size: gzip,
# a pipe) is read and searched ahead of the parser, where the search runs on several cores: a
# thread reads the next blocks (decompressing a gzip) and finds their prefilter hits (with
# the prefilter's helpers; reading, zlib and Hyperscan run without the GIL) while this thread
# parses the lines of the block before. Blocks in flight: AHEAD (bounded memory).
AHEAD = 2
AHEAD_MIN = 2  # blocks


@dataclass(slots=True)
class _Read:
    """What the read-ahead hands over: a block (`data`, `filled` bytes of it, cut after a
    newline at `end`, its `hits`), or a block full without a newline (`hits` None: the caller
    reads on itself), or the input's end (`data` None), or the `error` that stopped it;
    `read`: the bytes read from the input for it."""

    read: int = 0
    data: Optional[bytearray] = None
    filled: int = 0
    end: int = 0
    eof: bool = False
    hits: Optional[list[int]] = None
    error: Optional[BaseException] = None


class _Ahead:
    """Reads the rest of a file in blocks on its own thread, each ending after a newline (the
    bytes after it begin the next one) and with its prefilter hits found, as Scan's loop would
    have; `take` hands them over in order. A block full without a newline (a line longer than a
    block) ends the read-ahead: it is handed over without hits, and the caller reads on itself."""

    def __init__(self, f, find: Callable[[bytearray, int], list[int]], carry: bytes) -> None:
        self.f = f
        self.find = find
        self.free: queue.SimpleQueue = queue.SimpleQueue()
        self.ready: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(AHEAD):
            self.free.put(bytearray(BLOCK))
        self.held: Optional[bytearray] = None  # the block the caller is parsing
        self.stopping = False
        self.thread = threading.Thread(target=self._run, args=(carry,), name="slurmdoc-ahead", daemon=True)
        self.thread.start()

    def _run(self, carry: bytes) -> None:
        try:
            while True:
                data = self.free.get()
                if data is None or self.stopping:
                    return
                view = memoryview(data)
                filled = len(carry)
                data[:filled] = carry
                got = 0
                eof = False
                while filled < BLOCK:
                    n = self.f.readinto(view[filled:]) or 0
                    if n == 0:
                        eof = True
                        break
                    filled += n
                    got += n
                view.release()
                if eof and filled == 0:
                    self.ready.put(_Read(got))
                    return
                end = filled if eof else data.rfind(b"\n", 0, filled) + 1
                if end == 0:  # a line longer than the block: the caller reads it, and on
                    self.ready.put(_Read(got, data, filled))
                    return
                carry = bytes(data[end:filled])
                self.ready.put(_Read(got, data, filled, end, eof, self.find(data, end)))
                if eof:
                    return
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            self.ready.put(_Read(error=e))

    def take(self) -> _Read:
        """The next block, once the one before is no longer used."""
        if self.held is not None:
            self.free.put(self.held)
            self.held = None
        got = self.ready.get()
        self.held = got.data
        return got

    def stop(self) -> None:
        """End the thread and wait for it (the file is closed after this)."""
        self.stopping = True
        self.free.put(None)
        self.thread.join()


class Scan:
    """Reads one input; yields (line number, text, hit) of the lines worth parsing.

    `hit` is False when the prefilter found no trigger literal on the line, so no rule
    can match it alone (it may still continue a traceback).
    `lines` holds the input's total line count once the iteration has ended.
    """

    def __init__(
        self,
        inp: Input,
        prefilter: Prefilter,
        head: int,
        tail: int,
        budget: Budget,
        warnings: list[str],
        busy: Callable[[], bool],
        skipped: Callable[[], None],
        on_bytes: Optional[Callable[[int], None]] = None,
        printers: Optional[Callable[[], int]] = None,
        buffer: Optional[bytearray] = None,
    ) -> None:
        self.buffer = buffer  # one block buffer reused across inputs (a directory of 512 files)
        self.inp = inp
        self.printers = printers  # how many printers (ranks) the consumer has seen so far
        self.prefilter = prefilter
        self.head = head
        self.tail = tail
        self.budget = budget
        self.warnings = warnings
        self.busy = busy
        self.skipped = skipped
        self.on_bytes = on_bytes
        self.lines = 0
        self.parsed = 0
        self.hits = 0
        self.long_lines = 0
        # searched quietly (Prefilter) since a dense block: only an input larger than its
        # head and tail together, where skipping is possible at all
        self.quiet = False
        self.may_quiet = False
        self.quiet_note = ""  # said when the input is done (the read-ahead's thread may find it)
        # the width a terminal hard-wrapped the input at, as its start shows it (0: none seen);
        # every block is searched rejoined at it (a block showing a wrap of its own: at that)
        self.wrap = 0
        self.sampled = False  # the block being searched is the first, measured for the wrap already

    # ---- helpers ------------------------------------------------------------------
    def _long(self, lineno: int, skipped: int) -> None:
        self.long_lines += 1
        if self.long_lines <= MAX_LINE_WARNINGS:
            self.warnings.append(f"{self.inp.info.path}:{lineno}: line longer than {MAX_LINE} bytes; kept its first {MAX_LINE} bytes, skipped {skipped}")

    def _lines(self, pieces: list[bytes], before: int) -> Iterator[tuple[int, str, bool]]:
        """Lines kept aside while skipping (no hit on any), numbered on from line `before`."""
        for i, piece in enumerate(pieces, before + 1):
            if piece.endswith(b"\r"):
                piece = piece[:-1]
            self.parsed += 1
            yield i, piece[:MAX_LINE].decode("utf-8", "replace"), False

    @staticmethod
    def _text(data: bytearray, s: int, e: int) -> str:
        if e > s and data[e - 1] == 13:  # CRLF
            e -= 1
        return data[s:e].decode("utf-8", "replace")

    def _find(self, data: bytearray, end: int) -> list[int]:
        """The block's prefilter hits. Once a block is dense with hits of guarded literals,
        it and the rest of the input are searched quietly (called by one thread at a time:
        this one, then the read-ahead's). A block whose lines a terminal hard-wrapped is
        searched as it reads rejoined too: a keyword the wrap cut in two is in neither piece,
        and the exact reader, which rejoins the pieces first, finds it."""
        hits = self._find_raw(data, end)
        width = self.wrap or (0 if self.sampled else wrap_width(data, end))
        self.sampled = False
        if width:
            more = self.prefilter.find_rejoined(data, end, width, self.quiet)
            if more:
                hits = sorted(set(hits).union(more))
        return hits

    def _find_raw(self, data: bytearray, end: int) -> list[int]:
        if self.quiet:
            return self.prefilter.find(data, end, quiet=True)
        hits, loud = self.prefilter.search(data, end)
        if self.may_quiet and dense(loud, data, end):
            self.quiet = True
            self.quiet_note = (f"{self.inp.info.path}: {loud} hits of rule keywords in {count_lf(data, 0, end)} lines of one block;"
                               " from there on, only the lines a rule may match are parsed around them")
            return self.prefilter.find(data, end, quiet=True)
        return hits

    def _alone(self, data: bytearray, hits: list[int], hi: int, floor: int, ls: int, le: int, end: int, eof: bool) -> bool:
        """Whether the hit line data[ls:le] is parsed alone, opening no window: no rule can
        match it, as the quiet search judges one line, nor the line a hard wrap cut it from
        (_wrapped), and no line a rule may match follows within `before` lines (that line's
        window would begin before this one: a record's first line, the time printed just
        before it, as the exact reader has them). A block ending within reach, with more to
        come, may hold such a line at the start of the next: a window then, as before."""
        pf = self.prefilter
        s, e = _wrapped(data, floor, ls, le, end)
        if (s, e) != (ls, le):
            piece = bytes(data[s:e]).replace(b"\r\n", b"").replace(b"\n", b"")
            if pf.may_match(piece, 0, len(piece)):
                return False
        elif pf.may_match(data, ls, le):
            return False
        reach = le  # the end of the `before`-th line after this one
        for _ in range(self.budget.before):
            if reach >= end:
                break
            nl = data.find(b"\n", reach + 1, end)
            reach = end if nl < 0 else nl
        if reach >= end and not eof:
            return False
        at = le
        while True:
            while hi < len(hits) and hits[hi] < at:
                hi += 1
            if hi >= len(hits) or hits[hi] >= reach:
                return True
            s = data.rfind(b"\n", at, hits[hi]) + 1 or at
            e = data.find(b"\n", hits[hi], end)
            e = end if e < 0 else e
            if pf.may_match(data, s, e):
                return False
            at = e

    # ---- the scan -----------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[int, str, bool]]:
        name = self.inp.info.path
        try:
            f = self.inp.open()
        except OSError as e:
            self.warnings.append(f"{name}: skipped, cannot open: {e.strerror or e}")
            return
        try:
            yield from self._scan(f)
        finally:
            if self.quiet_note:
                self.warnings.append(self.quiet_note)
            if (hurt := damage(f, name, self.lines)) is not None:
                self.warnings.append(hurt)
            if self.long_lines > MAX_LINE_WARNINGS:
                self.warnings.append(f"{name}: {self.long_lines - MAX_LINE_WARNINGS} more lines longer than {MAX_LINE} bytes were cut")
            try:
                f.close()
            except Exception:  # closing a damaged gzip can raise again; nothing to do
                pass

    def _read(self, f, view: memoryview) -> int:
        try:
            return f.readinto(view) or 0
        except READ_ERRORS as e:
            self._read_failed(e)

    def _read_failed(self, e: BaseException) -> NoReturn:
        """A read of the input failed (here or on the read-ahead thread): say so, and stop it."""
        self.warnings.append(read_failure(self.inp.info.path, e, self.lines))
        raise _Stop from None

    def _scan(self, f) -> Iterator[tuple[int, str, bool]]:
        b = self.budget
        size = None if isinstance(f, Gunzipped) else self.inp.size
        # an input read whole (within its head and tail) gains nothing; one of unknown size
        # (gzip, a pipe) is judged when its first block is full
        self.may_quiet = size is not None and size > self.head + self.tail and self.prefilter.can_quiet
        tail_start = max(size - self.tail, 0) if size is not None else None
        data = self.buffer if self.buffer is not None and len(self.buffer) == BLOCK else bytearray(BLOCK)
        view = memoryview(data)
        filled = 0  # bytes held in data
        offset = 0  # input offset of data[0]
        lineno = self.inp.info.first_line - 1  # lines before data[0]
        first = True
        eof = False
        in_window = False
        window_until = -1  # a window stays open at least up to this line
        checked = 0
        ring: deque[tuple[int, bytes]] = deque()  # skipped end of an input of unknown size
        ring_bytes = 0
        stash: Optional[tuple[int, bytes]] = None  # (number of its last line, the lines) ending the previous block
        head_limit = self.head
        printers_mark = -1  # printers seen at 3/4 of the head
        ahead: Optional[_Ahead] = None
        try:
            while not eof or filled:
                found: Optional[list[int]] = None  # the block's hits, found by the read-ahead
                if ahead is not None:
                    got = ahead.take()
                    if got.error is not None:
                        if isinstance(got.error, READ_ERRORS):
                            self._read_failed(got.error)
                        raise got.error
                    if got.read and self.on_bytes is not None:
                        self.on_bytes(got.read)
                    if got.data is None:  # the end of the input
                        break
                    data, filled = got.data, got.filled
                    if got.hits is None:  # a line longer than the block: read on here
                        ahead.stop()
                        ahead = None
                    else:
                        end, eof, found = got.end, got.eof, got.hits
                    view = memoryview(data)
                elif not eof and filled < BLOCK:
                    n = self._read(f, view[filled:])
                    if n == 0:
                        eof = True
                    elif self.on_bytes is not None:
                        self.on_bytes(n)
                    filled += n
                    if filled < BLOCK and not eof:
                        continue  # short read (pipe, gzip): fill the block first
                if first:
                    first = False
                    if filled == 0:
                        return
                    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
                        # UTF-16 (e.g. PowerShell): bytes cannot be searched for ASCII words
                        for lineno, text in _utf16_lines(io.BufferedReader(_Prefixed(bytes(data[:filled]), f))):  # type: ignore[arg-type]
                            self.lines = lineno
                            self.parsed += 1
                            yield lineno, text, True
                        return
                    if data.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
                        data[: filled - 3] = data[3:filled]
                        filled -= 3
                        offset = 3
                    if size is None and filled == BLOCK:
                        self.may_quiet = self.prefilter.can_quiet
                    self.wrap = wrap_width(data, filled, min(WRAP_HEAD, max(self.head, WRAP_SAMPLE)))
                    self.sampled = True
                    nl = data.find(b"\n", 0, min(filled, MAX_LINE))
                    if looks_binary(bytes(data[: min(nl + 1 if nl >= 0 else filled, SNIFF)])):
                        self.warnings.append(f"{self.inp.info.path}: skipped, binary data, not a text log")
                        return
                if found is not None:
                    pass  # the read-ahead cut the block
                elif eof:
                    end = filled
                else:
                    end = data.rfind(b"\n", 0, filled) + 1
                    if end == 0:
                        # one line longer than the block: keep its first MAX_LINE bytes,
                        # read the rest of it and drop it
                        lineno += 1
                        text = data[:MAX_LINE].decode("utf-8", "replace")
                        consumed = filled
                        filled = 0
                        while True:
                            n = self._read(f, view)
                            if n == 0:
                                eof = True
                                break
                            if self.on_bytes is not None:
                                self.on_bytes(n)
                            nl = data.find(b"\n", 0, n)
                            if nl >= 0:
                                consumed += nl + 1
                                data[: n - nl - 1] = data[nl + 1:n]
                                filled = n - nl - 1
                                break
                            consumed += n
                        self._long(lineno, consumed - MAX_LINE)
                        offset += consumed
                        self.lines = lineno
                        self.parsed += 1
                        yield lineno, text, True
                        continue
                hits = found if found is not None else self._find(data, end)
                self.hits += len(hits)
                hi = 0
                pos = 0
                head_end = head_limit - offset  # block offsets below this are in the head
                tail_at = (tail_start - offset) if tail_start is not None else end + 1
                while pos < end:
                    if self.printers is not None and head_end > 0 and pos >= head_end - (self.head >> 2):
                        # start-up banners of thousands of ranks can outgrow the head: while
                        # its last quarter still brought new printers, extend it
                        n = self.printers()
                        if printers_mark < 0:
                            printers_mark = n
                        elif pos >= head_end:
                            if n > printers_mark and head_limit + self.head <= max(b.max_head, self.head):
                                head_limit += self.head
                                head_end += self.head
                                printers_mark = -1
                            else:
                                head_end = 0
                                head_limit = 0  # the head is over
                    if not (in_window or pos < head_end or pos >= tail_at):
                        hit = hits[hi] if hi < len(hits) else end
                        if tail_at <= hit and tail_at < end:
                            # the tail starts before the next hit: parse from its first line on
                            s = data.rfind(b"\n", pos, tail_at) + 1 or pos
                            if s > pos:
                                lineno += count_lf(data, pos, s)
                                self.skipped()
                            pos = tail_at = s
                            continue
                        if hit >= end:
                            # nothing more in this block: count its lines
                            skipped = count_lf(data, pos, end)
                            if eof and data[end - 1] != 10:
                                skipped += 1  # a last line without its newline
                            if size is None and self.tail:
                                ring.append((lineno, bytes(data[pos:end])))
                                ring_bytes += end - pos
                                while ring_bytes - len(ring[0][1]) >= self.tail:
                                    ring_bytes -= len(ring.popleft()[1])
                            lineno += skipped
                            if skipped:
                                self.skipped()
                            if not eof and b.before:
                                # keep the block's last lines: a hit at the very start of the
                                # next block wants them as its lines before
                                t, _ = _back(data, pos, end, b.before)
                                stash = (lineno, bytes(data[t:end]))
                            break
                        if self.may_quiet:
                            # a hit on a line no rule can match, as the quiet search judges one
                            # line, opens no window: a recurring warning that shares a keyword
                            # with a rule costs its own line (its time keeps its rank's clock
                            # as the exact reader's), not a window of parsing around it
                            ls = data.rfind(b"\n", pos, hit) + 1 or pos
                            le = data.find(b"\n", hit, end)
                            le = end if le < 0 else le
                            if self._alone(data, hits, hi, pos, ls, le, end, eof):
                                while hi < len(hits) and hits[hi] < le:
                                    hi += 1
                                if ls > pos:
                                    lineno += count_lf(data, pos, ls)
                                    self.skipped()
                                lineno += 1
                                if le - ls > MAX_LINE:
                                    self._long(lineno, le - ls - MAX_LINE)
                                text = self._text(data, ls, min(le, ls + MAX_LINE))
                                pos = le + 1
                                self.parsed += 1
                                yield lineno, text, False
                                continue
                        # a window: a few lines before the hit's line, then on from there
                        s, backed = _back(data, pos, data.rfind(b"\n", pos, hit) + 1 or pos, b.before)
                        if s > pos:
                            lineno += count_lf(data, pos, s)
                            self.skipped()
                        elif s == 0 and stash is not None and backed < b.before:
                            # the lines before the hit ended the previous block
                            last_no, blob = stash
                            kept = blob.split(b"\n")[:-1][-(b.before - backed):]
                            yield from self._lines(kept, last_no - len(kept))
                        stash = None
                        ring.clear()
                        ring_bytes = 0
                        pos = s
                        in_window = True
                        window_until = lineno + b.before + 1 + b.after
                        checked = lineno
                        continue
                    # parse one line
                    stash = None
                    nl = data.find(b"\n", pos, end)
                    e = nl if nl >= 0 else end
                    lineno += 1
                    if e - pos > MAX_LINE:
                        self._long(lineno, e - pos - MAX_LINE)
                        text = self._text(data, pos, pos + MAX_LINE)
                    else:
                        text = self._text(data, pos, e)
                    pos = e + 1
                    hit = hi < len(hits) and hits[hi] < pos
                    if hit:
                        while hi < len(hits) and hits[hi] < pos:
                            hi += 1
                        # a hit keeps (or puts) the window open for `after` lines more
                        in_window = True
                        window_until = lineno + b.after
                    self.parsed += 1
                    yield lineno, text, hit
                    if in_window and lineno >= window_until and lineno - checked >= 8:
                        checked = lineno
                        if not self.busy():
                            in_window = False
                self.lines = lineno
                offset += end
                if ahead is not None:
                    filled = 0  # the read-ahead carries the bytes after `end` over
                    continue
                rest = filled - end
                if not eof and (size is None or size - offset - rest >= AHEAD_MIN * BLOCK) and self.prefilter.parallel:
                    ahead = _Ahead(f, self._find, bytes(data[end:filled]))
                    filled = 0
                    continue
                if rest:
                    data[:rest] = data[end:filled]
                filled = rest
            self.lines = lineno
            # an input of unknown size (stdin, gzip): parse what was skipped at its very end
            if ring:
                ln = ring[0][0]
                blob = b"".join(seg for _, seg in ring)
                start = 0
                if ring_bytes > self.tail:  # start on a line boundary within the budget
                    cut = blob.find(b"\n", ring_bytes - self.tail)
                    if cut >= 0:
                        ln += blob.count(b"\n", 0, cut + 1)
                        start = cut + 1
                pieces = blob[start:].split(b"\n")
                if pieces and pieces[-1] == b"":
                    pieces.pop()
                self.skipped()
                yield from self._lines(pieces, ln)
        except _Stop:
            self.lines = lineno
        finally:
            if ahead is not None:
                ahead.stop()


def _wrapped(data: bytearray, floor: int, ls: int, le: int, end: int) -> tuple[int, int]:
    """The lines around data[ls:le] that a hard wrap may have cut from one line with it
    (damage.Repair joins them before any rule sees them): each piece but the last as long as
    the wrap width, which is MIN_WIDTH or more; so the lines before it while each is as long
    as the one after it (the one just before: MIN_WIDTH or more), and the lines after it while
    the one before is that long. At most MAX_HOLD pieces each way, none before `floor`."""
    width = -1
    s = ls
    for _ in range(MAX_HOLD):
        if s <= floor:
            break
        p = data.rfind(b"\n", floor, s - 1) + 1 or floor
        n = _chars(data, p, s - 1)
        if n < MIN_WIDTH or (width >= 0 and n != width):
            break
        width, s = n, p
    if width < 0:
        width = _chars(data, ls, le)
        if width < MIN_WIDTH:
            return s, le
    elif _chars(data, ls, le) != width:
        return s, le  # the last piece
    e = le
    for _ in range(MAX_HOLD):
        if e >= end:
            break
        nl = data.find(b"\n", e + 1, end)
        nxt = end if nl < 0 else nl
        e, n = nxt, _chars(data, e + 1, nxt)
        if n != width:
            break
    return s, e


def _chars(data: bytearray, s: int, e: int) -> int:
    """Characters on the line data[s:e] (its CR off), as the repair measures a line."""
    if e > s and data[e - 1] == 13:
        e -= 1
    if e - s < MIN_WIDTH:
        return e - s  # (fewer bytes: fewer characters too)
    return len(data[s:e].decode("utf-8", "replace"))


def _back(data: bytearray, floor: int, s: int, n: int) -> tuple[int, int]:
    """Move line start `s` back by up to `n` lines, not below `floor`: (new start, lines)."""
    backed = 0
    while backed < n and s > floor:
        s = data.rfind(b"\n", floor, s - 1) + 1 or floor
        backed += 1
    return s, backed


class _Stop(Exception):
    pass
