"""Rule authoring: list, show, test, lint and try rules (`slurmdoc rules ...`).

Library functions returning typed results plus plain-text renderers; the CLI prints them.
Validation is the loader's (one file at a time, so one broken file does not hide the
problems of the others), example checks are the self-test's.
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal, Optional

from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.engine.loader import Rule, Rulebook, bundled_rules_dir, check_keywords, load_file, rule_files
from slurmdoc.engine.matcher import Matcher
from slurmdoc.engine.schema import ALWAYS_FILLED, BUILTIN_PLACEHOLDERS
from slurmdoc.engine.template import Call
from slurmdoc.engine.template import names as template_names
from slurmdoc.engine.template import parse as parse_template
from slurmdoc.engine.selftest import ExampleResult, check_rule
from slurmdoc.errors import InputError, RuleError
from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import Event, SourceInfo

BUNDLED = "bundled"
Level = Literal["error", "warning", "info"]


def pack_label(rule: Rule) -> str:
    return BUNDLED if rule.pack == BUNDLED else rule.pack


# ---- loading one layer at a time, keeping every problem ------------------------------


@dataclass(frozen=True)
class Problem:
    level: Level
    where: str  # file, or file:line
    rule: Optional[str]
    field: Optional[str]
    message: str

    def line(self) -> str:
        parts = [self.where]
        if self.rule:
            parts.append(f"rule '{self.rule}'")
        if self.field:
            parts.append(f"field '{self.field}'")
        return f"{self.level}: {': '.join(parts)}: {self.message}"


@dataclass
class Pack:
    """Every loadable rule of the bundled pack and the user directories, and what failed."""

    book: Rulebook  # what `diagnose` would use (later id wins), minus broken files
    targets: list[Rule]  # rules to report on: the user directories' if any were named, else all
    problems: list[Problem] = field(default_factory=list)


def _problem_from(e: RuleError, level: Level = "error") -> Problem:
    return Problem(level, e.file, e.rule, e.field, e.problem)


def load_layers(user_dirs: Iterable[str], report_all: bool = False) -> Pack:
    """Load the bundled pack and each directory file by file, collecting load errors.

    The rules reported on (`targets`) are the user directories' unless `report_all` or
    there are none; the rest of the pack is still loaded, as `diagnose` would see it.
    """
    user_dirs = list(user_dirs)
    layers: list[tuple[str, Path]] = [(BUNDLED, bundled_rules_dir())]
    user = [(d, Path(os.path.expanduser(d))) for d in user_dirs]
    merged: dict[str, Rule] = {}
    problems: list[Problem] = []
    targets: list[Rule] = []
    for name, directory in layers + user:
        if not directory.is_dir():
            problems.append(Problem("error", str(directory), None, None, "rule directory does not exist"))
            continue
        files = rule_files(directory)
        if not files:
            problems.append(Problem("warning", str(directory), None, None, "no *.yaml rule files in this directory"))
        in_layer: dict[str, Rule] = {}
        for path in files:
            try:
                rule = load_file(path, name)
            except RuleError as e:
                problems.append(_problem_from(e))
                continue
            if rule.id in in_layer:
                problems.append(Problem("error", str(path), rule.id, "id", f"duplicate rule id, also defined in {in_layer[rule.id].file}"))
                continue
            in_layer[rule.id] = rule
            if rule.id in merged:
                rule.replaces = merged[rule.id].file
                problems.append(Problem("info", str(path), rule.id, None, f"replaces the rule of the same id in {merged[rule.id].file}"))
            merged[rule.id] = rule
            if name != BUNDLED or report_all or not user:
                targets.append(rule)
    book = Rulebook(sorted(merged.values(), key=lambda r: r.id))
    try:
        check_keywords(book.rules, ", ".join(user_dirs) or str(layers[0][1]))
    except RuleError as e:
        problems.append(_problem_from(e))
    return Pack(book, sorted(targets, key=lambda r: r.id), problems)


# ---- list / show ----------------------------------------------------------------------


@dataclass(frozen=True)
class RuleRow:
    id: str
    category: str
    role: str
    priority: int
    pack: str
    file: str
    replaces: Optional[str]


def list_rules(book: Rulebook) -> list[RuleRow]:
    return [RuleRow(r.id, r.category, r.role, r.spec.priority, pack_label(r), r.file, r.replaces) for r in book.rules]


def render_list(rows: list[RuleRow]) -> str:
    head = ("ID", "CATEGORY", "ROLE", "PRIO", "PACK")
    table = [head] + [(r.id, r.category, r.role, str(r.priority), r.pack + (" (replaces bundled)" if r.replaces and r.pack != BUNDLED else "")) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table]
    return "\n".join(out) + "\n"


def _example_remediation(rule: Rule, book: Rulebook) -> tuple[Optional[str], str]:
    """The remediation as `diagnose` prints it for the rule's first match example, said by rank 0."""
    example = rule.spec.examples.matches()[0]
    src = SourceInfo(index=0, path="<example>")
    parser = PrefixParser(2000)
    matcher = Matcher(book)
    asm = Assembler(matcher.interesting)
    analyzer = Analyzer([src])
    lines = example.text.split("\n")
    events: list[Event] = []
    for i, text in enumerate(lines, 1):
        ll = parser.parse(src, i, f"[rank0]: {text}")
        if ll.origin == "rank":
            analyzer.note_stream(ll.stream, ll.who)
        events.extend(asm.feed(ll))
    events.extend(asm.flush())
    for ev in events:
        m = matcher.classify(ev)
        if m is not None:
            analyzer.add(ev, m)
    d = analyzer.finish(len(lines), ("<example>",), [])
    if d.root_cause is not None and d.root_cause.rule_id == rule.id:
        return d.root_cause.remediation, "as printed when its first match example, said by rank 0, is the root cause"
    if d.root_cause is not None:
        return None, f"its first match example leads to rule '{d.root_cause.rule_id}' as the root cause"
    return None, f"a {rule.role} finding alone is not reported as a root cause"


