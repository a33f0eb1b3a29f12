"""Load rule packs: find files, parse YAML safely, validate, compile every pattern once."""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import marshal
import os
import re
import string
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

import regex

try:  # Python's own regex parser, to measure a pattern before `regex` compiles it
    import re._constants as _sre  # type: ignore[import-not-found]
    import re._parser as _sre_parse  # type: ignore[import-not-found]
except ImportError:  # Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# syntax that Python's parser reads otherwise than `regex` does, or not at all as `regex` means
# it: a POSIX class (`[[:digit:]]`), a fuzzy constraint (`{e<=1}`: braces that are no count),
# `regex`'s own escapes (properties, named characters, grapheme, \G \K \L \M \V); what reads
# a pattern through Python's parser (matcher.required_literal, superset) leaves these alone
NOT_RE_SYNTAX = re.compile(r"\[:\^?\w+:\]|\{(?!\d*(?:,\d*)?\})|\\[pPNXGKLMV]")
from pydantic import ValidationError

from slurmdoc.engine import safeyaml
from slurmdoc.engine.schema import BUILTIN_PLACEHOLDERS, FACTS, FixWhen, RuleSpec
from slurmdoc.engine.template import TemplateError
from slurmdoc.engine.template import names as template_names
from slurmdoc.engine.template import parse as parse_template
from slurmdoc.errors import RuleError

MATCH_TIMEOUT = 0.25  # seconds any one pattern may spend on one event
# Bounds on what a rule pack may ask for (YAML's own bounds: engine/safeyaml.py). The bundled
# pack stays far below each: its largest rule has 21 keywords and a 463-character pattern.
MAX_PATTERN_CHARS = 4_000  # one regex (patterns, exclude, known_ranks)
MAX_PATTERN_DEPTH = 20  # groups nested in one regex (the regex parser recurses per level)
MAX_PATTERN_WEIGHT = 20_000  # pieces a regex compiles to, counted repetitions expanded (bundled: 421)
MAX_PATTERNS = 200  # patterns plus exclude of one rule
MAX_KEYWORD_CHARS = 200  # one keyword
MAX_RULE_KEYWORDS = 1_000  # keywords of one rule
MAX_PACK_KEYWORDS = 10_000  # keywords of every rule loaded together (the per-line prefilter)
MAX_RULE_FILES = 5_000  # rule files in one directory


@dataclass(eq=False)
class Rule:
    id: str
    spec: RuleSpec
    file: str
    pack: str
    patterns: list = field(default_factory=list)
    excludes: list = field(default_factory=list)
    raised_in: list = field(default_factory=list)  # `raised_in` regexes (frames that must have raised)
    keywords: tuple[str, ...] = ()
    groups: frozenset[str] = frozenset()
    known_ranks: Optional[object] = None  # `known_ranks` regex (compiled on first use for a pack checked before)
    replaces: Optional[str] = None  # file of the rule with the same id this one replaced
    signums: frozenset[int] = frozenset()  # the numbers of the signals the rule stands for (`signals`)

    @property
    def category(self) -> str:
        return self.spec.category

    @property
    def role(self) -> str:
        return self.spec.role


@dataclass
class Rulebook:
    rules: list[Rule]
    _claims: Optional[dict[int, Rule]] = field(default=None, repr=False)

    def by_id(self, rule_id: str) -> Optional[Rule]:
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None

    def claimer(self, signum: Optional[int]) -> Optional[Rule]:
        """The rule whose `signals` hold this signal number, if any."""
        if self._claims is None:
            self._claims = {n: r for r in self.rules for n in r.signums}
        return self._claims.get(signum) if signum is not None else None


def bundled_rules_dir() -> Path:
    """The pack shipped in the wheel (slurmdoc/rulepack), or rules/ of a source checkout."""
    try:
        pkg = resources.files("slurmdoc").joinpath("rulepack")
        if pkg.is_dir():
            return Path(str(pkg))
    except (ModuleNotFoundError, TypeError):
        pass
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "rules"
        if (cand / "README.md").is_file() and cand.is_dir():
            return cand
    raise RuleError(str(here), None, None, "the bundled rule pack is missing from this installation")


def _line_of(text: str, key: str) -> Optional[int]:
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith(f"{key}:"):
            return i
    return None


def _placeholders(text: str) -> list[str]:
    names = []
    for _, name, _, _ in string.Formatter().parse(text):
        if name is not None:
            names.append(name)
    return names


