"""The prefilter: offsets of the rule pack's trigger literals in a block of bytes, every
literal searched for at once (Hyperscan when installed, else RE2, else Python's `re`), so that
the reader (scan.py) parses lines only around what it finds.

Here too are the helper threads that search a big block in pieces on several cores, and the
newline count (the reader's too, for the lines it skips). The Hyperscan databases the search
runs on, and the literal set cut to those worth searching for, are hsdb.py's.
"""

from __future__ import annotations

import itertools
import os
from bisect import bisect_right
import queue
import re
import threading
from typing import Callable, Optional

from slurmdoc.ingest.damage import ANSI, MAX_WIDTH, MIN_WIDTH, RECORD_START, WIDTH_CONFIRM, WIDTH_WINDOW, _kind, _label_end
from slurmdoc.ingest.hsdb import (
    HS_HEAD,
    _held_blob,
    _hs,
    _hs_compile,
    _hs_database,
    _hs_keep,
    _hs_key,
    _hs_load_quiet,
    _hs_path,
    _long_literals,
    _loud_ids,
    _hs_read,
    _refused,
    _split_guarded,
    _split_marked,
    covering,
)

try:  # SIMD newline counting, where stringzilla has a wheel
    from stringzilla import Str as _Str
except Exception:  # pragma: no cover - depends on the platform
    _Str = None


def count_lf_bytes(data: bytearray, start: int, end: int) -> int:
    """Newlines in data[start:end], by bytearray.count (the fallback)."""
    return data.count(b"\n", start, end)


def count_lf_simd(data: bytearray, start: int, end: int) -> int:
    """The same count by stringzilla, on the buffer itself (no copy): most of a big log is
    only counted, and this is about 15 times as fast on an 8 MiB block."""
    return _Str(data).count("\n", start, end)


count_lf = count_lf_simd if _Str is not None else count_lf_bytes

ENGINES = ("auto", "hyperscan", "re2", "re")

# Hyperscan releases the GIL while it scans: a block this large or larger is cut at
# newlines into pieces that a thread per core takes in turn (each with its own scratch)
PARALLEL_MIN = 1 << 20
PARALLEL_PIECE = 1 << 20  # about what one thread takes at a time