def show_rule(book: Rulebook, rule_id: str) -> str:
    rule = book.by_id(rule_id)
    if rule is None:
        raise InputError(f"no rule '{rule_id}'", _did_you_mean(rule_id, [r.id for r in book.rules]))
    s = rule.spec
    out = [f"{rule.id}: {s.title}", f"  file      {rule.file}  ({pack_label(rule)} pack)"]
    if rule.replaces:
        out.append(f"  replaces  {rule.replaces}")
    out.append(f"  category  {s.category}   role {s.role}   priority {s.priority}   scope {s.scope}   attribution {s.attribution}")
    flags = [n for n in ("ignore_case", "root_if_alone", "launcher_verdict", "missing_rank_is_root", "defer_to_straggler", "exit_evidence", "clean_end") if getattr(s, n)]
    if flags:
        out.append(f"  flags     {', '.join(flags)}")
    if s.refine_with:
        out.append(f"  refine_with  {', '.join(s.refine_with)}")
    if s.label:
        out.append(f"  label     {' | '.join(s.label)}")
    out.append(f"  keywords  {', '.join(repr(k) for k in s.keywords)}")
    out.append("  patterns")
    for i, (src, c) in enumerate(zip(s.patterns, rule.patterns)):
        groups = f"   groups: {', '.join(c.groupindex)}" if c.groupindex else ""
        out.append(f"    [{i}] {src}{groups}")
    for i, src in enumerate(s.exclude):
        out.append(f"  exclude[{i}] {src}")
    for i, src in enumerate(s.raised_in):
        out.append(f"  raised_in[{i}] {src}")
    if s.known_ranks:
        out.append(f"  known_ranks  {s.known_ranks}")
    out.append("")
    out.append("remediation (template: {name} is a capture group or a built-in; [[...]] is left out when a value inside is missing)")
    out.append(f"  summary   {s.remediation.summary}")
    if s.remediation.straggler:
        out.append(f"  straggler {s.remediation.straggler}")
    if s.remediation.why:
        out.append(f"  why       {s.remediation.why}")
    for step in s.remediation.fix:
        if isinstance(step, str):
            out.append(f"  fix       - {step}")
        else:
            cond = " and ".join([*step.if_, *(f"not {n}" for n in step.unless)])
            out.append(f"  fix       - (when {cond}) {step.text}")
    names = sorted({n for t in _remediation_texts(rule) for n in _names(t[1])})
    if names:
        def origin(n: str) -> str:
            if "(" in n:
                return "computed"  # a helper call over captures (engine/template.py)
            return "capture" if n in rule.groups else "built-in" if n in BUILTIN_PLACEHOLDERS else "?"

        out.append("  placeholders  " + ", ".join(f"{{{n}}} ({origin(n)})" for n in names))
    out.append("")
    filled, how = _example_remediation(rule, book)
    if filled is not None:
        out.append(f"remediation {how}:")
        out.extend("  " + line for line in filled.split("\n"))
    else:
        out.append(f"remediation: not shown ({how})")
    ex = s.examples
    out.append("")
    out.append(f"examples: {len(ex.match)} match, {len(ex.no_match)} no_match, {len(ex.todo_match)} todo_match")
    for e in ex.matches():
        first = e.text.split("\n")
        more = f"  (+{len(first) - 1} lines)" if len(first) > 1 else ""
        caps = f"  captures {e.captures}" if e.captures else ""
        out.append(f"  match     {first[-1] if first[0].startswith('Traceback') else first[0]}{more}{caps}")
    for t in ex.no_match:
        out.append(f"  no_match  {t.split(chr(10))[0]}")
    return "\n".join(out) + "\n"