class LazyPattern:
    """A rule pattern compiled with `regex` on first use.

    A run usually touches a handful of rules, and compiling every pattern of the pack
    with `regex` is a large share of start-up. The pattern is still checked at load time:
    Python's `re` (fast to compile) validates it and gives its group names; a pattern
    that only `regex` understands is compiled with it right away.
    """

    __slots__ = ("pattern", "flags", "groupindex", "groups", "_c")

    def __init__(self, pattern: str, flags: int, check: bool = True) -> None:
        self.pattern = pattern
        self.flags = flags
        self._c = None
        if not check:
            return  # groupindex and groups come from the compiled pattern when asked for
        re_flags = (re.MULTILINE if flags & regex.MULTILINE else 0) | (re.IGNORECASE if flags & regex.IGNORECASE else 0)
        checked = re.compile(pattern, re_flags)  # raises re.error: the caller falls back
        self.groupindex = dict(checked.groupindex)
        self.groups = checked.groups

    def _get(self):
        if self._c is None:
            self._c = regex.compile(self.pattern, self.flags)
        return self._c

    def search(self, *a, **kw):
        return self._get().search(*a, **kw)

    def finditer(self, *a, **kw):
        return self._get().finditer(*a, **kw)

    def match(self, *a, **kw):
        return self._get().match(*a, **kw)

    def __getattr__(self, name: str):
        return getattr(self._get(), name)


NAMED_GROUP = re.compile(r"\(\?P<(\w+)>")


def _compile(pattern: str, flags: int, check: bool = True):
    if not check:
        return LazyPattern(pattern, flags, check=False)
    try:
        lazy = LazyPattern(pattern, flags)
    except (re.error, ValueError, OverflowError, RecursionError):  # noqa: B014
        return regex.compile(pattern, flags)  # regex-only syntax, or a real error to report
    if "{" in pattern:
        # `regex` reads `{d...}`, `{e...}`, `{i...}`, `{s...}` as fuzzy-match constraints where
        # `re` sees plain text (found by fuzzing): only `regex` can say it will compile
        return regex.compile(pattern, flags)
    return lazy


# Where a source checkout's bundled pack records which rule files passed the regex checks:
# beside this module's bytecode, so only who can change slurmdoc's code can write it. One
# SHA-256 per line, of the file's bytes salted with what the checks depend on (this module's
# source, the Python and `regex` versions). Written like bytecode: not under
# PYTHONDONTWRITEBYTECODE, and never an error when it cannot be.
CHECKED_CACHE = Path(__file__).resolve().parent / "__pycache__" / "rulepack-checked.txt"
# Beside it, the same files' YAML as parsed (the pack's data, before validation): parsing
# the bundled pack's YAML is most of loading it, and of start-up after the imports. Keyed
# by the same digests, marshalled (the format of the bytecode beside it); validation and
# every check but the regex ones still run on it each time.
PARSED_CACHE = CHECKED_CACHE.with_name("rulepack-parsed.marshal")
MAX_PARSED_CACHE = 16 << 20
_SALT: Optional[bytes] = None


def _digest(raw: bytes) -> str:
    global _SALT
    if _SALT is None:
        try:
            own = Path(__file__).read_bytes()
        except OSError:
            own = os.urandom(16)  # no source to key on: nothing will match
        try:  # what the parsed data depends on: the YAML reader, and PyYAML's version (read
            # from its package's source, not imported: a run that parses nothing needs no YAML)
            own += Path(safeyaml.__file__).read_bytes()
            spec = importlib.util.find_spec("yaml")
            own += Path(spec.origin).read_bytes() if spec is not None and spec.origin else b"no yaml"
        except (OSError, ImportError, ValueError):
            own += os.urandom(16)
        _SALT = hashlib.sha256(own + f"\0{sys.version}\0{regex.__version__}\0".encode()).digest()
    return hashlib.sha256(_SALT + raw).hexdigest()


def _read_checked() -> set[str]:
    try:
        with open(CHECKED_CACHE, "rb") as f:
            data = f.read(MAX_RULE_FILES * 65 + 1)
    except OSError:
        return set()
    return {d for d in data.decode("ascii", "replace").split() if len(d) == 64}


