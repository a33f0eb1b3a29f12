"""The prefilter (ingest/prefilter.py): every engine, the search in parts on several cores,
the shorter literal set, the quiet search and the kept databases find exactly the lines that
hold a trigger literal (or, quietly, that a rule may match)."""

from __future__ import annotations

import os

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.matcher import Matcher
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


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_the_compiled_prefilter_is_kept_like_bytecode(tmp_path, monkeypatch, keywords):
    """The Hyperscan database of a literal set is kept beside the bytecode and loaded by the
    next prefilter of the same set (no compiling, same offsets); another set, a damaged file
    or PYTHONDONTWRITEBYTECODE only mean compiling."""
    cs, ci = keywords
    monkeypatch.setattr(prefilter_mod, "HS_CACHE", tmp_path / "__pycache__" / "prefilter.hsdb")
    monkeypatch.setattr(prefilter_mod.sys, "dont_write_bytecode", False)
    compiled = []
    real = prefilter_mod._hs.Database
    monkeypatch.setattr(prefilter_mod._hs, "Database", lambda **kw: compiled.append(1) or real(**kw))
    buf = bytearray(b"ok\n1: torch.OutOfMemoryError: CUDA out of memory\nnothing\n[rank3]: Traceback (most recent call last):\n")
    want = Prefilter(cs, ci, engine="hyperscan").find(buf, len(buf))
    assert len(want) >= 2 and compiled == [1] and prefilter_mod.HS_CACHE.is_file()
    again = Prefilter(cs, ci, engine="hyperscan")
    assert compiled == [1] and again.find(buf, len(buf)) == want
    again._parts = 2
    assert again._find_parallel(buf, len(buf)) == want  # the loaded database's extra scratch works
    assert Prefilter(["nothing"], [], engine="hyperscan").find(buf, len(buf)) and compiled == [1, 1]
    for junk in (b"", b"\x00" * 40, prefilter_mod.HS_CACHE.read_bytes()[:-7]):
        prefilter_mod.HS_CACHE.write_bytes(junk)
        assert Prefilter(cs, ci, engine="hyperscan").find(buf, len(buf)) == want
    assert len(compiled) == 5
    monkeypatch.setattr(prefilter_mod.sys, "dont_write_bytecode", True)
    prefilter_mod.HS_CACHE.unlink()
    Prefilter(cs, ci, engine="hyperscan")
    assert not prefilter_mod.HS_CACHE.exists()


_WORD = st.text(alphabet="aAbB: -", min_size=1, max_size=5).map(str.encode)


def _lines_holding(words, text: bytes) -> list[int]:
    """The numbers of the lines that hold a literal, by brute force (ASCII case folding)."""
    out = []
    for n, line in enumerate(text.split(b"\n")):
        if any((w.lower() in line.lower()) if ci else (w in line) for w, ci in words):
            out.append(n)
    return out


@given(st.lists(st.tuples(_WORD, st.booleans()), min_size=1, max_size=12), st.lists(st.sampled_from(
    [b"a", b"A", b"b", b"B", b":", b" ", b"-", b"\n", b"ab", b"AB", b"a:b", b"Ab -"]), max_size=60))
def test_the_literals_left_out_find_no_line_the_others_miss(words, pieces):
    """A literal holding another is left out of the search: any literals, any text, every
    engine finds exactly the lines that hold one of all the literals."""
    kept = prefilter_mod.covering(words)
    assert set(kept) <= set(words) and len(kept) <= len(set(words))
    text = b"".join(pieces)
    buf = bytearray(text)
    want = _lines_holding(words, text)
    assert _lines_holding(kept, text) == want
    cs = [w.decode() for w, ci in words if not ci]
    ci = [w.decode() for w, ci in words if ci]
    for engine in ["re", "re2"] + (["hyperscan"] if prefilter_mod._hs is not None else []):
        p = Prefilter(cs, ci, engine=engine)
        assert sorted({text.count(b"\n", 0, o) for o in p.find(buf, len(buf))}) == want, engine


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
@given(st.lists(st.tuples(_WORD, st.booleans()), min_size=1, max_size=12), st.lists(st.sampled_from(
    [b"a", b"A", b"b", b"B", b":", b" ", b"-", b"\n", b"ab", b"AB", b"a:b", b"Ab -"]), max_size=60),
    st.integers(1, 4), st.floats(0, 1))