def _did_you_mean(word: str, choices: list[str]) -> Optional[str]:
    import difflib

    close = difflib.get_close_matches(word, choices, n=3)
    return f"did you mean {', '.join(close)}?" if close else "`slurmdoc rules list` shows every id"


# ---- test -----------------------------------------------------------------------------


@dataclass
class TestReport:
    results: list[ExampleResult]
    problems: list[Problem]  # rule files that did not load (the rest are still tested)
    rules: list[Rule]

    @property
    def failed(self) -> list[ExampleResult]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed and not any(p.level == "error" for p in self.problems)


def test_rules(pack: Pack) -> TestReport:
    """Every example of every target rule, classified by the whole effective pack."""
    matcher = Matcher(pack.book)
    results: list[ExampleResult] = []
    for rule in pack.targets:
        results.extend(check_rule(rule, matcher))
    return TestReport(results, [p for p in pack.problems if p.level == "error"], pack.targets)


test_rules.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
TestReport.__test__ = False  # type: ignore[attr-defined]


def _example_text(rule: Rule, kind: str, index: int) -> str:
    ex = rule.spec.examples
    if kind == "match":
        return ex.matches()[index].text
    return (ex.no_match if kind == "no_match" else ex.todo_match)[index]


def render_test(report: TestReport, verbose: bool = False) -> str:
    out: list[str] = []
    for p in report.problems:
        out.append(f"✗ cannot load {p.line().split(': ', 1)[1]}")
    by_rule: dict[str, list[ExampleResult]] = {}
    for r in report.results:
        by_rule.setdefault(r.rule_id, []).append(r)
    rules = {r.id: r for r in report.rules}
    for rid, results in by_rule.items():
        bad = [r for r in results if not r.ok]
        counts = {k: sum(1 for r in results if r.kind == k) for k in ("match", "no_match", "todo_match")}
        summary = f"{counts['match']} match, {counts['no_match']} no_match" + (f", {counts['todo_match']} todo" if counts["todo_match"] else "")
        if not bad:
            if verbose:
                out.append(f"✓ {rid}  ({summary})")
            continue
        out.append(f"✗ {rid}  {rules[rid].file}")
        for r in bad:
            out.append(f"    {r.kind}[{r.index}]: {r.detail}")
            for line in _example_text(rules[rid], r.kind, r.index).split("\n")[:6]:
                out.append(f"      | {line}")
    n_ok = sum(1 for r in report.results if r.ok and r.kind != "todo_match")
    todo = sum(1 for r in report.results if r.ok and r.kind == "todo_match")
    failed_rules = len({r.rule_id for r in report.failed})
    out.append(
        f"{len(report.rules)} rules, {len(report.results)} examples: {n_ok} ok, {len(report.failed)} failed"
        f" in {failed_rules} rules, {todo} known misses (todo_match)"
        + (f", {len(report.problems)} rule files not loaded" if report.problems else "")
    )
    return "\n".join(out) + "\n"