def _write_checked(digests: set[str]) -> None:
    if sys.dont_write_bytecode:
        return
    tmp = CHECKED_CACHE.with_name(f"{CHECKED_CACHE.name}.{os.getpid()}.tmp")
    try:
        CHECKED_CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text("".join(d + "\n" for d in sorted(digests)), encoding="ascii")
        os.replace(tmp, CHECKED_CACHE)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def _read_parsed(path: Optional[Path] = None) -> dict:
    try:
        with open(path or PARSED_CACHE, "rb") as f:
            blob = f.read(MAX_PARSED_CACHE + 1)
        got = marshal.loads(blob) if len(blob) <= MAX_PARSED_CACHE else None
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return got if isinstance(got, dict) else {}


def _marshals(data: object) -> bool:
    """YAML data marshal keeps as it is (a date, say, it does not)."""
    try:
        marshal.dumps(data)
    except ValueError:
        return False
    return True


def _write_parsed(parsed: dict, path: Optional[Path] = None) -> None:
    if sys.dont_write_bytecode:
        return
    path = path or PARSED_CACHE
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps({k: v for k, v in parsed.items() if _marshals(v)}))
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            tmp.unlink()
        except OSError:
            pass


def parsed_yaml(text: str, cache: Path, parse: Callable[[str], object]) -> object:
    """`parse(text)`, or what it gave for the same text in an earlier run, kept in `cache`
    (beside a module's bytecode, written only where Python writes bytecode; keyed by the
    text's digest, the loader's and PyYAML's sources). The caller validates it either way."""
    key = _digest(text.encode("utf-8", "surrogatepass"))
    kept = _read_parsed(cache)
    if key in kept:
        return kept[key]
    data = parse(text)
    _write_parsed({key: data}, cache)
    return data


