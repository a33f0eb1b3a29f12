"""The prefilter (ingest/prefilter.py): every engine, and the search in parts on several
cores, find exactly the lines that hold a trigger literal (or, quietly, that a rule may match)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmdoc.ingest import hsdb
from slurmdoc.ingest import prefilter as prefilter_mod
from slurmdoc.ingest.prefilter import Prefilter


def test_the_simd_counter_is_used_where_installed():
    want = prefilter_mod.count_lf_simd if prefilter_mod._Str is not None else prefilter_mod.count_lf_bytes
    assert prefilter_mod.count_lf is want


@pytest.mark.skipif(prefilter_mod._Str is None, reason="stringzilla has no wheel here")
@given(st.binary(max_size=300), st.integers(0, 320), st.integers(0, 320))
def test_simd_count_is_bytearray_count(data, start, end):
    """Any bytes, any range (empty, reversed, past the end): the same count."""
    buf = bytearray(data)
    assert prefilter_mod.count_lf_simd(buf, start, end) == buf.count(b"\n", start, end)


def test_prefilter_engines_agree(keywords):
    cs, ci = keywords
    text = (
        "ok line\n"
        "1: torch.OutOfMemoryError: CUDA out of memory\n"
        "nothing here at all\n"
        "[rank3]: Traceback (most recent call last):\n"
        "srun: error: n1: task 3: Exited with exit code 1\n"
        "done\n"
    ).encode()
    buf = bytearray(text)
    lines_of = lambda offs: sorted({text.count(b"\n", 0, o) for o in offs})  # noqa: E731
    via_re = Prefilter(cs, ci, engine="re")
    assert via_re.engine == "re"
    assert lines_of(via_re.find(buf, len(buf))) == [1, 3, 4]
    via_re2 = Prefilter(cs, ci, engine="re2")
    assert via_re2.engine == "re2"
    assert lines_of(via_re2.find(buf, len(buf))) == [1, 3, 4]
    if prefilter_mod._hs is not None:
        via_hs = Prefilter(cs, ci, engine="hyperscan")
        assert lines_of(via_hs.find(buf, len(buf))) == [1, 3, 4]


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
@given(
    st.lists(st.sampled_from([b"Error", b"Traceback", b"xx", b"\n", b"ok ", b"Err", b"or"]), max_size=60),
    st.integers(1, 4),
    st.integers(1, 40),
)
def test_a_block_scanned_in_parts_gives_the_one_part_offsets(pieces, parts, piece):
    """On several cores a big block is cut after newlines into pieces that the threads take
    in turn: any text, any number of threads, any piece size, the offsets are those of one
    scan of the whole (a literal next to a cut is neither lost nor found twice)."""
    p = Prefilter(["Error", "Traceback"], ["or"], engine="hyperscan")
    buf = bytearray(b"".join(pieces))
    whole = p._scan(memoryview(buf), 0, len(buf), None)
    p._parts = parts
    real = prefilter_mod.PARALLEL_PIECE
    prefilter_mod.PARALLEL_PIECE = piece
    try:
        assert p._find_parallel(buf, len(buf)) == whole
    finally:
        prefilter_mod.PARALLEL_PIECE = real


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_a_helper_that_gets_no_cpu_holds_up_one_piece_at_most(monkeypatch):
    """A busy machine: the helper thread is slow to run. The caller does not wait for it to
    share the work: it scans every piece the helper has not taken, and the offsets are the
    same."""
    import threading as th

    p = Prefilter(["Error"], [], engine="hyperscan")
    p._parts = 2
    monkeypatch.setattr(prefilter_mod, "PARALLEL_PIECE", 64)
    buf = bytearray(b"a line with an Error in it\n" * 200)
    whole = p._scan(memoryview(buf), 0, len(buf), None)
    took: list[str] = []
    real_scan = p._scan

    def scan(view, start, end, scratch, *rest):
        took.append("helper" if scratch is not None else "caller")
        if scratch is not None:
            th.Event().wait(0.5)  # the helper sits on its first piece for half a second
        return real_scan(view, start, end, scratch, *rest)

    monkeypatch.setattr(p, "_scan", scan)
    assert p._find_parallel(buf, len(buf)) == whole
    assert took.count("helper") <= 1 and took.count("caller") >= len(took) - 1 > 50


@pytest.mark.skipif(prefilter_mod._hs is None or not hasattr(os, "fork"), reason="Hyperscan has no wheel here, or no fork")
def test_a_forked_child_scans_in_parts_with_helpers_of_its_own(monkeypatch):
    """Threads do not survive a fork (the epilogue forks a child per diagnosis): a child's
    prefilter starts helpers of its own and finds the same offsets."""
    p = Prefilter(["Error"], [], engine="hyperscan")
    p._parts = 2
    monkeypatch.setattr(prefilter_mod, "PARALLEL_PIECE", 64)
    buf = bytearray(b"a line with an Error in it\n" * 200)
    whole = p._scan(memoryview(buf), 0, len(buf), None)
    assert p._find_parallel(buf, len(buf)) == whole
    parent = list(p._queues)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = p._find_parallel(buf, len(buf)) == whole and p._queues and p._queues != parent
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert p._queues == parent


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_a_prefilter_s_helper_threads_end_with_it(monkeypatch):
    """Helpers start on the first block scanned in parts and end when their prefilter goes:
    a library that builds prefilters again and again leaves no threads behind."""
    import gc
    import threading as th
    import time

    monkeypatch.setattr(prefilter_mod, "PARALLEL_PIECE", 64)
    buf = bytearray(b"a line with an Error in it\n" * 200)
    before = set(th.enumerate())
    started = set()
    for _ in range(5):
        p = Prefilter(["Error"], [], engine="hyperscan")
        p._parts = 3
        assert len(p._find_parallel(buf, len(buf))) == 200
        new = set(th.enumerate()) - before - started
        assert len(new) == 2  # one helper per core but the caller's
        started |= new
        del p
        gc.collect()
    deadline = time.monotonic() + 5
    while any(t.is_alive() for t in started) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(started) == 10 and not any(t.is_alive() for t in started)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_threads_searching_at_once_share_one_set_of_helpers_and_find_the_same(monkeypatch):
    """Several threads searching in parts at once (a big file's read-ahead beside the parsing
    thread, a library's caller diagnosing on several threads) start one helper per core but the
    callers' between them, each with its own scratch space, and each finds what one search
    alone finds."""
    import threading as th

    monkeypatch.setattr(prefilter_mod, "PARALLEL_PIECE", 64)
    buf = bytearray(b"a line with an Error in it\nand one with none\n" * 300)
    p = Prefilter(["Error"], [], engine="hyperscan")
    p._parts = 3
    want = p._scan(memoryview(buf), 0, len(buf), None)
    before = set(th.enumerate())
    go = th.Barrier(6)
    got: list = []

    def search() -> None:
        go.wait()
        for _ in range(20):
            got.append(p._find_parallel(buf, len(buf)) == want)

    callers = [th.Thread(target=search) for _ in range(6)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert got == [True] * 120
    assert len(set(th.enumerate()) - before) == 2  # one set of helpers


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_big_blocks_are_scanned_in_parts_where_there_are_cores(monkeypatch):
    """A block of PARALLEL_MIN bytes or more goes to the parallel scan when the prefilter has
    more than one part (one per core); smaller blocks and one core keep the one-thread scan."""
    p = Prefilter(["Error"], [], engine="hyperscan")
    calls = []
    monkeypatch.setattr(p, "_find_parallel", lambda buf, end, *rest: calls.append(end) or [])
    big = bytearray(b"line Error\n" * (prefilter_mod.PARALLEL_MIN // 11 + 1))
    p._parts = 2
    p.find(bytearray(b"Error\n"), 6)
    p.find(big, len(big))
    p._parts = 1
    p.find(big, len(big))
    assert calls == [len(big)]
    assert Prefilter(["a\nb"], [], engine="hyperscan")._parts == 1  # no cut may split a literal


def test_ignore_case_literals_match_any_case():
    for engine in ["re", "re2"] + (["hyperscan"] if prefilter_mod._hs is not None else []):
        p = Prefilter(["Exact"], ["shouting"], engine=engine)
        buf = bytearray(b"exact\nEXACT\nExact\nSHOUTING\nShouting\n")
        hits = sorted({bytes(buf).count(b"\n", 0, o) for o in p.find(buf, len(buf))})
        assert hits == [2, 3, 4], engine


def test_a_dense_block_is_one_with_a_guarded_keyword_on_a_quarter_of_its_lines_or_more():
    data = bytearray(b"x\n" * 4000)
    assert prefilter_mod.dense(1000, data, len(data)) and not prefilter_mod.dense(999, data, len(data))
    assert not prefilter_mod.dense(prefilter_mod.DENSE_MIN - 1, data, 2 * (prefilter_mod.DENSE_MIN - 1))  # too few to judge


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_a_literal_that_ends_a_short_block_is_found_quietly():
    """Hyperscan's engine for short blocks (17 to 34 bytes here) misses a literal match that
    ends the block when the database also holds an expression like `\\*a[^\\n]*`, as a quiet
    database does: the last piece of an input whose last line has no newline. Whatever the
    length, every literal is found where it ends the block."""
    pf = Prefilter(["xy", "*a"], [], engine="hyperscan", guards=lambda: {("*a", False): (r"\*a[^\n]*",)}, guards_key=lambda: b"")
    assert pf.can_quiet
    for n in range(64):
        buf = bytearray(b"q" * n + b"xy")
        assert pf.find(buf, len(buf), quiet=True) == [n + 1], n
        assert pf.find(bytearray(b"*a" + b"q" * n), n + 2, quiet=True)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_a_guarded_keyword_split_by_a_colour_code_is_found_quietly_and_whole_left_to_its_guard(tmp_path, monkeypatch):
    """Quietly, a guarded keyword is found where its guard (a rule's line superset) matches;
    split by an escape sequence between its words, neither the keyword nor the superset is in
    the raw line, so in a block holding an escape byte it is looked for split too, while a
    whole one stays its guard's to judge (or the search would be quiet no more). When no
    database for split keywords can be had, such a block is searched as always."""
    monkeypatch.setattr(hsdb, "HS_CACHE", tmp_path / "__pycache__" / "prefilter.hsdb")
    monkeypatch.setattr(hsdb.sys, "dont_write_bytecode", False)

    def quiet_one() -> Prefilter:
        pf = Prefilter(["timed out", "Traceback"], [], engine="hyperscan",
                       guards=lambda: {("timed out", False): (r"store timed out",)}, guards_key=lambda: b"t",
                       marks=("\x1b[",))  # (as the reader's: a coloured line, read whole when not quiet)
        assert pf.can_quiet
        return pf

    def lines(pf: Prefilter, block: bytes) -> set[int]:
        buf = bytearray(block)
        return {buf.count(b"\n", 0, h) for h in pf.find(buf, len(buf), quiet=True)}

    pf = quiet_one()
    plain = b"fetch timed out, retry\nstore timed out\nTraceback (most recent call last):\n"
    assert lines(pf, plain) == {1, 2} and pf._split is None  # no escape byte: no second database
    coloured = b"\x1b[1mstep 3\x1b[0m\nfetch timed out, retry\nfetch timed\x1b[0m out\nfetch \x1b[31mtimed\x1b[0m \x1b[1mout\n" + plain
    assert lines(pf, coloured) == {2, 3, 5, 6}
    assert hsdb._hs_path(True, split=True).exists()  # kept like bytecode
    again = quiet_one()
    monkeypatch.setattr(prefilter_mod, "_hs_compile", None)  # (compiling now would fail)
    assert lines(again, coloured) == {2, 3, 5, 6}
    refused = quiet_one()
    refused._split = (None, [])
    assert lines(refused, coloured) == set(range(7))  # every literal's line, every coloured line


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_coloured_lines_dense_with_a_guarded_keyword_are_searched_with_their_escapes_taken_off():
    """On a coloured line a guarded keyword whole is a hit of the quiet search (its guard, a
    rule's line superset, cannot see through colour codes). A block where such hits are dense
    is searched again with its escape sequences taken off, as the reader takes them off each
    line: only the lines the guard matches are found, a colour code anywhere in them (between
    a keyword's words, inside a word), each at its line's start in the raw block."""
    pf = Prefilter(["timed out", "Traceback"], [], engine="hyperscan",
                   guards=lambda: {("timed out", False): (r"store timed out",)}, guards_key=lambda: b"t",
                   marks=("\x1b[",))  # (as the reader's: a coloured line, read whole when not quiet)
    assert pf.can_quiet

    def lines(block: bytes) -> list[int]:
        buf = bytearray(block)
        return [buf.count(b"\n", 0, h) for h in pf.find(buf, len(buf), quiet=True)]

    noise = b"\x1b[32mstep 3\x1b[0m fetch \x1b[33mtimed out\x1b[0m, retrying\n"
    events = [b"\x1b[1mstore timed\x1b[0m out\n", b"store \x1b[31mtim\x1b[0med out\n", b"\x1b[2mTraceback (most recent call last):\n",
              b"store timed out\n", b"\x1b[1mTraceback\x1b[0m (most recent call last):\n"]
    for gap in (1, 9, 700):  # lines of noise between (offsets found one by one and by halving)
        block, want = noise * 2000, []
        for ev in events:
            want.append(block.count(b"\n"))
            block += ev + noise * gap
        assert lines(block) == want, gap
    sparse = noise * 3 + events[0] + b"plain line\n" * 40
    assert sorted(set(lines(sparse))) == [0, 1, 2, 3]  # not dense: each coloured line with the keyword, as before


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_may_match_judges_one_line_as_the_quiet_search_judges_it():
    """A line with a guarded keyword whose guard it does not meet: no rule can match it; one
    that meets it, or holds an unguarded keyword: maybe. A coloured line is judged with its
    escape sequences taken off, as the reader takes them off; with no quiet search (not asked
    for, or none to make), every line may match. Asked from another thread, the same answers."""
    import threading

    def make() -> Prefilter:
        return Prefilter(["timed out", "Traceback"], [], engine="hyperscan",
                         guards=lambda: {("timed out", False): (r"store timed out",)}, guards_key=lambda: b"m",
                         marks=("\x1b[",))

    block = bytearray(b"fetch timed out, retrying\nstore timed out\nTraceback (most recent call last):\n"
                      b"fetch \x1b[33mtimed out\x1b[0m\n\x1b[1mstore timed\x1b[0m out\nplain step 3\n")
    spans, at = [], 0
    for line in bytes(block).split(b"\n")[:-1]:
        spans.append((at, at + len(line)))
        at += len(line) + 1
    pf = make()
    assert all(pf.may_match(block, s, e) for s, e in spans)  # no quiet search asked for yet
    assert pf.can_quiet
    want = [False, True, True, False, True, False]
    assert [pf.may_match(block, s, e) for s, e in spans] == want
    got: list = []
    t = threading.Thread(target=lambda: got.extend(pf.may_match(block, s, e) for s, e in spans))
    t.start()
    t.join()
    assert got == want


_SEQUENCES = st.sampled_from([b"\x1b[0m", b"\x1b[1;31m", b"\x1b[38;5;208m", b"\x1b[?25l", b"\x1b[K", b"\x1bM", b"\x1b\\", b"\x1b[2J", b"\x1b[1;2 q"])
_PIECES = st.one_of(st.binary(max_size=12).map(lambda b: b.replace(b"\x1b", b"")), _SEQUENCES, st.just(b"\x1b"), st.just(b"\n"),
                    st.binary(min_size=1, max_size=6).map(lambda b: b"\x1b" + b))


@given(st.lists(_PIECES, max_size=60), st.integers(0, 3))
def test_escape_sequences_are_taken_off_exactly_as_the_regex_takes_them(pieces, far):
    """Whatever the bytes (sequences repeated, stray escape bytes, sequences the sample does
    not reach), strip_escapes gives what the regex gives."""
    raw = b"".join(pieces)
    if far:  # a sequence first seen past the sample
        raw = raw + b"x" * (prefilter_mod.SAMPLE * far) + b"\x1b[4" + str(far).encode() + b"m" + raw
    assert prefilter_mod.strip_escapes(raw) == prefilter_mod.ESCAPE.sub(b"", raw)


@given(st.lists(st.integers(0, 9000), min_size=1, max_size=40), st.data())
def test_the_offset_after_k_newlines_is_found(gaps, data):
    raw = b"".join(b"x" * g + b"\n" for g in gaps)
    at = data.draw(st.integers(0, len(raw) - 1))
    after = [i + 1 for i, c in enumerate(raw) if c == 10 and i >= at]
    k = data.draw(st.integers(1, len(after)))
    assert prefilter_mod._after_newlines(raw, at, k) == after[k - 1]


class _Counted(bytes):
    """Bytes that add up how many bytes their newline counts and searches look at."""

    looked = 0

    def count(self, sub, start=0, end=None):  # type: ignore[override]
        _Counted.looked += (len(self) if end is None else min(end, len(self))) - start
        return bytes.count(self, sub, start, end)

    def index(self, sub, start=0, end=None):  # type: ignore[override]
        at = bytes.index(self, sub, start, end if end is not None else len(self))
        _Counted.looked += at + 1 - start
        return at


@pytest.mark.parametrize("every", [9, 40, 1000])
def test_walking_a_block_line_by_line_looks_at_each_byte_a_few_times(every):
    # the line starts of a dense coloured block's found lines are walked to one after the
    # other: each step costs what it walks over (and a few KiB), not what is left of the
    # block, so a block whose found lines are many and far apart is not searched in time its
    # size times their number
    raw = _Counted(b"".join(b"line %d of the block\n" % i for i in range(60000)))
    _Counted.looked = 0
    at = 0
    for _ in range(60000 // every):
        at = prefilter_mod._after_newlines(raw, at, every)
    assert at == len(b"".join(b"line %d of the block\n" % i for i in range(60000 // every * every)))
    assert _Counted.looked <= 6 * len(raw) + (60000 // every) * 8192, (_Counted.looked, len(raw))  # (a few KiB a step at least)


@pytest.mark.parametrize("codes", [2, 40, 256])
def test_taking_escapes_off_a_block_reads_it_a_few_times_however_many_codes_it_holds(codes):
    # a block is stripped by replacing each of its colour codes throughout only while they are
    # few; a log colouring each rank's prefix its own way (a 256-colour code per rank) holds
    # hundreds, and a pass over the block for each was 30 times the regex's time
    raw = _Counted(b"".join(b"\x1b[38;5;%dm[rank%d]\x1b[0m step %d fetch timed out\n" % (i % codes, i, i) for i in range(20000)))
    _Counted.looked = 0
    assert prefilter_mod.strip_escapes(raw) == prefilter_mod.ESCAPE.sub(b"", raw)
    assert _Counted.looked <= 8 * len(raw), (_Counted.looked, len(raw))


@given(st.lists(st.text(alphabet="ab\u00e9 \r", max_size=90), max_size=30), st.integers(min_value=60, max_value=80))
def test_a_rejoined_blocks_offsets_map_back_to_the_same_bytes(lines, width):
    """rejoin() takes out the line end after every line of exactly `width` characters (CRLF
    or LF); an offset in the rejoined text, mapped back as find_rejoined maps its hits, is the
    raw byte that the text holds there, and nothing else is taken out."""
    from bisect import bisect_right

    raw = "\n".join(lines).encode()
    text, at, gone = prefilter_mod.rejoin(raw, width)
    assert len(raw) - len(text) == (gone[-1] if gone else 0)
    for h in range(len(text)):
        k = bisect_right(at, h)
        assert raw[h + (gone[k - 1] if k else 0)] == text[h]
    joined = sum(1 for i, ln in enumerate(lines[:-1]) if len(ln[:-1] if ln.endswith("\r") else ln) == width)
    assert len(at) == joined


def test_a_hard_wraps_width_is_the_longest_lines_whose_rest_goes_on():
    """A block a terminal hard-wrapped: its longest lines are all of one length, each followed
    by the rest of its line; the width is found, and a block with the same lines unwrapped has
    none."""
    long = [f"[rank{r}]: RuntimeError: the tensor of shape [{r}, 4096] on device cuda:{r} was freed while a collective still read it" for r in range(6)]
    short = [f"[rank{r}]: step {i} loss 1.{i}" for i in range(3) for r in range(2)]
    wrapped = [ln[i:i + 64] for ln in short + long for i in range(0, len(ln), 64)]
    data = bytearray(("\n".join(wrapped) + "\n").encode())
    assert prefilter_mod.wrap_width(data, len(data)) == 64
    plain = bytearray(("\n".join(short + long) + "\n").encode())
    assert prefilter_mod.wrap_width(plain, len(plain)) == 0