# ---- lint -----------------------------------------------------------------------------

try:  # Python's own regex parser, to look at a pattern's structure (best effort)
    import re._parser as _sre_parse  # type: ignore[import-not-found]
    import re._constants as _sre_const  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_const  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

_ALPHABET = [chr(i) for i in range(128)] + ["é", "λ", "中", "\u00a0", "\u2028"]
_CATEGORY_RX = {
    "CATEGORY_DIGIT": re.compile(r"\d"),
    "CATEGORY_NOT_DIGIT": re.compile(r"\D"),
    "CATEGORY_SPACE": re.compile(r"\s"),
    "CATEGORY_NOT_SPACE": re.compile(r"\S"),
    "CATEGORY_WORD": re.compile(r"\w"),
    "CATEGORY_NOT_WORD": re.compile(r"\W"),
}
_UNBOUNDED_OPS = ("MAX_REPEAT", "MIN_REPEAT")


def _op(x) -> str:
    return str(x)


def _charset(items, ignore_case: bool) -> frozenset[str]:
    """The characters of the sample alphabet an IN node admits."""
    neg = False
    preds: list[Callable[[str], bool]] = []
    for op, av in items:
        o = _op(op)
        if o == "NEGATE":
            neg = True
        elif o == "LITERAL":
            preds.append(lambda c, v=av: ord(c) == v)
        elif o == "RANGE":
            preds.append(lambda c, lo=av[0], hi=av[1]: lo <= ord(c) <= hi)
        elif o == "CATEGORY":
            rx = _CATEGORY_RX.get(_op(av))
            preds.append((lambda c, rx=rx: rx.match(c) is not None) if rx else (lambda c: True))
        else:
            preds.append(lambda c: True)
    chars = {c for c in _ALPHABET if any(p(c) for p in preds) or (ignore_case and any(p(c.swapcase()) for p in preds))}
    return frozenset(set(_ALPHABET) - chars if neg else chars)


def _width(items) -> tuple[int, int]:
    sp = _sre_parse.SubPattern(_sre_parse.State(), list(items)) if hasattr(_sre_parse, "State") else None
    if sp is None:  # pragma: no cover
        return (0, 1 << 30)
    return sp.getwidth()


def _nullable(item) -> bool:
    return _width([item])[0] == 0


def _first(items, ic: bool) -> frozenset[str]:
    """Characters a sequence can start with (sample alphabet)."""
    out: set[str] = set()
    for item in items:
        out |= _first_item(item, ic)
        if not _nullable(item):
            break
    return frozenset(out)


def _first_item(item, ic: bool) -> frozenset[str]:
    op, av = item
    o = _op(op)
    if o == "LITERAL":
        c = chr(av)
        return frozenset({c, c.swapcase()} if ic else {c})
    if o == "NOT_LITERAL":
        return frozenset(c for c in _ALPHABET if ord(c) != av)
    if o == "ANY":
        return frozenset(c for c in _ALPHABET if c != "\n")
    if o == "IN":
        return _charset(av, ic)
    if o == "SUBPATTERN":
        return _first(av[-1], ic)
    if o == "BRANCH":
        return frozenset().union(*(_first(alt, ic) for alt in av[1]))
    if o in _UNBOUNDED_OPS or o == "POSSESSIVE_REPEAT":
        return _first(av[2], ic)
    if o == "ATOMIC_GROUP":
        return _first(av, ic)
    if o in ("AT", "ASSERT", "ASSERT_NOT"):
        return frozenset()
    return frozenset(_ALPHABET)  # GROUPREF and anything unknown: assume anything


def _last(items, ic: bool) -> frozenset[str]:
    """Characters a sequence can end with (sample alphabet)."""
    out: set[str] = set()
    for item in reversed(list(items)):
        out |= _last_item(item, ic)
        if not _nullable(item):
            break
    return frozenset(out)