def load_file(path: Path, pack: str, released: bool = False, checked: Optional[set[str]] = None,
              passed: Optional[set[str]] = None, parsed: Optional[dict] = None, fresh: Optional[dict] = None) -> Rule:
    """One rule file, validated and compiled; RuleError names file, line, rule and field.

    `checked`: digests of rule files whose patterns passed the regex checks before (see
    load_pack): a file found there is loaded as a released one. `passed` receives this
    file's digest once it passes. `parsed`: digest -> YAML data of files that passed
    before (their YAML is not parsed again); `fresh` receives this file's, once it passes."""
    fname = str(path)
    stem = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name[: -len(".yml")]
    digest = None
    try:
        raw = safeyaml.read_capped(path)
        if (checked is not None and not released) or parsed is not None:
            digest = _digest(raw)
        if checked is not None and not released:
            released = digest in checked
        raw_text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RuleError(fname, stem, None, f"cannot read: {e}")
    except safeyaml.YamlLimitError as e:
        raise RuleError(fname, stem, None, f"refused: {e.problem}")
    cached = parsed is not None and digest in parsed
    not_yaml: tuple = ()  # PyYAML's error, once PyYAML is imported to parse
    if not cached:
        import yaml

        not_yaml = (yaml.YAMLError,)
    try:
        if cached:
            data = parsed[digest]  # type: ignore[index]
        else:
            data = safeyaml.load(raw_text)  # bounded, then safe: plain YAML types only
    except safeyaml.YamlLimitError as e:
        raise RuleError(f"{fname}:{e.line}" if e.line else fname, stem, None, f"refused: {e.problem}")
    except not_yaml as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{fname}:{mark.line + 1}" if mark is not None else fname
        raise RuleError(where, stem, None, f"not valid YAML: {getattr(e, 'problem', None) or e}")
    except (ValueError, OverflowError, RecursionError) as e:  # e.g. a date with year 0, absurd nesting
        raise RuleError(fname, stem, None, f"not valid YAML: {type(e).__name__}: {str(e)[:200]}")
    if not isinstance(data, dict):
        raise RuleError(fname, stem, None, "a rule file must hold one mapping (id, title, category, ...)")
    known = set(RuleSpec.model_fields)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            line = _line_of(raw_text, str(key))
            raise RuleError(f"{fname}:{line}" if line else fname, stem, str(key), f"unknown field{hint}")
    try:
        spec = RuleSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        line = _line_of(raw_text, str(err["loc"][0])) if err["loc"] else None
        raise RuleError(f"{fname}:{line}" if line else fname, stem, loc or None, err["msg"])
    if spec.id is not None and spec.id != stem:
        raise RuleError(fname, stem, "id", f"id '{spec.id}' differs from the file name '{stem}'")
    _check_sizes(spec, fname, stem, measure=not released)
    flags = regex.MULTILINE | regex.VERSION0
    if spec.ignore_case:
        flags |= regex.IGNORECASE
    if spec.raised_in and spec.scope != "traceback":
        raise RuleError(fname, stem, "raised_in", "names the frame an exception was raised in, so the rule needs `scope: traceback`")
    patterns, excludes, raised_in = [], [], []
    groups: set[str] = set()
    for fld, src_list, out in (("patterns", spec.patterns, patterns), ("exclude", spec.exclude, excludes), ("raised_in", spec.raised_in, raised_in)):
        for i, p in enumerate(src_list):
            try:
                c = _compile(p, flags, check=not released)
            except regex.error as e:
                line = _line_of(raw_text, fld)
                raise RuleError(f"{fname}:{line}" if line else fname, stem, f"{fld}[{i}]", f"invalid regex: {e}")
            out.append(c)
            if fld == "patterns":
                groups.update(NAMED_GROUP.findall(p) if released else c.groupindex)
    allowed = groups | set(BUILTIN_PLACEHOLDERS)
    if spec.signals:
        allowed.add("sig")  # a reporter's capture of the signal (`reports_signal`) comes with its findings
    rem = spec.remediation
    for i, item in enumerate(rem.fix):
        if not isinstance(item, FixWhen):
            continue
        if not item.if_ and not item.unless:
            raise RuleError(fname, stem, f"remediation.fix[{i}]", "a conditional fix line needs `if` or `unless` (else write it as a plain line)")
        for key, facts in (("if", item.if_), ("unless", item.unless)):
            for cond in facts:
                n, eq, value = cond.partition("=")
                if eq and (n in FACTS or not value):
                    raise RuleError(fname, stem, f"remediation.fix[{i}].{key}", f"'{cond}': `name=value` tests a placeholder's value, and needs one (a yes/no fact is named alone)")
                if n not in FACTS and n not in allowed:
                    close = difflib.get_close_matches(n, sorted(set(FACTS) | allowed), n=1)
                    hint = f"; did you mean '{close[0]}'?" if close else ""
                    named = [f for f in FACTS if not f.startswith("seen_")] + ["seen_<category>"]
                    raise RuleError(fname, stem, f"remediation.fix[{i}].{key}", f"unknown fact '{n}' (facts: {', '.join(named)}, or a built-in placeholder or capture group){hint}")
    for fld, text in [("remediation.summary", rem.summary), ("remediation.why", rem.why or ""), ("remediation.straggler", rem.straggler or "")] + [
        (f"remediation.fix[{i}]", t if isinstance(t, str) else t.text) for i, t in enumerate(rem.fix)
    ] + [(f"label[{i}]", t) for i, t in enumerate(spec.label)]:
        try:
            names = _placeholders(text)
        except ValueError as e:
            raise RuleError(fname, stem, fld, f"bad placeholder syntax: {e}")
        for field_ in names:
            try:
                used = template_names(parse_template(field_))
            except TemplateError as e:
                raise RuleError(fname, stem, fld, f"placeholder '{{{field_}}}': {e}")
            for n in sorted(used):
                if n not in allowed:
                    raise RuleError(fname, stem, fld, f"placeholder '{{{n}}}' names no capture group (groups: {', '.join(sorted(groups)) or 'none'})")
    signums: set[int] = set()
    for i, sig in enumerate(spec.signals):
        n = signal_number(sig)
        if n is None:
            raise RuleError(fname, stem, f"signals[{i}]", f"'{sig}' is not a signal (a name such as SIGKILL, or its number)")
        signums.add(n)
    if spec.reports_signal and not groups & {"sig", "exitcode"}:
        raise RuleError(fname, stem, "reports_signal", "the patterns need a group `sig` that captures the signal, or `exitcode` (an exit status that may name one)")
    for i, ex in enumerate(spec.examples.matches()):
        for k in ex.captures:
            if k not in groups:
                raise RuleError(fname, stem, f"examples.match[{i}].captures", f"'{k}' is not a group of any pattern")
    known = None
    if spec.known_ranks is not None and released:
        known = LazyPattern(spec.known_ranks, flags, check=False)  # checked before, as its patterns
    elif spec.known_ranks is not None:
        # compiled with `regex` so that matching it takes a timeout like every rule pattern
        try:
            known = regex.compile(spec.known_ranks, flags)
        except regex.error as e:
            raise RuleError(fname, stem, "known_ranks", f"invalid regex: {e}")
        if known.groups < 1:
            raise RuleError(fname, stem, "known_ranks", "needs one capture group: the rank number")
    keywords = tuple(k.lower() for k in spec.keywords) if spec.ignore_case else tuple(spec.keywords)
    if digest is not None and passed is not None:
        passed.add(digest)
    if digest is not None and fresh is not None:
        fresh[digest] = data
    return Rule(stem, spec, fname, pack, patterns, excludes, raised_in, keywords, frozenset(groups), known, signums=frozenset(signums))