@example(words=[(b"ab", False)], pieces=[b"ab"], head=1, at=0.5)  # a head at the very end
def test_a_literal_searched_for_by_its_head_is_found_only_whole(words, pieces, head, at):
    """Hyperscan searches for a long literal by its first HS_HEAD bytes and the rest is checked
    after: with any head length, any literals and any text, the lines found are exactly those
    holding a whole literal (a head alone is no hit, nor a head at the end of the bytes searched: a reused block
    holds an earlier block's bytes past its end)."""
    real = prefilter_mod.HS_HEAD
    prefilter_mod.HS_HEAD = head
    try:
        text = b"".join(pieces)
        buf = bytearray(text)
        cs = [w.decode() for w, ci in words if not ci]
        ci = [w.decode() for w, ci in words if ci]
        p = Prefilter(cs, ci, engine="hyperscan")
        assert sorted({text.count(b"\n", 0, o) for o in p.find(buf, len(buf))}) == _lines_holding(words, text)
        cut = int(len(text) * at)  # the last block of an input ends anywhere: nothing past it is found
        assert sorted({text.count(b"\n", 0, o) for o in p.find(buf, cut)}) == _lines_holding(words, text[:cut])
    finally:
        prefilter_mod.HS_HEAD = real


def test_the_rule_pack_s_literals_that_hold_another_are_left_out(keywords):
    """On the bundled pack: many literals hold a shorter one (`OutOfMemoryError` and `Error`);
    each one left out holds one kept, case for case."""
    cs, ci = keywords
    words = [(w.encode(), False) for w in cs] + [(w.encode(), True) for w in ci]
    kept = prefilter_mod.covering(words)
    assert len(kept) < 0.9 * len(set(words))
    for w, c in set(words) - set(kept):
        assert any((k.lower() in w.lower()) if kc else (not c and k in w) for k, kc in kept), w


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
def test_the_quiet_search_is_kept_like_bytecode_and_keyed_by_what_it_is_made_of(tmp_path, monkeypatch, keywords):
    """Guards cost tens of ms and their database over a hundred to compile: both are kept
    beside the bytecode, loaded while what they are made of is the same, made again when it
    changes or the file is damaged."""
    from slurmdoc.engine.superset import line_guards

    cs, ci = keywords
    monkeypatch.setattr(prefilter_mod, "HS_CACHE", tmp_path / "__pycache__" / "prefilter.hsdb")
    monkeypatch.setattr(prefilter_mod.sys, "dont_write_bytecode", False)
    guards = line_guards(load_rulebook(None).rules)
    made: list[int] = []

    def make():
        made.append(1)
        return guards

    buf = bytearray(b"1: Training: step 3\n2: Training completed in 1:00:00\n3: ERROR | x | y\n")
    first = Prefilter(cs, ci, engine="hyperscan", guards=make, guards_key=lambda: b"pack-1")
    assert first.can_quiet and made == [1]
    want = first.find(buf, len(buf), quiet=True)
    assert {buf.count(b"\n", 0, h) for h in want} == {1, 2}  # the clean end and the error, not the step
    again = Prefilter(cs, ci, engine="hyperscan", guards=make, guards_key=lambda: b"pack-1")
    assert again.can_quiet and made == [1] and again._loud == first._loud and again.find(buf, len(buf), quiet=True) == want
    assert Prefilter(cs, ci, engine="hyperscan", guards=make, guards_key=lambda: b"pack-2").can_quiet and made == [1, 1]
    path = prefilter_mod._hs_path(True)
    for junk in (b"", path.read_bytes()[:-9]):
        path.write_bytes(junk)
        p = Prefilter(cs, ci, engine="hyperscan", guards=make, guards_key=lambda: b"pack-2")
        assert p.can_quiet and p.find(buf, len(buf), quiet=True) == want
    assert made == [1, 1, 1, 1]