def _last_item(item, ic: bool) -> frozenset[str]:
    op, av = item
    o = _op(op)
    if o == "SUBPATTERN":
        return _last(av[-1], ic)
    if o == "BRANCH":
        return frozenset().union(*(_last(alt, ic) for alt in av[1]))
    if o in _UNBOUNDED_OPS or o == "POSSESSIVE_REPEAT":
        return _last(av[2], ic)
    if o == "ATOMIC_GROUP":
        return _last(av, ic)
    return _first_item(item, ic)


def _flexible_tail(items, ic: bool) -> frozenset[str]:
    """Characters that elements of varying length at the end of a sequence can consume:
    where such an element ends is not fixed by the text, so the next repetition may start
    earlier or later. Atomic groups and possessive repeats take what they can and do not
    give it back, so they are fixed."""
    out: set[str] = set()
    for item in reversed(list(items)):
        op, av = item
        lo, hi = _width([item])
        if _op(op) == "SUBPATTERN":
            out |= _flexible_tail(av[-1], ic)
        elif lo != hi and _op(op) not in ("ATOMIC_GROUP", "POSSESSIVE_REPEAT"):
            out |= _first_item(item, ic) | _last_item(item, ic)
        if lo > 0:
            break
    return frozenset(out)


AMBIGUOUS_REPEAT = (
    "ambiguous repetition: what the repeated part can end with, it can also start with, and its length varies,"
    " so a run of such text splits between repetitions in exponentially many ways on a line that fails to match"
)
OVERLAPPING_ALTERNATIVES = "overlapping alternatives under a quantifier: two branches can match the same text, so each repetition may try both"
QUADRATIC_RUN = (
    "a greedy run of any character before a word boundary or alternatives: the regex module gives the run back one"
    " character at a time from the line's end and searches ahead again at each, which is quadratic in a long line;"
    " make the run lazy (`[^\\n]*?`), which finds the same text in one pass"
)


def _searching_start(item) -> bool:
    """Does `item` start with a word boundary or alternatives (what the regex module cannot
    find by a fast scan for a literal after a greedy run)?"""
    op, av = item
    o = _op(op)
    if o == "AT":
        return _op(av) in ("AT_BOUNDARY", "AT_NON_BOUNDARY")
    if o == "BRANCH":
        return True
    if o == "SUBPATTERN":
        body = list(av[-1])
        return bool(body) and _searching_start(body[0])
    return False


def _greedy_run(item) -> bool:
    """Is `item` a greedy unbounded run of (almost) any character (`[^\\n]*`, `.*`, `[^']*`)?"""
    op, av = item
    if _op(op) != "MAX_REPEAT" or av[1] != _sre_const.MAXREPEAT:
        return False
    body = list(av[2])
    if len(body) != 1:
        return False
    o, v = _op(body[0][0]), body[0][1]
    # any character, or any but a few (a negated class); a positive class (`\\s*`, `\\w*`)
    # ends where its kind of text ends
    return o in ("ANY", "NOT_LITERAL") or (o == "IN" and bool(v) and _op(v[0][0]) == "NEGATE")


def _overlapping_branches(items, ic: bool) -> bool:
    for op, av in items:
        o = _op(op)
        if o == "SUBPATTERN" and _overlapping_branches(av[-1], ic):
            return True
        if o != "BRANCH":
            continue
        alts = av[1]
        for i in range(len(alts)):
            for j in range(i + 1, len(alts)):
                a, b = alts[i], alts[j]
                if list(a) == list(b):
                    return True
                wa, wb = _width(a), _width(b)
                loose = wa == wb == (1, 1) or wa[1] >= _sre_const.MAXREPEAT or wb[1] >= _sre_const.MAXREPEAT
                if loose and _first(a, ic) & _first(b, ic):
                    return True
    return False