def _check_sizes(spec: RuleSpec, fname: str, stem: str, measure: bool = True) -> None:
    """Counts and lengths within the MAX_* bounds, checked before anything is compiled."""
    if len(spec.keywords) > MAX_RULE_KEYWORDS:
        raise RuleError(fname, stem, "keywords", f"{len(spec.keywords)} keywords, more than the {MAX_RULE_KEYWORDS} a rule may have")
    for i, k in enumerate(spec.keywords):
        if len(k) > MAX_KEYWORD_CHARS:
            raise RuleError(fname, stem, f"keywords[{i}]", f"{len(k)} characters, longer than the {MAX_KEYWORD_CHARS} a keyword may have")
    n = len(spec.patterns) + len(spec.exclude) + len(spec.raised_in)
    if n > MAX_PATTERNS:
        raise RuleError(fname, stem, "patterns", f"{n} patterns, excludes and raised_in, more than the {MAX_PATTERNS} a rule may have")
    regexes = [(f"patterns[{i}]", p) for i, p in enumerate(spec.patterns)] + [(f"exclude[{i}]", p) for i, p in enumerate(spec.exclude)]
    regexes += [(f"raised_in[{i}]", p) for i, p in enumerate(spec.raised_in)]
    if spec.known_ranks is not None:
        regexes.append(("known_ranks", spec.known_ranks))
    for fld, p in regexes:
        if len(p) > MAX_PATTERN_CHARS:
            raise RuleError(fname, stem, fld, f"{len(p)} characters, longer than the {MAX_PATTERN_CHARS} a pattern may have")
        if p.count("(") > MAX_PATTERN_DEPTH and group_depth(p) > MAX_PATTERN_DEPTH:  # fewer '(' nest no deeper
            raise RuleError(fname, stem, fld, f"groups nested deeper than {MAX_PATTERN_DEPTH} levels")
        w = repeat_weight(p) if measure else 0
        if w > MAX_PATTERN_WEIGHT:
            raise RuleError(fname, stem, fld, f"counted repetitions ({{n}}) expand it to about {w} pieces, more than {MAX_PATTERN_WEIGHT}")


