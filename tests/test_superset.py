"""A line superset must say "may match" of every line its pattern matches: after the line's
prefix is taken off, in `regex`'s Unicode semantics, under ignore-case. It may say it of more."""

from __future__ import annotations

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurmdoc.api import load_rulebook
from slurmdoc.engine.superset import FOLDED_LETTERS, line_guards, line_superset

hs = pytest.importorskip("hyperscan")

FLAGS = regex.MULTILINE | regex.VERSION0  # as the loader compiles rule patterns


def compiled(expression: str):
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=[expression.encode()], ids=[0], elements=1, flags=[hs.HS_FLAG_PREFILTER | hs.HS_FLAG_ALLOWEMPTY])
    return db


def says_may_match(db, line: bytes) -> bool:
    found: list[int] = []
    db.scan(line, match_event_handler=lambda *a: found.append(1))
    return bool(found)


def holds(pattern: str, ignore_case: bool, text: str, prefix: str, db) -> None:
    """Each line of `text` the pattern matches in is said "may match", with its prefix."""
    rx = regex.compile(pattern, FLAGS | (regex.IGNORECASE if ignore_case else 0))
    for line in text.split("\n"):
        if rx.search(line):
            raw = (prefix + line).encode("utf-8", "surrogatepass")
            assert says_may_match(db, raw), (pattern, prefix + line)


BOOK = load_rulebook()
CASES = [
    (r.id, p.pattern, r.spec.ignore_case, ex if isinstance(ex, str) else ex.text)
    for r in BOOK.rules
    for p in r.patterns
    for ex in r.spec.examples.match
    if line_superset(p.pattern, r.spec.ignore_case) is not None
]
_DBS: dict = {}


def db_of(pattern: str, ignore_case: bool):
    key = (pattern, ignore_case)
    if key not in _DBS:
        _DBS[key] = compiled(line_superset(pattern, ignore_case).expression)
    return _DBS[key]


PREFIXES = st.sampled_from(["", "3: ", "[rank12]: ", "[default0]:", "0: [rank0]: ", "2026-11-27 03:00:00 ", "node-1 ", "x"])
ODD = "éſKkıİ٣\u00a0█\ufffd\t_-:=Ω"  # letters that fold, non-ASCII digits and spaces, a replacement char


@st.composite
def mutated(draw, text: str) -> str:
    """The text with characters changed in case, and others put in here and there."""
    chars = list(text)
    for _ in range(draw(st.integers(0, 4))):
        if chars:
            i = draw(st.integers(0, len(chars) - 1))
            chars[i] = chars[i].swapcase() if draw(st.booleans()) else chars[i]
        i = draw(st.integers(0, len(chars)))
        chars.insert(i, draw(st.sampled_from(ODD)))
    return "".join(chars)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_every_line_a_bundled_pattern_matches_is_said_to_maybe_match(data):
    """The rule pack's patterns on their own examples, changed (case, odd characters put in)
    and behind the prefixes real logs have: wherever `regex` matches, the superset does."""
    _id, pattern, ci, ex = data.draw(st.sampled_from(CASES))
    text = data.draw(st.one_of(st.just(ex), mutated(ex)))
    holds(pattern, ci, text, data.draw(PREFIXES), db_of(pattern, ci))


def test_each_bundled_example_is_said_to_maybe_match_as_it_is():
    """Every case, not a sample: each match example of each pattern that has a superset."""
    for _id, pattern, ci, ex in CASES:
        holds(pattern, ci, ex, "7: ", db_of(pattern, ci))


# patterns over a small alphabet, one per construct the writer handles, tried on short texts
# of the same alphabet: matches are frequent, so the property is tested where it bites
CONSTRUCTS = [
    r"^ab$", r"\bab\b", r"(?<!a)b(?=a)", r"a.b", r"a[^b]b", r"[a-c]{2,3}", r"\w+\s\d", r"\W\S\D",
    r"(?i)ak", r"(?i:s)b", r"a(?i)K", r"(a|bb)\1", r"(?:ab)*b", r"a?b+?", r"(?s)a.b", r"é{2}",
    r"(?i)é", r"[é-ü]a", r"[^é]", r"(?P<x>a)(?(x)b|c)", r"a{0,3}b{2}", r"(?>ab)b", r"a++b",
    r"\d{2}", r"[\w-]+:", r"\s+$", r"^\s*\*{3,}\s*", r"ſk", r"[ſé]a", r"(?:ab|)b", r"[^ſ]",
]
ALPHABET = "ab kK sSſ1٣é\u00a0\t*-:ıİ\n"


