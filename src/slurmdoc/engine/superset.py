"""A rule pattern's line superset: a Hyperscan expression over raw bytes that matches every
line on which the pattern can match, and some more.

The reader's prefilter finds a rule's keywords; a keyword that is on almost every line of a
log (a progress bar that says `Training`) makes it parse the whole log, at microseconds a
line. For such a log the reader asks a sharper question of the raw block: could any rule
owning the keyword match this line? The answer must never be "no" for a line the rule
matches once the line is parsed: its prefix taken off, its time stamp read, `regex`'s
Unicode semantics applied. So the expression is made wider than the pattern, never narrower:

- anchors, word boundaries and lookarounds are dropped (a prefix moves `^`; dropping a
  zero-width test only lets more through);
- every character class is written over bytes: its ASCII members (as `regex` reads them, both
  cases under ignore-case) and, when it can hold any non-ASCII character, any UTF-8 sequence
  of one to four bytes, so counted repeats still count characters;
- a back-reference becomes "anything on the line";
- a counted repeat past MAX_COUNT (nested counts multiplied) counts less: its minimum
  lowered, its maximum dropped, as is any maximum past MAX_SPAN optional pieces in all
  (Hyperscan's compile time grows fast with big counts);
- a leading or trailing optional part, and a trailing repeat beyond its minimum, are cut
  (Hyperscan reports every end of a match: `foo.*` would report each byte after `foo`).

Newline is in no class: a match of the expression lies within one raw line. A pattern that
can match a newline (`\\s`, `[^x]`, `(?s).`) is `spans_lines`: the caller decides whether a
rule holding one may be judged line by line (a `line`-scope rule's events are single lines).

Patterns in syntax that Python's parser reads otherwise than `regex` does get no superset.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Optional

import regex

from slurmdoc.engine.loader import NOT_RE_SYNTAX, _sre, _sre_parse

_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))  # (possessive: 3.11)
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)

# ASCII letters that a non-ASCII character matches under ignore-case in `regex` (U+017F
# long s, U+212A Kelvin sign, U+0130 and U+0131 dotted and dotless i); a test checks the list
# against every character of the Basic Multilingual Plane
FOLDED_LETTERS = frozenset("iks")

_FOLDED = frozenset(ord(c) for c in FOLDED_LETTERS) | frozenset(ord(c.upper()) for c in FOLDED_LETTERS)


def _ascii_members(escape: str) -> frozenset[int]:
    """The ASCII characters in a class escape as `regex` (the rules' engine) reads it: exact,
    since a negated escape or class is written from its complement. (Python's own \\s also
    holds \\x1c-\\x1f, `regex`'s does not: a wider \\s made \\S and [^\\s] narrower.)"""
    rx = regex.compile(escape, regex.VERSION0)
    return frozenset(c for c in range(128) if rx.match(chr(c)))


_WORD = _ascii_members(r"\w")
_DIGIT = _ascii_members(r"\d")
_SPACE = _ascii_members(r"\s")
_CATEGORIES = {
    _sre.CATEGORY_DIGIT: (_DIGIT, False),
    _sre.CATEGORY_NOT_DIGIT: (_DIGIT, True),
    _sre.CATEGORY_WORD: (_WORD, False),
    _sre.CATEGORY_NOT_WORD: (_WORD, True),
    _sre.CATEGORY_SPACE: (_SPACE, False),
    _sre.CATEGORY_NOT_SPACE: (_SPACE, True),
}
_ALL = frozenset(range(128))
# the largest count written, counts of nested repeats multiplied (the bundled pack's largest is
# 40); past it a repeat is widened
MAX_COUNT = 64
# the most optional pieces the bounded repeats of one expression write, counted as above (the
# bundled pack's most is 43); past it a repeat's maximum is dropped
MAX_SPAN = 256
_MULTI = r"[\x80-\xff]{1,4}"  # one non-ASCII character, or a byte that is no UTF-8


def _ranges(members: set[int]) -> str:
    """A byte class's body: its members as runs (`\\x30-\\x39`)."""
    out = []
    run: list[int] = []
    for c in sorted(members):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(_run(run))
        run = [c]
    if run:
        out.append(_run(run))
    return "".join(out)


def _run(run: list[int]) -> str:
    if len(run) <= 2:
        return "".join(f"\\x{c:02x}" for c in run)
    return f"\\x{run[0]:02x}-\\x{run[-1]:02x}"


class Unsupported(Exception):
    """No superset can be written for the pattern."""


@dataclass(frozen=True)
class Superset:
    expression: str  # for Hyperscan, byte mode, no flags (both cases are written out)
    spans_lines: bool  # the pattern can match a newline


def line_superset(pattern: str, ignore_case: bool = False) -> Optional[Superset]:
    """The pattern's line superset, or None when none can be written (syntax Python's parser
    does not read as `regex` does, an expression that matches an empty string)."""
    if NOT_RE_SYNTAX.search(pattern):
        return None
    try:
        with warnings.catch_warnings():  # (`[[`: the loader has said so once already)
            warnings.simplefilter("ignore")
            tree = _sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except Exception:  # noqa: BLE001 - syntax only `regex` reads
        return None
    w = _Writer(bool(tree.state.flags & re.IGNORECASE), bool(tree.state.flags & re.DOTALL))
    try:
        items = w.trim(list(tree.data))
        expr = w.seq(items)
    except (Unsupported, RecursionError):
        return None
    if not expr or w.min_len(items) == 0:
        return None  # it would say "may match" of every line
    return Superset(expr, w.spans)


@dataclass
class _Items:
    """A trimmed run of parsed items where the writer reads a parser's subpattern (`.data`)."""

    data: list


class _Writer:
    def __init__(self, ci: bool, dotall: bool) -> None:
        self.ci = ci
        self.dotall = dotall
        self.spans = False
        self.mult = 1  # how many times the enclosing counted repeats write what is written now
        self.span_left = MAX_SPAN  # optional pieces bounded repeats may still write

    # ---- characters -------------------------------------------------------------
    def _one(self, members: set[int], non_ascii: bool) -> str:
        """One character: an ASCII one of `members`, or (non_ascii) any other."""
        if 10 in members:
            self.spans = True
        members = set(members) - {10}
        if self.ci:
            for c in list(members):
                ch = chr(c)
                members |= {ord(ch.lower()), ord(ch.upper())} & _ALL
                if ch.lower() in FOLDED_LETTERS:
                    non_ascii = True
        cls = _ranges(members)
        if not members and not non_ascii:
            raise Unsupported("a class no line character is in")
        if not non_ascii:
            return f"[{cls}]"
        if not members:
            return f"(?:{_MULTI})"
        return f"(?:[{cls}]|{_MULTI})"

    def _literal(self, c: int) -> str:
        if c >= 128:
            if self.ci:  # it may fold to an ASCII letter (the long s matches `s`): those, or any non-ASCII
                return self._one(set(_FOLDED), True)
            return "".join(f"\\x{b:02x}" for b in chr(c).encode("utf-8", "surrogatepass"))
        if c == 10:
            self.spans = True
            raise Unsupported("a newline")
        return self._one({c}, False)

    def _in(self, items: list) -> str:
        negate = False
        members: set[int] = set()
        non_ascii = False
        for op, av in items:
            if op is _sre.NEGATE:
                negate = True
            elif op is _sre.LITERAL:
                if av < 128:
                    members.add(av)
                else:
                    non_ascii = True
            elif op is _sre.RANGE:
                lo, hi = av
                members |= set(range(lo, min(hi, 127) + 1))
                if hi >= 128:
                    non_ascii = True
            elif op is _sre.CATEGORY:
                chars, inverted = _CATEGORIES[av]
                members |= (_ALL - chars) if inverted else chars
                non_ascii = True  # each category has non-ASCII members
            else:
                raise Unsupported(f"class item {op}")
        if self.ci:
            for c in list(members):
                members |= {ord(chr(c).lower()), ord(chr(c).upper())} & _ALL
            if non_ascii and not negate:  # a non-ASCII member may fold to an ASCII letter (left out of a negated class, it is let through)
                members |= _FOLDED
        if negate:
            return self._one(set(_ALL - members), True)
        return self._one(members, non_ascii)

    # ---- structure ------------------------------------------------------------------
    def seq(self, items: list) -> str:
        return "".join(self.node(op, av) for op, av in items)

    def node(self, op, av) -> str:
        if op is _sre.LITERAL:
            return self._literal(av)
        if op is _sre.NOT_LITERAL:
            return self._in([(_sre.NEGATE, None), (_sre.LITERAL, av)])
        if op is _sre.ANY:
            return self._one(set(_ALL) if self.dotall else set(_ALL - {10}), True)
        if op is _sre.IN:
            return self._in(av)
        if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
            return ""  # zero-width: dropped, a wider expression
        if op is _sre.BRANCH:
            alts = [self.seq(list(b.data)) for b in av[1]]
            return "(?:" + "|".join(alts) + ")"
        if op is _sre.SUBPATTERN:
            _gid, add, dele, p = av
            ci, dotall = self.ci, self.dotall
            if add & re.IGNORECASE:
                self.ci = True
            if dele & re.IGNORECASE:
                self.ci = False
            if add & re.DOTALL:
                self.dotall = True
            if dele & re.DOTALL:
                self.dotall = False
            try:
                return "(?:" + self.seq(list(p.data)) + ")"
            finally:
                self.ci, self.dotall = ci, dotall
        if op is _ATOMIC:
            return "(?:" + self.seq(list(av.data)) + ")"
        if op in _REPEATS:
            lo, hi, p = av
            # counts beyond what MAX_COUNT leaves (nested counts multiply) are widened: the
            # minimum lowered, the maximum dropped; Hyperscan takes seconds to minutes for a
            # counted repeat of thousands (`\\w{1,10000}`: 29 s) that `regex` compiles at once
            room = MAX_COUNT // self.mult
            if lo > room:
                lo = room
            if hi != _sre.MAXREPEAT and (hi > room or (hi - lo) * self.mult > self.span_left):
                hi = _sre.MAXREPEAT  # (and so past MAX_SPAN optional pieces in all: 20 of `[^,]{1,64}` took 2.4 s)
            elif hi != _sre.MAXREPEAT:
                self.span_left -= (hi - lo) * self.mult
            mult = self.mult
            self.mult = mult * max(lo, 1 if hi == _sre.MAXREPEAT else hi)
            try:
                inner = self.seq(list(p.data))
            finally:
                self.mult = mult
            if not inner:
                return ""
            top = "" if hi == _sre.MAXREPEAT else str(hi)
            if lo == 0 and hi == _sre.MAXREPEAT:
                return f"(?:{inner})*"
            return f"(?:{inner}){{{lo},{top}}}"
        if op is _sre.GROUPREF:
            return "(?:[^\\n]*)"  # what the group held: any run on the line
        if op is _sre.GROUPREF_EXISTS:
            _cond, yes, no = av
            return "(?:" + self.seq(list(yes.data)) + "|" + (self.seq(list(no.data)) if no is not None else "") + ")"
        raise Unsupported(f"{op}")

    def min_len(self, items: list) -> int:
        """The fewest characters a match of the items holds (0: it can match empty)."""
        n = 0
        for op, av in items:
            if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
                n += 1
            elif op is _sre.BRANCH:
                n += min(self.min_len(list(b.data)) for b in av[1])
            elif op is _sre.SUBPATTERN:
                n += self.min_len(list(av[3].data))
            elif op is _ATOMIC:
                n += self.min_len(list(av.data))
            elif op in _REPEATS:
                n += av[0] * self.min_len(list(av[2].data))
            elif op is _sre.GROUPREF_EXISTS:
                n += min(self.min_len(list(av[1].data)), self.min_len(list(av[2].data)) if av[2] is not None else 0)
        return n

    def trim(self, items: list) -> list:
        """The items without their optional ends (zero-width ones too), and a trailing or leading
        repeat cut to its minimum, also inside a group or each alternative at an end (`a(?P<x>b.*)`
        ends at `b`): a line that matches the items holds a match of these. Only an end is
        trimmed, on its own side: `x(a?b)` is not `xb`."""
        return self._trim(self._trim(list(items), -1), 0)

    def _trim(self, items: list, at: int) -> list:
        """`items` with their end on one side (-1: the last, 0: the first) trimmed."""
        items = list(items)
        while items and self._optional(items[at]):
            items.pop(at)
        if not items:
            return items
        op, av = items[at]
        if op in _REPEATS:
            lo, _hi, p = av
            items[at] = (_sre.MAX_REPEAT, (lo, lo, p))
        elif op is _sre.SUBPATTERN:
            gid, add, dele, p = av
            items[at] = (op, (gid, add, dele, _Items(self._trim(list(p.data), at))))
        elif op is _ATOMIC:
            items[at] = (op, _Items(self._trim(list(av.data), at)))
        elif op is _sre.BRANCH:
            items[at] = (op, (av[0], [_Items(self._trim(list(b.data), at)) for b in av[1]]))
        return items

    def _optional(self, item) -> bool:
        op, av = item
        if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
            return True
        return self.min_len([item]) == 0


def starts() -> Optional[tuple[str, ...]]:
    """The line supersets of the lines the assembler begins a traceback event at (a header, a
    frame, an exception line standing alone, a launcher summary's head: assemble.STARTS), or
    None when one has none. The assembler tries them on a line's text once its prefix is off,
    as a rule's pattern is tried."""
    from slurmdoc.ingest.assemble import STARTS

    sups = [line_superset(rx.pattern) for rx in STARTS]
    return None if any(s is None for s in sups) else tuple(s.expression for s in sups)  # type: ignore[union-attr]


def line_guards(rules: list) -> dict[tuple[str, bool], tuple[str, ...]]:
    """For each keyword (as the matcher lists them: lower case for an ignore-case rule) whose
    rules can all be judged line by line, the line supersets of those rules' patterns.

    A rule can be judged line by line when every pattern has a superset and a match cannot
    reach past one line of the text it is tried on: a `line` rule's events are single lines;
    an `any` rule's pattern must not match a newline. A `traceback` rule judges only traceback
    events, and one begins only at a line the assembler knows as a start (starts()): its
    keywords (`Traceback`, `File "`, `Error`) are guarded by those lines' supersets. A line
    holding `Error` in a metric (`Top-1 Error: 23.4`) begins none: for a traceback rule it is
    as if the keyword were not on it (inside a traceback, every line is read anyway)."""
    judged: dict[str, Optional[tuple[str, ...]]] = {}
    begins = starts()
    for r in rules:
        if r.spec.scope == "traceback":
            judged[r.id] = begins
            continue
        sups = [line_superset(p.pattern, r.spec.ignore_case) for p in r.patterns]
        if not sups or any(s is None for s in sups):
            judged[r.id] = None
        elif r.spec.scope != "line" and any(s.spans_lines for s in sups):  # type: ignore[union-attr]
            # a match across lines lies in a traceback event, and that began at a start
            judged[r.id] = None if begins is None else tuple(s.expression for s in sups) + begins  # type: ignore[union-attr]
        else:
            judged[r.id] = tuple(s.expression for s in sups)  # type: ignore[union-attr]
    owners: dict[tuple[str, bool], list[str]] = {}
    for r in rules:
        for k in r.keywords:
            owners.setdefault((k, bool(r.spec.ignore_case)), []).append(r.id)
    out: dict[tuple[str, bool], tuple[str, ...]] = {}
    for key, ids in owners.items():
        exprs = [judged[i] for i in ids]
        if all(e is not None for e in exprs):
            out[key] = tuple(dict.fromkeys(x for e in exprs for x in e))  # type: ignore[union-attr]
    return out


def guards_key(rules: list) -> bytes:
    """The digest of what line_guards makes its answer from: each rule's id, scope, case,
    keywords and patterns, this module's source (how supersets are written) and the
    assembler's starts."""
    import hashlib
    from pathlib import Path

    from slurmdoc.ingest.assemble import STARTS

    try:
        own = Path(__file__).read_bytes()
    except OSError:
        return b""  # nothing to key a cache on: the guards are made every time
    h = hashlib.sha256(own)
    h.update(repr([rx.pattern for rx in STARTS]).encode("utf-8", "surrogatepass"))
    for r in rules:
        h.update(repr((r.id, r.spec.scope, bool(r.spec.ignore_case), r.keywords, [p.pattern for p in r.patterns])).encode("utf-8", "surrogatepass"))
    return h.digest()