_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | ({_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set())
COUNT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


def repeat_weight(pattern: str) -> int:
    """How many pieces a regex compiles to once its counted repetitions are expanded
    (`(?:a{1000}){1000}` is a million: seconds and hundreds of MB for `regex` to compile).
    Read with Python's own parser; a pattern only `regex` reads is bounded by the product of
    its counts, read from the text."""
    try:
        items = _sre_parse.parse(pattern, 0)
    except Exception:  # noqa: BLE001 - regex-only syntax, or an error the compiler reports
        w = 1
        for m in COUNT.finditer(pattern):
            w *= max(1, int(m.group(2) or m.group(1)) if m.group(2) != "" else int(m.group(1)))
            if w > MAX_PATTERN_WEIGHT:
                break
        return w

    def weight(seq) -> int:
        w = 0
        for op, av in seq:
            if op in _REPEATS:
                lo, hi, sub = av
                w += max(1, hi if hi != _sre.MAXREPEAT else lo) * weight(sub)
            elif op is _sre.SUBPATTERN:
                w += weight(av[-1])
            elif op is _sre.BRANCH:
                w += sum(weight(b) for b in av[1])
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                w += weight(av[1])
            elif op is getattr(_sre, "ATOMIC_GROUP", None):
                w += weight(av)
            elif op is _sre.GROUPREF_EXISTS:
                w += weight(av[1]) + (weight(av[2]) if av[2] else 0)
            else:
                w += 1
            if w > MAX_PATTERN_WEIGHT:
                return w
        return w

    return weight(items)


def group_depth(pattern: str) -> int:
    """How deep a regex's groups nest: unescaped '(' outside character classes, a cheap
    upper bound checked before any regex parser (which recurses per level) sees it."""
    depth = top = 0
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1  # a leading ']' is a member
        elif c == "(":
            depth += 1
            top = max(top, depth)
        elif c == ")":
            depth = max(0, depth - 1)
        i += 1
    return top


def check_keywords(rules: list[Rule], where: str) -> None:
    """RuleError when the rules loaded together have more keywords than the prefilter takes."""
    total = 0
    for r in rules:
        total += len(r.keywords)
        if total > MAX_PACK_KEYWORDS:
            raise RuleError(where, None, "keywords", f"more than {MAX_PACK_KEYWORDS} keywords in all (reached at rule '{r.id}', {r.file})")


def rule_files(directory: Path) -> list[Path]:
    """Every rule file below `directory`, in a stable order."""
    files = []
    for p in directory.rglob("*"):
        if p.suffix in (".yaml", ".yml") and p.is_file():
            files.append(p)
            if len(files) > MAX_RULE_FILES:
                raise RuleError(str(directory), None, None, f"more than {MAX_RULE_FILES} rule files")
    return sorted(files, key=lambda p: str(p.relative_to(directory)))


def load_pack(directory: Path, pack: str, released: bool = False, remember: bool = False) -> list[Rule]:
    """Every rule of a directory, validated.

    `released`: the pack installed with slurmdoc itself, whose patterns the test suite has
    compiled and run before release; they are compiled on first use without being checked
    again at load (start-up). Every other check still runs.

    `remember`: the bundled pack of a source checkout, which anyone may have edited: its
    patterns are checked, and the digest of each file that passed is kept (CHECKED_CACHE),
    so that the next run checks only the files that changed since (most of start-up's
    rule loading otherwise). Both: the YAML of the files that passed is kept parsed
    (PARSED_CACHE), where it can be written, and only a changed file is parsed again.
    """
    if not directory.is_dir():
        raise RuleError(str(directory), None, None, "rule directory does not exist")
    rules: dict[str, Rule] = {}
    keywords = 0
    checked = _read_checked() if remember and not released else None
    parsed = _read_parsed() if remember or released else None
    passed: set[str] = set()
    fresh: dict = {}
    for path in rule_files(directory):
        rule = load_file(path, pack, released, checked, passed, parsed, fresh if parsed is not None else None)
        if rule.id in rules:
            raise RuleError(str(path), rule.id, "id", f"duplicate rule id, also defined in {rules[rule.id].file}")
        rules[rule.id] = rule
        keywords += len(rule.keywords)
        if keywords > MAX_PACK_KEYWORDS:
            check_keywords(list(rules.values()), str(directory))
    if checked is not None and passed != checked:
        _write_checked(passed)  # the pack as it is now: a file edited or removed drops out
    if parsed is not None and fresh.keys() != parsed.keys():
        _write_parsed(fresh)
    return list(rules.values())


def load_rulebook(extra_dirs: Optional[list[str]] = None) -> Rulebook:
    """The bundled pack, then each user directory in order; a later rule with the same id wins."""
    merged: dict[str, Rule] = {}
    bundled = bundled_rules_dir()
    released = bundled.parent == Path(__file__).resolve().parent.parent
    for r in load_pack(bundled, "bundled", released=released, remember=not released):
        merged[r.id] = r
    for d in extra_dirs or []:
        for r in load_pack(Path(os.path.expanduser(d)), d):
            if r.id in merged:
                r.replaces = merged[r.id].file
            merged[r.id] = r
    if not merged:
        raise RuleError(", ".join(extra_dirs or []) or "rules", None, None, "no rules found")
    check_keywords(list(merged.values()), ", ".join(extra_dirs or []) or str(bundled))
    check_signals(list(merged.values()))
    return Rulebook(sorted(merged.values(), key=lambda r: r.id))


def signal_number(v) -> Optional[int]:
    """A signal's number from a rule's `signals` entry: a name (`SIGKILL`) or a number."""
    from slurmdoc.slurm.exitcodes import SIGNALS

    if isinstance(v, int) and not isinstance(v, bool):
        return v if 0 < v < 128 else None
    if isinstance(v, str) and v.strip().isdigit():
        return signal_number(int(v.strip()))
    name = str(v).strip().upper()
    return next((n for n, (nm, _) in SIGNALS.items() if nm == name and nm.startswith("SIG")), None)


def check_signals(rules: list[Rule]) -> None:
    """Each signal is claimed by one rule at most (else which rule a signal's report is
    would depend on the order the pack was read in)."""
    seen: dict[int, Rule] = {}
    for r in sorted(rules, key=lambda r: r.id):
        for n in sorted(r.signums):
            if n in seen:
                raise RuleError(r.file, r.id, "signals", f"signal {n} is also claimed by rule {seen[n].id} ({seen[n].file})")
            seen[n] = r