def risky_constructs(pattern: str, ignore_case: bool = False) -> list[str]:
    """Constructs that can backtrack exponentially under an unbounded quantifier: a repeated
    part of varying length that can end with what it starts with (`(a+)+`, `(.*)*`,
    `(\\w+\\s?)+$`, `(a|aa)+`), and alternatives that can match the same text (`(a|a)+`); and
    one that is quadratic in a long line: a greedy run of any character before a word boundary
    or alternatives (`^(?![^\\n]*\\bWARN)`, `[^\\n]*(?:a|b)`).
    Atomic groups and possessive quantifiers do not backtrack and are not flagged. Best
    effort: a pattern Python's own parser cannot read (syntax only `regex` knows) is skipped."""
    try:
        tree = _sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except Exception:
        return []
    ic = ignore_case or bool(tree.state.flags & re.IGNORECASE)
    found: set[str] = set()

    def visit(items) -> None:
        items = list(items)
        for k in range(len(items) - 1):
            if _greedy_run(items[k]) and _searching_start(items[k + 1]):
                found.add(QUADRATIC_RUN)
        for op, av in items:
            o = _op(op)
            if o in _UNBOUNDED_OPS and av[1] == _sre_const.MAXREPEAT:
                body = list(av[2])
                lo, hi = _width(body)
                if hi > 0 and lo != hi and _first(body, ic) & _flexible_tail(body, ic):
                    found.add(AMBIGUOUS_REPEAT)
                if _overlapping_branches(body, ic):
                    found.add(OVERLAPPING_ALTERNATIVES)
                visit(body)
            elif o in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                visit(av[2])
            elif o == "SUBPATTERN":
                visit(av[-1])
            elif o == "BRANCH":
                for alt in av[1]:
                    visit(alt)
            elif o in ("ASSERT", "ASSERT_NOT"):
                visit(av[1])
            # ATOMIC_GROUP: no backtracking into it

    visit(tree.data)
    return sorted(found)


_OPTIONAL = re.compile(r"\[\[(.*?)\]\]")


def _names(text: str) -> list[str]:
    try:
        return [n for _, n, _, _ in string.Formatter().parse(text) if n is not None]
    except ValueError:
        return []


def _remediation_texts(rule: Rule) -> list[tuple[str, str]]:
    rem = rule.spec.remediation
    out = [("remediation.summary", rem.summary)]
    if rem.why:
        out.append(("remediation.why", rem.why))
    if rem.straggler:
        out.append(("remediation.straggler", rem.straggler))
    out.extend((f"remediation.fix[{i}]", t if isinstance(t, str) else t.text) for i, t in enumerate(rem.fix))
    return out


def _can_be_missing(rule: Rule, field_: str, straggler: bool = False) -> list[tuple[str, str]]:
    """(name, when) for each name a placeholder reads that can have no value: a capture
    group some pattern lacks, a built-in that is not always known; a helper call also when
    it cannot compute (a non-numeric value)."""
    try:
        expr = parse_template(field_)
    except ValueError:
        return []  # the loader reports it
    out = []
    for n in sorted(template_names(expr)):
        if n in rule.groups:
            missing = [i for i, p in enumerate(rule.patterns) if n not in p.groupindex]
            if missing:
                out.append((n, f"when patterns[{missing[0]}] matches (it has no group '{n}')"))
        elif n in BUILTIN_PLACEHOLDERS and n not in ALWAYS_FILLED and not (straggler and n == "stragglers"):
            out.append((n, f"when the diagnosis does not know {{{n}}} (a built-in that is not always known)"))
    if not out and isinstance(expr, Call):
        out.append((field_, f"when {expr.fn}() cannot compute (a missing or non-numeric value)"))
    return out