def cores() -> int:
    """The CPUs this process may run on (the affinity mask, under Slurm the allocation)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# a scan of fewer bytes than this is padded with newlines (Prefilter._scan)
SHORT_SCAN = 64

# A block is dense when guarded literals (see Prefilter) hit in it DENSE_MIN times or more,
# and on a DENSE_SHARE of its lines or more: from then on the input is searched quietly
DENSE_MIN = 512
DENSE_SHARE = 4  # one line in four


def dense(loud: int, data: bytearray, end: int) -> bool:
    """Whether `loud` hits of guarded literals in data[:end] make the block dense."""
    return loud >= DENSE_MIN and loud * DENSE_SHARE >= count_lf(data, 0, end)


class Prefilter:
    """Offsets of trigger literals in a block of bytes.

    `guards` (Hyperscan only): for a literal whose rules can all be judged line by line, the
    line supersets of those rules' patterns (engine.superset). Searched for in place of the
    literal, they find the lines where one of the rules may match, not every line holding the
    literal: a quiet search (`quiet=True`), for an input where the literal is on almost every
    line (a progress bar saying `Training`) and each hit would open a window to parse.

    `marks`: literals searched for because a keyword may be split on their lines (a colour
    code: `\x1b[31merror\x1b[0m:`), so such a line is read whole. A log coloured on every
    line would be parsed whole; the quiet search looks instead for each keyword with escape
    sequences let in between its words (a colour code is taken to split a keyword between its
    words or at its punctuation, never inside a word), and for a guarded keyword, unsplit, on
    a marked line. A guarded keyword split by a colour code is looked for in a block holding
    an escape byte only (a second database, compiled on first need: a log that is never
    coloured pays nothing for it). A coloured block where those still hit on a quarter of the
    lines is searched again with its escape sequences taken off, as the reader takes them off
    each line (_search_stripped): slower to make than the search itself, so only then.
    """

    def __init__(
        self,
        case_sensitive: list[str],
        ignore_case: list[str],
        engine: str = "auto",
        guards: Optional[Callable[[], dict[tuple[str, bool], tuple[str, ...]]]] = None,
        guards_key: Optional[Callable[[], bytes]] = None,
        marks: tuple[str, ...] = (),
    ) -> None:
        words = [(w.encode("utf-8"), False) for w in [*case_sensitive, *marks]] + [(w.encode("utf-8"), True) for w in ignore_case]
        self._marks = {(m.encode("utf-8"), False) for m in marks}
        self.engine = "none"
        self._db = None
        self._quiet_db = None  # the quiet search's database: the unguarded literals, the supersets
        self._quiet_long: dict[int, tuple[bytes, bool]] = {}
        self._loud: frozenset[int] = frozenset()  # ids of the literals that only guarded words hold
        self._held: set = set()  # the guarded literals (the marks left out), once quiet
        self._split: Optional[tuple[object, list[tuple[bytes, bool]]]] = None  # (database, keywords), on first need
        self._guards: Optional[Callable[[], dict[tuple[str, bool], tuple[str, ...]]]] = None  # until armed
        self._guards_key: Optional[Callable[[], bytes]] = None  # the digest of what the guards are made from
        self._words: list[tuple[bytes, bool]] = []
        self._kept: list[tuple[bytes, bool]] = []
        self._queues: list = []  # the helper threads of a parallel scan (one per core but one)
        self._helper_pid = -1  # the process they were started in
        self._local = threading.local()  # each calling thread's scratch spaces (_scratch)
        # a part boundary is a newline: no literal may span one
        self._parts = max(1, min(cores(), 4)) if not any(b"\n" in w for w, _ in words) else 1
        self._re: Optional[re.Pattern[bytes]] = None
        self._long: dict[int, tuple[bytes, bool]] = {}  # Hyperscan id -> a literal longer than HS_HEAD
        if not words:
            return
        if engine in ("auto", "hyperscan") and _hs is not None:
            kept = covering(words)
            self._long = _long_literals(kept)
            self._db = _hs_database(words, kept)
            self.engine = "hyperscan"
            if guards is not None or marks:
                self._guards, self._guards_key = guards or dict, guards_key
            self._words, self._kept = words, kept
            return
        if engine == "hyperscan":
            raise RuntimeError("hyperscan is not installed")
        words = covering(words)
        if engine in ("auto", "re2"):
            # RE2 (Linux on arm64, where Hyperscan has no wheel): a DFA, linear in the input
            try:
                import re2  # type: ignore[import-not-found]
            except Exception:
                re2 = None
            if re2 is not None:
                alts = [re.escape(w.decode("latin-1")) for w, ci in words if not ci]
                alts += ["(?i:" + re.escape(w.decode("latin-1")) + ")" for w, ci in words if ci]
                opts = re2.Options()
                opts.encoding = re2.Options.Encoding.LATIN1
                opts.max_mem = 64 << 20
                self._re = re2.compile("|".join(alts).encode("latin-1"), opts)
                self.engine = "re2"
                return
            if engine == "re2":
                raise RuntimeError("google-re2 is not installed")
        from slurmdoc.engine.matcher import trie_regex

        cs = [w.decode("latin-1") for w, ci in words if not ci]
        ci = [w.decode("latin-1") for w, ci in words if ci]
        parts = ([trie_regex(cs)] if cs else []) + ([f"(?i:{trie_regex(ci)})"] if ci else [])
        self._re = re.compile("|".join(parts).encode("latin-1"))
        self.engine = "re"

    @property
    def parallel(self) -> bool:
        """Whether a search runs on several cores without the GIL (then reading ahead pays)."""
        return self._db is not None and self._parts > 1

    @property
    def can_quiet(self) -> bool:
        """Whether a quiet search exists (some literal is guarded). Built on first asking (an
        input big enough to skip in): the guards cost tens of ms to make, the database over a
        hundred to compile; both are kept beside the bytecode, keyed by what they are made of."""
        if self._guards is not None:
            make, self._guards = self._guards, None
            words = self._words
            path = _hs_path(True)
            made_of = self._guards_key() if self._guards_key is not None else b""
            key = _hs_key(words, [made_of.hex()]) if made_of else b""
            kept = _hs_load_quiet(key, path) if key else None
            if kept is not None:
                db, held = kept
                held = held | self._marks
            else:
                guards = make()
                held, rest, exprs = self._quiet_parts(guards)
                if not exprs:
                    return False
                try:
                    db = _hs_compile(rest, exprs)
                except Exception:  # noqa: BLE001 - an expression Hyperscan refuses (a rule of the user's)
                    # the keywords of that rule are searched as plain literals; the others
                    # keep their guards
                    refused = _refused(sorted({e for es in guards.values() for e in es}))
                    guards = {k: es for k, es in guards.items() if not refused.intersection(es)}
                    held, rest, exprs = self._quiet_parts(guards)
                    try:
                        db = _hs_compile(rest, exprs) if guards else None
                    except Exception:  # noqa: BLE001 - refused together: no quiet search
                        db = None
                    if db is None:
                        return False
                if key:
                    _hs_keep(key + _held_blob(held - self._marks), db, path)
            loud = _loud_ids(self._kept, words, held)
            if loud:
                self._quiet_db = db
                self._held = held - self._marks
                self._quiet_long = _long_literals(covering([w for w in words if w not in held]))
                self._loud = loud
        return self._quiet_db is not None

    def _quiet_parts(self, guards: dict[tuple[str, bool], tuple[str, ...]]) -> tuple[set, list[tuple[bytes, bool]], list[str]]:
        """The quiet search's guarded literals (the marks among them), the literals it keeps
        searching for, and its expressions."""
        words = self._words
        held = {(w.encode("utf-8"), ci) for (w, ci) in guards} | self._marks
        rest = covering([w for w in words if w not in held])
        exprs = sorted({e for es in guards.values() for e in es}) + _split_marked(words, self._marks, held - self._marks)
        return held, rest, exprs

    def may_match(self, buf: bytes | bytearray, start: int, end: int) -> bool:
        """Whether a rule may match the line buf[start:end], as the quiet search judges a line:
        an unguarded literal or a guarded literal's line superset is on it; a coloured line is
        judged with its escape sequences taken off, as the reader takes them off before any rule
        sees it. True when there is no quiet search (can_quiet not asked, or none). Safe beside a
        search running on another thread: each thread asks with its own scratch space."""
        db = self._quiet_db
        if db is None:
            return True
        scratch = self._scratch(db)
        if buf.find(b"\x1b", start, end) >= 0:
            text = strip_escapes(bytes(memoryview(buf)[start:end]))
            return bool(self._scan(memoryview(text), 0, len(text), scratch, db, self._quiet_long))
        with memoryview(buf) as view:
            return bool(self._scan(view, start, end, scratch, db, self._quiet_long))

    def find(self, buf: bytearray, end: int, quiet: bool = False) -> list[int]:
        """Sorted offsets (somewhere inside each match) of every literal in buf[:end]; quiet:
        of the unguarded literals and of the guarded literals' line supersets."""
        return self.search(buf, end, quiet)[0]

    def search(self, buf: bytearray, end: int, quiet: bool = False) -> tuple[list[int], int]:
        """find()'s offsets, and how many of them are hits of guarded literals (0 when quiet)."""
        if self._db is not None:
            split = None
            if quiet and self._quiet_db is not None and self._held and buf.find(b"\x1b", 0, end) >= 0:
                split = self._split_search()
                if split[0] is None:
                    quiet = False  # (no database for split keywords: this block is searched as always)
            db, long, loud = (self._quiet_db, self._quiet_long, frozenset()) if quiet and self._quiet_db is not None else (self._db, self._long, self._loud)
            held = [0]
            if self._parts > 1 and end >= PARALLEL_MIN:
                found = self._find_parallel(buf, end, db, long, loud, held)
            else:
                found = self._scan(memoryview(buf), 0, end, None, db, long, loud, held)
            if quiet and split is not None:
                more = self._scan_split(buf, end, *split)
                if more:
                    found = sorted(set(found).union(more))
                if dense(len(found), buf, end):
                    # coloured lines dense with a guarded keyword (on a coloured line the
                    # keyword whole is a hit, its guard unseen behind the codes): the block
                    # with its escape sequences taken off, where the guards can judge
                    found = self._search_stripped(buf, end)
            return found, held[0]
        if self._re is not None:
            return [m.start() for m in self._re.finditer(buf, 0, end)], 0
        return [], 0

    def find_rejoined(self, buf: bytearray, end: int, width: int, quiet: bool = False) -> list[int]:
        """find() on buf[:end] as it reads with a terminal's hard wrap at `width` undone
        (rejoin): a keyword the wrap cut in two is in neither piece, so the search of the raw
        block cannot see it. Each offset found is given back as its offset in the raw block."""
        text, at, gone = rejoin(bytes(memoryview(buf)[:end]), width)
        if not at:
            return []
        out = []
        for h in self.find(bytearray(text), len(text), quiet):
            k = bisect_right(at, h)
            out.append(h + gone[k - 1] if k else h)
        return out

    def _scratch(self, db) -> object:
        """This thread's scratch space for `db`. A database's own is one for all threads, and
        two threads may search at once (a big input's read-ahead on its thread, may_match on
        the parsing one, a library's caller diagnosing on several threads)."""
        got = getattr(self._local, "scratches", None)
        if got is None:
            got = self._local.scratches = {}
        scratch = got.get(id(db))
        if scratch is None:
            scratch = got[id(db)] = _hs.Scratch(db)
        return scratch

    def _scan(self, view: memoryview, start: int, end: int, scratch: object, db=None, long: Optional[dict] = None,
              loud: frozenset = frozenset(), held: Optional[list[int]] = None) -> list[int]:
        """Offsets found in view[start:end] by `db` (the search's by default), `long` its long
        literals; hits of the literals in `loud` are counted into held[0]."""
        if db is None:
            db, long = self._db, self._long
        out: list[int] = []
        add = out.append
        n = 0
        size = end - start

        def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            if to > size:
                return  # in the padding of a short scan
            if i in long:  # only the literal's first HS_HEAD bytes were searched for
                w, ci = long[i]
                s = start + to - HS_HEAD
                if s + len(w) > end:
                    return
                got = view[s:s + len(w)].tobytes()
                if (got.lower() if ci else got) != w:
                    return
            if i in loud:
                nonlocal n
                n += 1
            add(start + to - 1)

        _hs_scan(db, view[start:end], on_match, scratch if scratch is not None else self._scratch(db))
        out.sort()
        if held is not None:
            held[0] += n
        return out

    def _search_stripped(self, buf: bytearray, end: int) -> list[int]:
        """The quiet search of a block holding escape bytes: a colour code can stand anywhere
        on a line (between a keyword's words, inside a rule's match), where neither a keyword
        nor a line superset is in the raw bytes. The reader takes escape sequences off each
        line before any rule sees it, so the search runs on the block with them taken off the
        same way (strip_escapes: newlines stay, so each line keeps its number), and each line
        found is given back as the offset of that line's start in the raw block."""
        raw = bytes(memoryview(buf)[:end])
        text = strip_escapes(raw)
        found = self._scan(memoryview(text), 0, len(text), None, self._quiet_db, self._quiet_long)
        out: list[int] = []
        s_at = r_at = 0  # the start of the line reached, in the stripped and the raw block
        for h in found:
            if h < s_at:
                continue  # (the line already given)
            k = text.count(b"\n", s_at, h)
            if k:
                s_at = text.rfind(b"\n", s_at, h) + 1
                r_at = _after_newlines(raw, r_at, k)
            if not out or out[-1] != r_at:
                out.append(r_at)
        return out

    def _split_search(self) -> tuple[object, list[tuple[bytes, bool]]]:
        """The database of the guarded keywords split by a colour code, and the keywords (None
        and [] when Hyperscan refuses it): loaded from its cache, or compiled (a third of a
        second) and kept, on the first block that holds an escape byte."""
        if self._split is None:
            exprs, keywords = _split_guarded(self._held)
            db = None
            if exprs:
                key = _hs_key([], exprs)
                path = _hs_path(True, split=True)
                got = _hs_read(key, path)
                if got is not None:
                    db = got[1]
                else:
                    try:
                        db = _hs_compile([], exprs)
                    except Exception:  # noqa: BLE001 - a keyword Hyperscan refuses (a user's, too long)
                        db = None
                    else:
                        _hs_keep(key, db, path)
            self._split = (db, keywords) if db is not None or not exprs else (None, [])
            if not exprs:
                self._held = set()  # nothing a colour code can split: never ask again
        return self._split

    def _scan_split(self, buf: bytearray, end: int, db, keywords: list[tuple[bytes, bool]]) -> list[int]:
        """Offsets in buf[:end] of the guarded keywords split by an escape sequence (a match
        that is a keyword whole is not one)."""
        out: list[int] = []
        add = out.append
        view = memoryview(buf)

        def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            if to > end:
                return  # in the padding of a short scan
            w, ci = keywords[i]
            if to >= len(w):
                got = view[to - len(w):to].tobytes()
                if (got.lower() if ci else got) == w:
                    return
            add(to - 1)

        try:
            _hs_scan(db, view[:end], on_match, self._scratch(db))
        finally:
            view.release()
        return sorted(out)

    def _find_parallel(self, buf: bytearray, end: int, db=None, long: Optional[dict] = None,
                       loud: frozenset = frozenset(), held: Optional[list[int]] = None) -> list[int]:
        """The same offsets. The block is cut after newlines into pieces of about
        PARALLEL_PIECE bytes, and the calling thread and a helper thread per other core each
        take the next piece left until none is (the scan runs without the GIL). The helpers
        live as long as the prefilter and wait for blocks; one the system gives no CPU (other
        work on the machine) holds up the piece it took, never the others: the caller scans
        every piece left and waits only for pieces taken."""
        cuts = [0]
        while cuts[-1] < end:
            at = cuts[-1] + PARALLEL_PIECE
            nl = buf.find(b"\n", at - 1, end) if at < end else -1
            cuts.append(nl + 1 if nl >= 0 else end)
        if db is None:
            db, long = self._db, self._long
        if len(cuts) <= 2:
            return self._scan(memoryview(buf), 0, end, None, db, long, loud, held)
        job = _Job(self, buf, cuts, db, long, loud)
        for q in self._helpers():
            q.put(job)
        try:
            job.work(None)
        finally:  # never leave a helper scanning with its scratch, or a view on the block
            with job.cond:
                job.cond.wait_for(lambda: job.busy == 0)
        if job.failed:
            raise job.failed[0]
        out: list[int] = []
        for f in job.found:
            out.extend(f)
        if held is not None:
            held[0] += sum(job.held)
        return out

    def _helpers(self) -> list:
        """The queues of the helper threads (one per core but the caller's), started on
        first use, and again in a forked child (threads do not survive a fork)."""
        if self._helper_pid != os.getpid():
            self._queues = []
            self._helper_pid = os.getpid()
            for _ in range(self._parts - 1):
                q: queue.SimpleQueue = queue.SimpleQueue()
                threading.Thread(target=_helper, args=(q,), daemon=True).start()
                self._queues.append(q)
        return self._queues

    def __del__(self) -> None:
        # the helpers hold no reference to the prefilter: told to end when it goes
        if getattr(self, "_helper_pid", None) == os.getpid():
            for q in self._queues:
                q.put(None)


