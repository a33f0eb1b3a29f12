"""A line superset must say "may match" of every line its pattern matches: after the line's
prefix is taken off, in `regex`'s Unicode semantics, under ignore-case. It may say it of more."""

from __future__ import annotations

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurmdoc.api import load_rulebook
from slurmdoc.engine.superset import FOLDED_LETTERS, line_guards, line_superset, starts

hs = pytest.importorskip("hyperscan")

FLAGS = regex.MULTILINE | regex.VERSION0  # as the loader compiles rule patterns


def compiled(expression: str):
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=[expression.encode()], ids=[0], elements=1, flags=[hs.HS_FLAG_PREFILTER | hs.HS_FLAG_ALLOWEMPTY])
    return db


def says_may_match(db, line: bytes) -> bool:
    """As the reader asks: the line in a block, its newline after it (a match that ends a short
    block is what Hyperscan's engine for short blocks may miss; the reader pads those)."""
    found: list[int] = []
    db.scan(line + b"\n", match_event_handler=lambda *a: found.append(1))
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


CLASS_ESCAPES = [r"\s", r"\S", r"\d", r"\D", r"\w", r"\W"]


@pytest.mark.parametrize("ci", [False, True])
@pytest.mark.parametrize(
    "pattern",
    CLASS_ESCAPES + [f"[{e}]" for e in CLASS_ESCAPES] + [f"[^{e}]" for e in CLASS_ESCAPES] + [r"[^\d\s]", r"[^\w\s]", r"[\S-]"],
)
def test_class_escapes_hold_every_ascii_character_regex_puts_in_them(pattern, ci):
    """Each class escape, alone, in a class and in a negated class: every ASCII character that
    `regex` (the rules' engine, not Python's `re`) puts in it is let through. Python's \\s holds
    the separators \\x1c-\\x1f and `regex`'s does not, so `regex`'s \\S and [^\\s] hold them."""
    db = compiled(line_superset(pattern, ci).expression)
    holds(pattern, ci, "\n".join(chr(c) for c in range(128) if c != 10), "", db)


def _largest_count(expression: str) -> int:
    """The largest number of times the expression writes one piece: counts of nested repeats
    multiplied (an open repeat counts its minimum)."""
    from slurmdoc.engine.loader import _sre, _sre_parse

    def walk(items) -> int:
        most = 1
        for op, av in items:
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                lo, hi, sub = av
                most = max(most, (lo if hi == _sre.MAXREPEAT else hi) * walk(sub))
            elif op is _sre.SUBPATTERN:
                most = max(most, walk(av[3]))
            elif op is _sre.BRANCH:
                most = max([most] + [walk(b) for b in av[1]])
        return most

    return walk(_sre_parse.parse(expression))