_SGR = st.sampled_from(["\x1b[0m", "\x1b[1;31m", "\x1b[38;5;208m", "\x1b[?25l", "\x1b[K", "\x1bM"])  # what the paste repair takes off (damage.ANSI)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@given(data=st.data())
def test_a_keyword_split_by_colour_codes_between_its_words_is_found(data, keywords):
    """Any keyword of the pack, with escape sequences put in at any places that are not inside
    a word, behind and before any text: its expression finds it."""
    cs, ci = keywords
    word, ignore = data.draw(st.sampled_from([(w, False) for w in cs] + [(w, True) for w in ci]))
    raw = word.encode()
    cuts = [i for i in range(1, len(raw)) if not (prefilter_mod._word_byte(raw[i - 1]) and prefilter_mod._word_byte(raw[i]))]
    chosen = data.draw(st.lists(st.sampled_from(cuts), unique=True)) if cuts else []
    pieces, last = [], 0
    for c in sorted(chosen):
        pieces += [raw[last:c], data.draw(_SGR).encode()]
        last = c
    pieces.append(raw[last:])
    line = b"\x1b[32mhead\x1b[0m " + b"".join(pieces) + b" tail"
    if ignore:
        line = line.upper()
    db = prefilter_mod._hs_compile([], ["(?i)" + prefilter_mod._tolerant(raw) if ignore else prefilter_mod._tolerant(raw)])
    found: list[int] = []
    db.scan(line, match_event_handler=lambda *a: found.append(1))
    assert found, line


# escape sequences the reader takes off a line (api.ANSI): colour and cursor codes, and the
# two-byte ones (reverse index, string terminator, ...) that hold no `[`
_ESCAPES = st.sampled_from(["\x1b[0m", "\x1b[1;31m", "\x1b[K", "\x1bM", "\x1bD", "\x1b\\", "\x1b_"])


@pytest.fixture(scope="module")
def quiet_prefilter():
    from slurmdoc import api

    pf = api._prefilter(Matcher(load_rulebook(None)), "hyperscan")
    assert pf.can_quiet
    return pf


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_rule_s_line_with_escape_sequences_outside_its_keywords_is_found_quietly(data, quiet_prefilter, book):
    """Any single-line match example of any rule, behind a prefix, with escape sequences put in
    where they split no word and no keyword of the rule (inside one is a documented limit):
    the reader takes them off and the rule matches, so the quiet search must find the line."""
    from slurmdoc.api import ANSI

    rule = data.draw(st.sampled_from([r for r in book.rules if any("\n" not in (e if isinstance(e, str) else e.text) for e in r.spec.examples.match)]))
    text = data.draw(st.sampled_from([t for t in (e if isinstance(e, str) else e.text for e in rule.spec.examples.match) if "\n" not in t]))
    raw = "[rank3]: " + text
    hay = raw.lower() if rule.spec.ignore_case else raw
    inside = set()
    for k in rule.keywords:
        i = hay.find(k)
        while i >= 0:
            inside.update(range(i + 1, i + len(k)))
            i = hay.find(k, i + 1)
    cuts = [i for i in range(1, len(raw)) if i not in inside and not (raw[i - 1].isalnum() and raw[i].isalnum())]
    chosen = sorted(data.draw(st.lists(st.sampled_from(cuts), unique=True, max_size=4))) if cuts else []
    pieces, last = [], 0
    for c in chosen:
        pieces += [raw[last:c], data.draw(_ESCAPES)]
        last = c
    line = "".join(pieces) + raw[last:]
    assert ANSI.sub("", line) == raw
    assert Matcher(book).match_rule(rule, text) is not None
    buf = bytearray(line.encode() + b"\n")
    assert quiet_prefilter.find(buf, len(buf), quiet=True), line


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