# an escape sequence as the reader takes it off a line (damage.ANSI, over bytes): a control
# sequence (colour, cursor), or a two-byte one
ESCAPE = re.compile(ANSI.pattern.encode("ascii"))


def _hs_scan(db, piece: memoryview, on_match: Callable, scratch: object = None) -> None:
    r"""Scan one piece with `db`. Hyperscan's engine for short blocks misses a match ending the
    block in some databases (a literal beside an expression such as `\*a[^\n]*`, at 17 to 34
    bytes): newlines after a short piece, which no literal or expression holds, take it off
    that engine and change no offset (a match in them ends past the piece: callers drop it)."""
    if len(piece) < SHORT_SCAN:
        db.scan(piece.tobytes() + b"\n" * SHORT_SCAN, match_event_handler=on_match, scratch=scratch)
    else:
        db.scan(piece, match_event_handler=on_match, scratch=scratch)


def strip_escapes(raw: bytes) -> bytes:
    """`raw` with every escape sequence taken off, exactly as ESCAPE.sub would, at memory
    speed for a coloured log: a log's colour codes are a few sequences repeated, so those of
    a sample are each replaced throughout (bytes.replace), which equals the regex's result
    when every escape byte begins one of them (a sequence holds one escape byte, at its start,
    and none is the beginning of another: the sum of their counts says so); else the regex.
    Each sequence costs two passes over the block: past FEW of them the regex is faster (a log
    colouring each rank its own way holds hundreds)."""
    n = raw.count(b"\x1b")
    if not n:
        return raw
    first = raw.find(b"\x1b")
    seqs = set(ESCAPE.findall(raw, first, first + SAMPLE))
    if len(seqs) > FEW or sum(raw.count(q) for q in seqs) != n:
        return ESCAPE.sub(b"", raw)  # a sequence the sample lacks, or a stray escape byte
    for q in seqs:
        raw = raw.replace(q, b"")
    return raw