def lint_rule(rule: Rule, book: Rulebook) -> list[Problem]:
    """Problems the loader cannot see in one file alone."""
    s = rule.spec
    where = rule.file
    out: list[Problem] = []

    def add(level: Level, fld: Optional[str], msg: str) -> None:
        out.append(Problem(level, where, rule.id, fld, msg))

    # risky regular expressions (every search is still time-bounded at match time)
    for fld, sources in (("patterns", s.patterns), ("exclude", s.exclude), ("raised_in", s.raised_in), ("known_ranks", [s.known_ranks] if s.known_ranks else [])):
        for i, src in enumerate(sources):
            name = fld if fld == "known_ranks" else f"{fld}[{i}]"
            for risk in risky_constructs(src, s.ignore_case):
                add("warning", name, f"{risk}; rewrite it, or make the inner part atomic (?>...) or possessive (x++)")
            for said in _future_warnings(src):
                add("warning", name, f"Python warns: {said} (a future Python may read it otherwise); escape the '[' or the doubled operator")
    for i, pat in enumerate(rule.patterns):
        if pat.search("") is not None:
            add("error", f"patterns[{i}]", "matches the empty string, so it matches every event that holds a keyword")
    # examples show every pattern and every keyword
    texts = [e.text for e in s.examples.matches()]
    for i, pat in enumerate(rule.patterns):
        try:
            shown = any(pat.search(t, timeout=1.0) for t in texts)
        except TimeoutError:
            add("error", f"patterns[{i}]", "ran past 1s on a match example (catastrophic backtracking)")
            continue
        if not shown:
            add("warning", f"patterns[{i}]", "no match example matches this pattern; add one that shows it")
    hay = [t.lower() for t in texts] if s.ignore_case else texts
    for i, kw in enumerate(rule.keywords):
        if not any(kw in t for t in hay):
            add("info", f"keywords[{i}]", f"no match example contains keyword {s.keywords[i]!r}")
        if re.search(r"\\[\[\]().dswb]|\.\*|\[\^", s.keywords[i]):
            add("warning", f"keywords[{i}]", f"{s.keywords[i]!r} looks like a regular expression; keywords are literal text")
    # placeholders of summary/why that can be left without a value print as '?' (a fix line
    # with a missing value is left out, and so is [[...]]: fine)
    for fld, text in _remediation_texts(rule):
        if not fld.startswith(("remediation.summary", "remediation.why", "remediation.straggler")):
            continue
        for field_ in dict.fromkeys(_names(_OPTIONAL.sub("", text))):
            for n, why in _can_be_missing(rule, field_, straggler=fld == "remediation.straggler"):
                add("warning", fld, f"{{{field_}}} prints '?' {why}; put it inside [[...]]")
    # links to other rules: a refine_with category no rule in the pack produces never applies
    cats = {r.category for r in book.rules}
    for c in s.refine_with:
        if c not in cats:
            add("error", "refine_with", f"no rule in the pack has category '{c}', so this link never applies")
    if s.role != "symptom" and s.root_if_alone:
        add("warning", "root_if_alone", f"only a symptom can stand in as the root cause; on a {s.role} rule it has no effect")
    return out


def _future_warnings(pattern: str) -> list[str]:
    """What Python's regular expression engines warn of in `pattern` (`[[`, `--`, `&&` in a
    class: "Possible nested set at position 1"), once each; the command line keeps these
    warnings off stderr, lint says them."""
    import warnings

    import regex

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FutureWarning)
        for compile_ in (re.compile, regex.compile):
            try:
                compile_(pattern)
            except Exception:  # noqa: BLE001 - the loader reports a pattern that does not compile
                pass
    return list(dict.fromkeys(str(w.message) for w in said if issubclass(w.category, FutureWarning)))


@dataclass
class LintReport:
    problems: list[Problem]
    rules: int

    def count(self, level: Level) -> int:
        return sum(1 for p in self.problems if p.level == level)

    def failed(self, strict: bool = False) -> bool:
        return self.count("error") > 0 or (strict and self.count("warning") > 0)


def lint(pack: Pack) -> LintReport:
    problems = list(pack.problems)
    for rule in pack.targets:
        problems.extend(lint_rule(rule, pack.book))
    targets = {r.file for r in pack.targets}
    # problems of files not being reported on (the bundled pack under a user DIR) stay out,
    # except load errors: those break any run
    problems = [p for p in problems if p.level == "error" or p.where.split(":")[0] in targets or p.level == "info"]
    return LintReport(problems, len(pack.targets))


def render_lint(report: LintReport, show_info: bool = False) -> str:
    lines = [p.line() for p in report.problems if show_info or p.level != "info"]
    lines.append(f"{report.rules} rules checked: {report.count('error')} errors, {report.count('warning')} warnings")
    return "\n".join(lines) + "\n"


