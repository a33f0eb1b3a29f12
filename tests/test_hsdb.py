"""The Hyperscan databases (ingest/hsdb.py): the shorter literal set, the literals searched
for by their heads, the quiet search's expressions, and the databases kept beside the bytecode
find exactly the lines that hold a trigger literal (or, quietly, that a rule may match)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.matcher import Matcher
from slurmdoc.ingest import hsdb
from slurmdoc.ingest import prefilter as prefilter_mod
from slurmdoc.ingest.prefilter import Prefilter


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
def test_the_compiled_prefilter_is_kept_like_bytecode(tmp_path, monkeypatch, keywords):
    """The Hyperscan database of a literal set is kept beside the bytecode and loaded by the
    next prefilter of the same set (no compiling, same offsets); another set, a damaged file
    or PYTHONDONTWRITEBYTECODE only mean compiling."""
    cs, ci = keywords
    monkeypatch.setattr(hsdb, "HS_CACHE", tmp_path / "__pycache__" / "prefilter.hsdb")
    monkeypatch.setattr(hsdb.sys, "dont_write_bytecode", False)
    compiled = []
    real = hsdb._hs.Database
    monkeypatch.setattr(hsdb._hs, "Database", lambda **kw: compiled.append(1) or real(**kw))
    buf = bytearray(b"ok\n1: torch.OutOfMemoryError: CUDA out of memory\nnothing\n[rank3]: Traceback (most recent call last):\n")
    want = Prefilter(cs, ci, engine="hyperscan").find(buf, len(buf))
    assert len(want) >= 2 and compiled == [1] and hsdb.HS_CACHE.is_file()
    again = Prefilter(cs, ci, engine="hyperscan")
    assert compiled == [1] and again.find(buf, len(buf)) == want
    again._parts = 2
    assert again._find_parallel(buf, len(buf)) == want  # the loaded database's extra scratch works
    assert Prefilter(["nothing"], [], engine="hyperscan").find(buf, len(buf)) and compiled == [1, 1]
    for junk in (b"", b"\x00" * 40, hsdb.HS_CACHE.read_bytes()[:-7]):
        hsdb.HS_CACHE.write_bytes(junk)
        assert Prefilter(cs, ci, engine="hyperscan").find(buf, len(buf)) == want
    assert len(compiled) == 5
    monkeypatch.setattr(hsdb.sys, "dont_write_bytecode", True)
    hsdb.HS_CACHE.unlink()
    Prefilter(cs, ci, engine="hyperscan")
    assert not hsdb.HS_CACHE.exists()


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
    kept = hsdb.covering(words)
    assert set(kept) <= set(words) and len(kept) <= len(set(words))
    text = b"".join(pieces)
    buf = bytearray(text)
    want = _lines_holding(words, text)
    assert _lines_holding(kept, text) == want
    cs = [w.decode() for w, ci in words if not ci]
    ci = [w.decode() for w, ci in words if ci]
    for engine in ["re", "re2"] + (["hyperscan"] if hsdb._hs is not None else []):
        p = Prefilter(cs, ci, engine=engine)
        assert sorted({text.count(b"\n", 0, o) for o in p.find(buf, len(buf))}) == want, engine


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
@given(st.lists(st.tuples(_WORD, st.booleans()), min_size=1, max_size=12), st.lists(st.sampled_from(
    [b"a", b"A", b"b", b"B", b":", b" ", b"-", b"\n", b"ab", b"AB", b"a:b", b"Ab -"]), max_size=60),
    st.integers(1, 4), st.floats(0, 1))
@example(words=[(b"ab", False)], pieces=[b"ab"], head=1, at=0.5)  # a head at the very end
@example(words=[(b"A:A", True)], pieces=[b"a", b":", b"a"], head=1, at=1.0)  # a long literal: heads compiled = heads checked
def test_a_literal_searched_for_by_its_head_is_found_only_whole(words, pieces, head, at):
    """Hyperscan searches for a long literal by its first HS_HEAD bytes and the rest is checked
    after: with any head length, any literals and any text, the lines found are exactly those
    holding a whole literal (a head alone is no hit, nor a head at the end of the bytes searched: a reused block
    holds an earlier block's bytes past its end)."""
    real = hsdb.HS_HEAD
    for mod in (hsdb, prefilter_mod):  # the heads compiled, and the prefilter's check of the rest
        mod.HS_HEAD = head
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
        for mod in (hsdb, prefilter_mod):
            mod.HS_HEAD = real


def test_the_rule_pack_s_literals_that_hold_another_are_left_out(keywords):
    """On the bundled pack: many literals hold a shorter one (`OutOfMemoryError` and `Error`);
    each one left out holds one kept, case for case."""
    cs, ci = keywords
    words = [(w.encode(), False) for w in cs] + [(w.encode(), True) for w in ci]
    kept = hsdb.covering(words)
    assert len(kept) < 0.9 * len(set(words))
    for w, c in set(words) - set(kept):
        assert any((k.lower() in w.lower()) if kc else (not c and k in w) for k, kc in kept), w


@pytest.mark.skipif(hsdb._hs is None, reason="the quiet search is Hyperscan's")
def test_the_quiet_search_is_kept_like_bytecode_and_keyed_by_what_it_is_made_of(tmp_path, monkeypatch, keywords):
    """Guards cost tens of ms and their database over a hundred to compile: both are kept
    beside the bytecode, loaded while what they are made of is the same, made again when it
    changes or the file is damaged."""
    from slurmdoc.engine.superset import line_guards

    cs, ci = keywords
    monkeypatch.setattr(hsdb, "HS_CACHE", tmp_path / "__pycache__" / "prefilter.hsdb")
    monkeypatch.setattr(hsdb.sys, "dont_write_bytecode", False)
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
    path = hsdb._hs_path(True)
    for junk in (b"", path.read_bytes()[:-9]):
        path.write_bytes(junk)
        p = Prefilter(cs, ci, engine="hyperscan", guards=make, guards_key=lambda: b"pack-2")
        assert p.can_quiet and p.find(buf, len(buf), quiet=True) == want
    assert made == [1, 1, 1, 1]


_SGR = st.sampled_from(["\x1b[0m", "\x1b[1;31m", "\x1b[38;5;208m", "\x1b[?25l", "\x1b[K", "\x1bM"])  # what the paste repair takes off (damage.ANSI)


@pytest.mark.skipif(hsdb._hs is None, reason="the quiet search is Hyperscan's")
@given(data=st.data())
def test_a_keyword_split_by_colour_codes_between_its_words_is_found(data, keywords):
    """Any keyword of the pack, with escape sequences put in at any places that are not inside
    a word, behind and before any text: its expression finds it."""
    cs, ci = keywords
    word, ignore = data.draw(st.sampled_from([(w, False) for w in cs] + [(w, True) for w in ci]))
    raw = word.encode()
    cuts = [i for i in range(1, len(raw)) if not (hsdb._word_byte(raw[i - 1]) and hsdb._word_byte(raw[i]))]
    chosen = data.draw(st.lists(st.sampled_from(cuts), unique=True)) if cuts else []
    pieces, last = [], 0
    for c in sorted(chosen):
        pieces += [raw[last:c], data.draw(_SGR).encode()]
        last = c
    pieces.append(raw[last:])
    line = b"\x1b[32mhead\x1b[0m " + b"".join(pieces) + b" tail"
    if ignore:
        line = line.upper()
    db = hsdb._hs_compile([], ["(?i)" + hsdb._tolerant(raw) if ignore else hsdb._tolerant(raw)])
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


@pytest.mark.skipif(hsdb._hs is None, reason="the quiet search is Hyperscan's")
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_rule_s_line_with_escape_sequences_outside_its_keywords_is_found_quietly(data, quiet_prefilter, book):
    """Any single-line match example of any rule, behind a prefix, with escape sequences put in
    where they split no word (between the words of a keyword too, or at its punctuation; a
    keyword guarded or not): the reader takes them off and the rule matches, so the quiet
    search must find the line."""
    from slurmdoc.api import ANSI

    rule = data.draw(st.sampled_from([r for r in book.rules if any("\n" not in (e if isinstance(e, str) else e.text) for e in r.spec.examples.match)]))
    text = data.draw(st.sampled_from([t for t in (e if isinstance(e, str) else e.text for e in rule.spec.examples.match) if "\n" not in t]))
    raw = "[rank3]: " + text

    def word(c: str) -> bool:  # as a colour code sees it (hsdb._word_byte, on characters)
        return c.isalnum() or c == "_" or ord(c) >= 128

    cuts = [i for i in range(1, len(raw)) if not (word(raw[i - 1]) and word(raw[i]))]
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


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
def test_a_pack_of_many_guarded_keywords_keeps_its_coloured_line_search():
    """The quiet search's expression for guarded keywords on a coloured line is an alternation
    of all of them; past Hyperscan's length limit (about 16,000 characters) the whole quiet
    search used to be refused. Split into alternations of bounded length, it compiles for any
    number of keywords and still finds each one on a line holding an escape byte, and only there."""
    words = [(f"keyword number {i:04d} of a big pack".encode(), False) for i in range(900)]
    marks = {(b"\x1b[0m", False)}
    exprs = hsdb._split_marked(words + sorted(marks), marks, set(words))
    assert sum(len(e) for e in exprs) > 20000 and all(len(e) < 16000 for e in exprs)
    db = hsdb._hs_compile([], exprs)
    for i in (0, 449, 899):
        for line, want in ((f"\x1b[31mkeyword number {i:04d} of a big pack\x1b[0m", True),
                           (f"plain keyword number {i:04d} of a big pack", False)):
            hits = []
            db.scan(line.encode(), match_event_handler=lambda *a: hits.append(a) or None)
            assert bool(hits) == want, (i, line)
    assert hsdb._alternations(["a" * 7000, "b", "c"]) == ["a" * 7000, "b|c"]