SAMPLE = 1 << 16  # bytes after the first escape byte whose sequences are taken as the log's
FEW = 5  # distinct sequences replaced throughout at most (about the regex's time at 5, on 8 MiB)


WRAP_SAMPLE = 16 << 10  # bytes at a block's start measured for a terminal's hard wrap
WRAP_HEAD = 1 << 20  # bytes at an input's start measured for it (the whole input keeps what they show)


def wrap_width(buf: bytearray, end: int, sample: int = WRAP_SAMPLE) -> int:
    """The width a terminal hard-wrapped the lines at the start of buf[:end] at (its first
    `sample` bytes), or 0.

    Under a hard wrap no line is longer than the width, and every line that reached it goes on
    on the next: so the longest line of the sample (MIN_WIDTH to MAX_WIDTH characters), when
    WIDTH_CONFIRM lines of that length are each followed by a line that cannot be a record of
    its own (not blank, no record's start, not the next line of the same kind or srun label)
    the way the repair (damage.py) reads a wrap's rest. Bytes are measured first (a line has at
    least as many bytes as characters): most blocks are ruled out without decoding a line."""
    raw = bytes(memoryview(buf)[:min(end, sample)])
    lines = raw.split(b"\n")[:-1]
    if len(lines) <= WIDTH_CONFIRM:
        return 0
    sizes = [len(x) - (x[-1:] == b"\r") for x in lines]
    if max(sizes) < MIN_WIDTH:
        return 0
    if raw.isascii():
        text = None
        width = max(sizes)
    else:
        text = [x.decode("utf-8", "replace").rstrip("\r") if n >= MIN_WIDTH else "" for x, n in zip(lines, sizes)]
        sizes = [len(t) for t in text]
        width = max(sizes)
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        return 0
    at = [i for i, n in enumerate(sizes[:-1]) if n == width][:WIDTH_WINDOW]  # (a template's lines: judged by the first few)
    wraps = 0
    for i in at:
        line = text[i] if text is not None else lines[i].decode("ascii").rstrip("\r")
        rest = lines[i + 1].decode("utf-8", "replace")
        if not rest.strip() or RECORD_START.match(rest) or _kind(rest) == _kind(line) or (_label_end(rest) and _label_end(line)):
            continue
        wraps += 1
        if wraps >= WIDTH_CONFIRM:
            return width
    return 0