# ---- try ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TryHit:
    source: str  # path:line
    lineno: int
    who: str  # "rank 3", "local rank 1", "task 5", or "no rank prefix"
    kind: str  # line | traceback
    text: str  # the matched line
    captures: dict[str, str]
    winner: Optional[str]  # the rule the whole pack classifies the event as


@dataclass
class TryReport:
    rule: Rule
    hits: list[TryHit]
    near: list[tuple[str, str]]  # (path:line, text): a keyword was there, no pattern matched
    lines: int
    events: int
    warnings: list[str]


def try_rule(book: Rulebook, rule_id: str, paths: list[str], max_hits: int = 1000) -> TryReport:
    """Stream `paths` through the real pipeline; report every event the rule matches."""
    from slurmdoc.api import iter_loglines
    from slurmdoc.ingest.sources import make_inputs

    rule = book.by_id(rule_id)
    if rule is None:
        raise InputError(f"no rule '{rule_id}'", _did_you_mean(rule_id, [r.id for r in book.rules]))
    warnings: list[str] = []
    inputs = make_inputs(paths, warnings)
    matcher = Matcher(book)
    asm = Assembler(matcher.interesting)
    report = TryReport(rule, [], [], 0, 0, warnings)
    ic = rule.spec.ignore_case
    order: list[tuple[int, int, int]] = []  # hits in input order: tracebacks close late

    def look(ev: Event) -> None:
        report.events += 1
        text = ev.text()
        hay = text.lower() if ic else text
        if not any(k in hay for k in rule.keywords):
            return
        origin = ev.origin() if ev.kind == "traceback" else -1
        if matcher.gave_up(rule):
            return
        got = matcher.match_rule(rule, text, ev)
        path = inputs[ev.first.source].info.path
        if got is None:
            if len(report.near) < max_hits:
                report.near.append((f"{path}:{ev.first.lineno}", ev.lines[0][:300]))
            return
        start, caps, _ = got
        idx = origin if start < 0 else text.count("\n", 0, start)
        win = matcher.classify(ev)
        if len(report.hits) < max_hits:
            order.append((ev.first.source, ev.linenos[idx], len(order)))
            report.hits.append(TryHit(f"{path}:{ev.linenos[idx]}", ev.linenos[idx], _who(ev), ev.kind, ev.lines[idx][:500], caps, win.rule.id if win else None))

    for ll in iter_loglines(inputs, warnings):
        report.lines += 1
        for ev in asm.feed(ll):
            look(ev)
    for ev in asm.flush():
        look(ev)
    report.hits = [report.hits[i] for _, _, i in sorted(order)]
    warnings.extend(matcher.timeouts)
    return report


def _who(ev: Event) -> str:
    w = ev.first.who
    if w.rank is not None:
        return f"rank {w.rank}"
    if w.local is not None:
        return f"local rank {w.local}"
    if w.label is not None:
        return f"task {w.label}"
    return "no rank prefix" if ev.first.origin == "rank" or ev.first.origin == "unknown" else f"{ev.first.origin} line"


def render_try(report: TryReport, show_near: bool = False) -> str:
    rid = report.rule.id
    out = []
    for h in report.hits:
        won = "" if h.winner == rid else f"   (the pack reports it as '{h.winner}', which ranks higher)"
        out.append(f"{h.source}  {h.who}  {h.kind}{won}")
        out.append(f"    {h.text}")
        if h.captures:
            out.append("    " + "  ".join(f"{k}={v!r}" for k, v in sorted(h.captures.items())))
    if show_near:
        for where, text in report.near:
            out.append(f"{where}  keyword, no pattern matched")
            out.append(f"    {text}")
    stolen = sum(1 for h in report.hits if h.winner != rid)
    out.append(
        f"{rid}: {len(report.hits)} matches ({stolen} taken by a higher-ranked rule) in {report.events} events, {report.lines} lines;"
        f" {len(report.near)} events held a keyword but no pattern matched" + ("" if show_near or not report.near else " (--near lists them)")
    )
    return "\n".join(out) + "\n"