@pytest.mark.parametrize("pattern", CONSTRUCTS)
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=12), ci=st.booleans(), prefix=PREFIXES)
@example(text="ſ", ci=True, prefix="")
@example(text="ab", ci=False, prefix="x")
@example(text="K", ci=True, prefix="")  # `(?i)[^ſ]` lets K through: a folded letter kept out of a negated class
def test_each_construct_is_widened_never_narrowed(pattern, text, ci, prefix):
    sup = line_superset(pattern, ci)
    if sup is None:
        pytest.skip("no superset for this construct")
    holds(pattern, ci, text, prefix, compiled(sup.expression))


def test_the_letters_that_non_ascii_characters_fold_to_are_all_known():
    """Under ignore-case `regex` lets a few non-ASCII characters match ASCII letters (the
    long s, the Kelvin sign, the Turkish i's); the superset widens exactly those letters."""
    letters = {c for c in "abcdefghijklmnopqrstuvwxyz"}
    found = set()
    rx = {c: regex.compile(c, regex.IGNORECASE | regex.VERSION0) for c in letters}
    for cp in range(0x80, 0x10000):
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000:
            continue
        for c, r in rx.items():
            if r.fullmatch(ch):
                found.add(c)
    assert found <= FOLDED_LETTERS and found, found


def test_what_gets_no_superset():
    assert line_superset(r"[[:digit:]]+") is None  # a POSIX class: Python's parser reads it otherwise
    assert line_superset(r"(?:oom){e<=1}") is None  # a fuzzy match
    assert line_superset(r"(?:x)?") is None  # matches an empty string: "may match" everywhere
    assert line_superset(r"^$") is None
    assert line_superset(r"a\nb") is None  # a newline: no line holds it
    assert line_superset(r"(") is None


def test_zero_width_tests_and_optional_ends_are_dropped():
    """What a prefix or the rest of the line may defeat is not asked; a trailing `.*` would
    report every byte after the match, so it is cut."""
    sup = line_superset(r"^\s*(?<!x)Error\b(?=:).*$")
    db = compiled(sup.expression)
    assert says_may_match(db, b"12: xError: boom")  # prefix, lookbehind, boundary all waived
    ends: list[int] = []
    db.scan(b"Error: " + b"y" * 50, match_event_handler=lambda i, f, to, fl, c: ends.append(to))
    assert ends == [5]


def test_a_superset_knows_whether_its_pattern_can_reach_past_a_line():
    assert not line_superset(r"worker group finished").spans_lines
    assert line_superset(r"worker\s+group").spans_lines  # \s holds the newline
    assert line_superset(r"a[^b]c").spans_lines
    assert line_superset(r"(?s)a.c").spans_lines
    assert not line_superset(r"a.c").spans_lines
    assert not line_superset(r"a[^b\n]c").spans_lines


def test_line_guards_cover_only_rules_judged_line_by_line():
    guards = line_guards(BOOK.rules)
    by_id = {r.id: r for r in BOOK.rules}
    owners: dict = {}
    for r in BOOK.rules:
        for k in r.keywords:
            owners.setdefault((k, bool(r.spec.ignore_case)), []).append(r)
    assert guards, "the pack has keywords of line-by-line rules"
    for key, exprs in guards.items():
        for r in owners[key]:
            assert r.spec.scope != "traceback"  # tracebacks' words also shape events
            sups = [line_superset(p.pattern, r.spec.ignore_case) for p in r.patterns]
            assert all(s is not None for s in sups)
            assert r.spec.scope == "line" or not any(s.spans_lines for s in sups)
            assert {s.expression for s in sups} <= set(exprs)  # every owner's patterns are asked
    unguarded = [key for key, rs in owners.items() if key not in guards]
    assert ("Traceback", False) in unguarded and ("File \"", False) in unguarded
    assert by_id["python-exception"].spec.scope == "traceback"