def rejoin(raw: bytes, width: int) -> tuple[bytes, list[int], list[int]]:
    """`raw` with the line end after every line `width` characters long taken out (a hard
    wrap undone, as the repair joins the pieces before any rule reads them), and where: the
    offsets in the text at which a line end was taken out (sorted), and how many bytes were
    taken out up to each (so text offset h is raw offset h + gone[k - 1], k the number of
    those offsets at or before h)."""
    lines = raw.split(b"\n")
    parts: list[bytes] = []
    at: list[int] = []
    gone: list[int] = []
    t = n = 0
    last = len(lines) - 1
    for i, ln in enumerate(lines):
        body = ln[:-1] if ln[-1:] == b"\r" else ln
        if i < last and len(body) >= width and (len(body) if body.isascii() else len(body.decode("utf-8", "replace"))) == width:
            parts.append(body)
            t += len(body)
            n += len(ln) - len(body) + 1
            at.append(t)
            gone.append(n)
        else:
            parts.append(ln if i == last else ln + b"\n")
            t += len(parts[-1])
    return b"".join(parts), at, gone


def _after_newlines(raw: bytes, at: int, k: int) -> int:
    """The offset just after the k-th newline of raw[at:] (k >= 1): newlines counted in C
    over ranges, not found one by one; the range grows from `at` until it holds the k-th
    (doubling), then is halved, each byte counted a few times: a step costs what it walks
    over, not what is left of the block (a block's found lines are walked to one by one)."""
    if k <= 8:
        for _ in range(k):
            at = raw.index(b"\n", at) + 1
        return at
    lo, seen, step = at, 0, 4096  # seen: the newlines in raw[at:lo], fewer than k
    while True:
        hi = min(lo + step, len(raw))
        n = raw.count(b"\n", lo, hi)
        if seen + n >= k or hi == len(raw):
            break
        lo, seen, step = hi, seen + n, step * 2
    while hi - lo > 4096:  # the k-th newline lies in raw[lo:hi]
        mid = (lo + hi) // 2
        n = raw.count(b"\n", lo, mid)
        if seen + n >= k:
            hi = mid
        else:
            lo, seen = mid, seen + n
    for _ in range(k - seen):
        lo = raw.index(b"\n", lo) + 1
    return lo