def _optional_pieces(expression: str) -> int:
    """How many optional pieces the expression's bounded repeats write in all (maximum less
    minimum, times the enclosing counts), leaving out the 1-4 bytes of a non-ASCII character."""
    from slurmdoc.engine.loader import _sre, _sre_parse

    byte_run = list(_sre_parse.parse(r"[\x80-\xff]{1,4}"))[0]

    def walk(items, mult: int) -> int:
        n = 0
        for op, av in items:
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                if (op, av[0], av[1], list(av[2])) == (byte_run[0], byte_run[1][0], byte_run[1][1], list(byte_run[1][2])):
                    continue
                lo, hi, sub = av
                if hi != _sre.MAXREPEAT:
                    n += (hi - lo) * mult
                n += walk(sub, mult * (lo if hi == _sre.MAXREPEAT else hi) or mult)
            elif op is _sre.SUBPATTERN:
                n += walk(av[3], mult)
            elif op is _sre.BRANCH:
                n += sum(walk(b, mult) for b in av[1])
        return n

    return walk(_sre_parse.parse(expression), 1)


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"x\w{1,10000}y", "x" + "a" * 9000 + "y"),
        (r"x\d{5000}z", "x" + "7" * 5000 + "z"),
        (r"(?:(?:ab){1,100}){1,100}c", "ab" * 3000 + "c"),
        (r"(?:a{2,90}){2,90}b", "a" * 500 + "b"),
        (r"y[^z]{300,}z", "y" + "é" * 400 + "z"),
        (r"(?i)k\S{70}s", "K" + "\x1c" * 70 + "\u017f"),
        ("x" + r"[^,]{1,64}," * 20 + "y", "x" + "ab," * 20 + "y"),
    ],
)
def test_big_counts_are_written_small_and_still_let_their_lines_through(pattern, line):
    """A counted repeat of thousands (a user's rule may hold one: the loader bounds its weight
    by what `regex` compiles quickly) took Hyperscan seconds to minutes to compile (29 s for
    \\w{1,10000}). The superset counts at most MAX_COUNT of anything, nested counts multiplied,
    and still says "may match" of the lines the pattern matches; so many bounded repeats that
    their optional pieces add up past MAX_SPAN (20 of [^,]{1,64}: 2.4 s) lose their maximum."""
    from slurmdoc.engine.superset import MAX_COUNT, MAX_SPAN

    sup = line_superset(pattern, False)
    assert _largest_count(sup.expression) <= 4 * MAX_COUNT  # (a non-ASCII character is 1-4 bytes)
    assert _optional_pieces(sup.expression) <= MAX_SPAN
    assert regex.search(pattern, line, FLAGS)
    holds(pattern, False, line, "[rank3]: ", compiled(sup.expression))


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
    """A keyword is guarded when each rule owning it can be judged on one line: a line rule or
    an `any` rule by its patterns' supersets, a traceback rule by the supersets of the lines a
    traceback begins at, an `any` rule whose pattern may match a newline by both (a match
    across lines lies in a traceback event; every owner's expressions are asked); a keyword of
    a rule with a pattern that has no superset stays a plain literal."""
    guards = line_guards(BOOK.rules)
    by_id = {r.id: r for r in BOOK.rules}
    owners: dict = {}
    for r in BOOK.rules:
        for k in r.keywords:
            owners.setdefault((k, bool(r.spec.ignore_case)), []).append(r)
    assert guards, "the pack has keywords of line-by-line rules"
    begins = set(starts())
    for key, exprs in guards.items():
        for r in owners[key]:
            if r.spec.scope == "traceback":
                assert begins <= set(exprs)  # where its events can begin
                continue
            sups = [line_superset(p.pattern, r.spec.ignore_case) for p in r.patterns]
            assert all(s is not None for s in sups)
            if r.spec.scope != "line" and any(s.spans_lines for s in sups):
                assert begins <= set(exprs)  # the traceback events it may match across lines in
            assert {s.expression for s in sups} <= set(exprs)  # every owner's patterns are asked
    assert ("Error", False) in guards and ("Traceback", False) in guards
    assert by_id["python-exception"].spec.scope == "traceback"
    unguarded = [key for key, rs in owners.items() if key not in guards]
    assert unguarded and all(any(r.spec.scope != "traceback" for r in owners[k]) for k in unguarded)
    for k in unguarded:  # a plain literal because some owner's pattern has no superset
        assert any(line_superset(p.pattern, r.spec.ignore_case) is None for r in owners[k] for p in r.patterns)


@settings(max_examples=400)
@given(st.data(), PREFIXES)
def test_a_line_a_traceback_begins_at_is_one_its_starts_may_match(data, prefix):
    """Every line the assembler begins a traceback event at (a header, a frame, an exception
    line alone, a summary's head), behind a prefix, is a line the starts' supersets match."""
    from slurmdoc.ingest.assemble import STARTS

    i = data.draw(st.integers(0, len(STARTS) - 1))
    text = data.draw(st.from_regex(STARTS[i], fullmatch=True).filter(lambda t: "\n" not in t))
    assert STARTS[i].match(text)
    db = compiled(starts()[i])
    assert says_may_match(db, (prefix + text).encode("utf-8", "surrogatepass"))


def test_starts_leave_out_metrics_named_error():
    # what a quiet search of a log printing `Error` in its metrics gains: such a line begins
    # no traceback, and a line that does is still found
    dbs = [compiled(e) for e in starts()]
    for line in ("[rank3]: step 40 | Top-1 Error: 23.4 | lr 1e-4", "2: epoch 3 Error rate 0.12", "WER (Word Error Rate) 7.1"):
        assert not any(says_may_match(db, line.encode()) for db in dbs), line
    for line in ("[rank3]: torch.OutOfMemoryError: CUDA out of memory", "3:   File \"/srv/t.py\", line 9, in f",
                 "[rank1]: Traceback (most recent call last):", "Root Cause (first observed failure):"):
        assert any(says_may_match(db, line.encode()) for db in dbs), line


def test_a_pattern_python_warns_about_gets_its_superset_quietly():
    """`[[` makes Python's parser warn of a nested set (the loader already said so, once, when
    it read the rule): writing the superset adds no second warning on stderr."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sup = line_superset(r"token [[z]q]")
    assert sup is not None and says_may_match(compiled(sup.expression), b"3: token [q]")