class _Job:
    """One block scanned in pieces by several threads: who takes which piece, what each found."""

    __slots__ = ("prefilter", "buf", "cuts", "db", "long", "loud", "found", "held", "turn", "busy", "cond", "failed")

    def __init__(self, prefilter: Prefilter, buf: bytearray, cuts: list[int], db, long: dict, loud: frozenset) -> None:
        self.prefilter = prefilter
        self.buf = buf
        self.cuts = cuts
        self.db = db
        self.long = long
        self.loud = loud
        self.found: list = [None] * (len(cuts) - 1)
        self.held = [0] * (len(cuts) - 1)  # hits of `loud` literals, per piece
        self.turn = itertools.count()
        self.busy = 0  # pieces taken and not yet scanned
        self.cond = threading.Condition()
        self.failed: list[BaseException] = []

    def work(self, scratches: Optional[dict]) -> None:
        """Take the next piece left and scan it, until none is left (scratches: a helper's own,
        per database; None: the calling thread's, the database's own)."""
        pieces = len(self.cuts) - 1
        while True:
            with self.cond:
                i = next(self.turn)
                if i >= pieces:
                    return
                self.busy += 1
            try:
                scratch = None
                if scratches is not None:
                    scratch = scratches.get(id(self.db))
                    if scratch is None:
                        scratch = scratches[id(self.db)] = _hs.Scratch(self.db)
                held = [0]
                with memoryview(self.buf) as view:
                    self.found[i] = self.prefilter._scan(view, self.cuts[i], self.cuts[i + 1], scratch, self.db, self.long, self.loud, held)
                self.held[i] = held[0]
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                self.failed.append(e)
                if scratches is None:
                    raise
            finally:
                with self.cond:
                    self.busy -= 1
                    self.cond.notify_all()


def _helper(q) -> None:
    """A helper thread: the pieces it can take of each block posted to it, until told to end
    (None: its prefilter is gone). Its scratch space per database (the prefilter's two live as
    long as it, and so do their ids)."""
    scratches: dict = {}
    while (job := q.get()) is not None:
        job.work(scratches)
        del job  # hold no block, and no prefilter, while waiting
