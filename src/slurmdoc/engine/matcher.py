"""Classify events with a rule book: a keyword prefilter, then each candidate's patterns."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from time import perf_counter
from typing import Optional

import regex

from slurmdoc.diagnosis.ranks import to_int
from slurmdoc.frames import FRAME, frames
from slurmdoc.engine.template import exit_signal, signum
from slurmdoc.engine.loader import MATCH_TIMEOUT, NOT_RE_SYNTAX, Rule, Rulebook, _sre, _sre_parse
from slurmdoc.models import Event

MAX_TIMEOUTS = 3  # a rule that times out on this many events is not tried again in the run
# events classified keyword by keyword before the rules' keywords are indexed (KeywordIndex):
# building the index costs a few ms, which a small log would not win back
INDEX_AFTER = 1000
RULE_TIME_BUDGET = 20.0  # seconds one rule may spend matching in a run (a slow pattern that never times out)
# what follows a failure's words when they name a counter whose value is zero (`write error
# count 0`, `No space left on device errors: 0`, `loss is nan count: 0`, `io errors 0, write
# error 0`): the line reports that the failure did not happen. The zero ends the reading (the
# line's end or a separator), so `short write: 0 bytes of 4096` stays a failure
ZERO_COUNT = re.compile(r"[ \t]*(?:(?:count|counts|total|errors?|events?|times|occurrences|seen|so far)\b[ \t]*){0,2}[:=]?[ \t]*0+(?:\.0+)?(?=[ \t]*(?:[,;|)\]}]|$))", re.M)
ZERO_TRIES = 4  # later matches of a pattern tried after counters' readings, per event


def _zero_count(text: str, end: int) -> bool:
    """Do the words a pattern matched, ending at `end`, name a counter whose value is zero?"""
    return text[end : end + 1] in (" ", "\t", ":", "=") and ZERO_COUNT.match(text, end) is not None


def _search(pat, text: str):
    """The pattern's first match in `text` that is no zero counter's reading (see ZERO_COUNT)."""
    m = pat.search(text, timeout=MATCH_TIMEOUT, concurrent=False)
    tries = 0
    while m is not None and _zero_count(text, m.end()):
        tries += 1
        if tries >= ZERO_TRIES or m.end() >= len(text):
            return None
        m = pat.search(text, max(m.end(), m.start() + 1), timeout=MATCH_TIMEOUT, concurrent=False)
    return m


@dataclass(slots=True)
class Match:
    rule: Rule
    captures: dict[str, str]
    line_index: int  # which of the event's lines holds the match start
    known_ranks: tuple[int, ...] = ()  # ranks the text shows exist (rule field known_ranks)
    entries: tuple[dict[str, str], ...] = ()  # per known rank, the known_ranks regex's named groups (node, pid, exitcode)
    pattern: int = 0  # which of the rule's patterns matched (earlier ones are the more specific)
    via: Optional[str] = None  # the `reports_signal` rule whose words matched, when `rule` is the signal's claimer


def trie_regex(words: list[str]) -> str:
    """One regex for a set of literals, factored as a trie ('ab|ac' -> 'a(?:b|c)').

    Python's `re` tries every branch of a flat alternation at each position; a trie lets it
    reject a position after one character, which makes the per-line prefilter several
    times faster with dozens of keywords.
    """
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node and len(node) == 1:
            return ""
        alts = []
        optional = False
        for ch in sorted(node):
            if ch == "":
                optional = True  # a keyword ends here: shorter match is enough
                continue
            alts.append(re.escape(ch) + build(node[ch]))
        if optional:
            return ""  # any keyword ending here already satisfies the prefilter
        if len(alts) == 1:
            return alts[0]
        return "(?:" + "|".join(alts) + ")"

    return build(trie)


def required_literal(pattern: str, flags: int) -> str:
    """The longest run of plain characters that every match of `pattern` holds: one at its
    top level (not inside a group, an alternative or a repetition), so a text without it
    cannot match and the pattern need not be tried on it. "" when there is none, or when it
    cannot be told for sure: a case-insensitive or verbose pattern, or syntax that Python's
    parser reads otherwise than `regex` does."""
    if flags & (regex.IGNORECASE | regex.VERBOSE | regex.V1) or NOT_RE_SYNTAX.search(pattern):
        return ""
    try:
        tree = _sre_parse.parse(pattern, 0)
    except Exception:  # noqa: BLE001 - syntax only `regex` reads
        return ""
    if tree.state.flags & (re.IGNORECASE | re.VERBOSE):
        return ""
    best = run = ""
    for op, av in tree.data:
        if op is _sre.LITERAL:
            run += chr(av)
            if len(run) > len(best):
                best = run
        else:
            run = ""
    return best


@lru_cache(maxsize=4)
def _keyword_regex(cs: tuple[str, ...], ci: tuple[str, ...]) -> re.Pattern[str]:
    """The per-line keyword prefilter of a keyword set, built once per process (a scan of many
    jobs builds one Matcher per job with the same rules)."""
    parts = ([trie_regex(list(cs))] if cs else []) + ([f"(?i:{trie_regex(list(ci))})"] if ci else [])
    return re.compile("|".join(parts)) if parts else re.compile(r"(?!x)x")


class KeywordIndex:
    """The ids of the rules with a keyword in an event's text, all found in one pass over it
    (Hyperscan, every keyword at once, overlapping ones too) instead of trying each rule's
    keywords in turn. The same rules: a keyword of an ignore-case rule (lower case) is looked
    for in the lowered text, the others in the text, as the loop does."""

    def __init__(self, rules: list[Rule], hs) -> None:
        exact: dict[bytes, list[str]] = {}
        lower: dict[bytes, list[str]] = {}
        for r in rules:
            table = lower if r.spec.ignore_case else exact
            for k in r.keywords:
                table.setdefault(k.encode("utf-8", "surrogatepass"), []).append(r.id)
        self._hs = hs
        self._exact = self._compile(exact)
        self._lower = self._compile(lower)

    def _compile(self, table: dict[bytes, list[str]]):
        if not table:
            return None
        from slurmdoc.ingest.hsdb import _hs_literal

        words = list(table)
        db = self._hs.Database(mode=self._hs.HS_MODE_BLOCK)
        db.compile(expressions=[_hs_literal(w) for w in words], ids=list(range(len(words))), elements=len(words),
                   flags=[self._hs.HS_FLAG_SINGLEMATCH] * len(words))
        return db, [tuple(table[w]) for w in words]

    def holds_exact(self, text: str) -> bool:
        """The text holds a keyword of a rule that does not ignore case."""
        if self._exact is None:
            return False
        hit: list[int] = []
        self._exact[0].scan(text.encode("utf-8", "surrogatepass"), match_event_handler=lambda i, *_: hit.append(i))
        return bool(hit)

    def rules_in(self, text: str, lowered: Optional[str]) -> set[str]:
        """Ids of the rules with a keyword in `text` (`lowered`: text.lower(), for the
        ignore-case rules; None when there are none)."""
        found: set[str] = set()
        for compiled, hay in ((self._exact, text), (self._lower, lowered)):
            if compiled is None or hay is None:
                continue
            db, owners = compiled

            def on_match(i: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
                found.update(owners[i])

            db.scan(hay.encode("utf-8", "surrogatepass"), match_event_handler=on_match)
        return found


# an exception that carries another's class in its name (Ray's `RayTaskError(ImportError)`,
# a pool's `RemoteError(KeyError)`): the wrapped class is what failed
WRAPPED = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\((?P<inner>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)\)(?P<rest>:.*)?$")



def no_signal(m) -> bool:
    """A reporter's words for a process ended by a signal whose `sig` is a number that names
    none (`(signal 0)`: signal 0 is the null signal, which ends nothing): no report."""
    sig = m.groupdict().get("sig")
    return sig is not None and to_int(sig) is not None and signum(sig) is None

def unwrapped(line: str) -> Optional[str]:
    """The exception line as the wrapped class's own (`ImportError: <message>` for
    `RayTaskError(ImportError): <message>`), or None when the line wraps no class. Rules try
    it after the line itself, so a rule for the wrapper still reads the wrapper."""
    m = WRAPPED.match(line)
    return None if m is None else m.group("inner") + (m.group("rest") or "")


def carried_cut(event: Event) -> bool:
    """The traceback's originating exception line is its last, and frames follow it: a
    wrapper's carried traceback (`RayTaskError(KeyError): ...` then the remote process's
    frames) cut before the exception line it ends in. The class the wrapper names is then all
    the log says of what was raised, so every rule reads the wrapper as that class's own line,
    `reads_wrapped: false` ones too."""
    at = event.origin()
    return bool(event.exception_idx) and at == event.exception_idx[-1] and any(FRAME.match(t) for t in event.lines[at + 1:])


class Matcher:
    def __init__(self, book: Rulebook) -> None:
        self.book = book
        self.timeouts: list[str] = []
        self._timed_out: dict[str, int] = {}
        self._spent: dict[str, float] = {}
        self._dropped: set[str] = set()
        # candidates in the order they are tried: higher priority first, then id
        self.ordered = sorted(book.rules, key=lambda r: (-r.spec.priority, r.id))
        cs = sorted({k for r in book.rules if not r.spec.ignore_case for k in r.keywords})
        ci = sorted({k for r in book.rules if r.spec.ignore_case for k in r.keywords})
        self.keywords = (cs, ci)  # every trigger literal: (case-sensitive, ignore-case)
        self._prefilter: Optional[re.Pattern[str]] = None  # built on first use (start-up)
        self._line_rules = [r for r in self.ordered if r.spec.scope in ("line", "any")]
        self._tb_rules = [r for r in self.ordered if r.spec.scope in ("traceback", "any")]
        self._place_rules()
        self._classified = 0
        self._index: Optional[KeywordIndex] = None
        self._ci_regex: Optional[re.Pattern[str]] = None  # interesting(): the ignore-case keywords, once indexed
        self._any_ci = any(r.spec.ignore_case for r in book.rules)
        # each pattern's required_literal, read the first time the pattern is tried: a pattern
        # is searched for only in a text that holds it
        self._required: dict[object, str] = {}

    def _place_rules(self) -> None:
        """Each candidate's place in the order it is tried, by kind of event: with the keyword
        index, an event's candidates are the few rules it holds a keyword of, taken in that
        order, instead of a walk over the whole pack asking each rule whether it is one."""
        self._line_at = {r.id: i for i, r in enumerate(self._line_rules)}
        self._tb_at = {r.id: i for i, r in enumerate(self._tb_rules)}

    def interesting(self, text: str) -> bool:
        if self._index is not None:  # the exact keywords by the index, the few others by re
            return self._index.holds_exact(text) or (self._ci_regex is not None and self._ci_regex.search(text) is not None)
        if self._prefilter is None:
            self._prefilter = _keyword_regex(tuple(self.keywords[0]), tuple(self.keywords[1]))
        return self._prefilter.search(text) is not None

    def _keyword_index(self) -> Optional[KeywordIndex]:
        """The keyword index, once INDEX_AFTER events were classified, where Hyperscan is
        installed (else None: each rule's keywords are tried in turn)."""
        self._classified += 1
        if self._index is None and self._classified == INDEX_AFTER:
            from slurmdoc.ingest.hsdb import _hs

            if _hs is not None:
                self._index = KeywordIndex(self.book.rules, _hs)
                ci = self.keywords[1]
                self._ci_regex = re.compile(f"(?i:{trie_regex(list(ci))})") if ci else None
        return self._index

    def classify(self, event: Event) -> Optional[Match]:
        text = event.text()
        lowered: Optional[str] = None
        rules = self._tb_rules if event.kind == "traceback" else self._line_rules
        index = self._keyword_index()
        if index is not None:
            if self._any_ci:
                lowered = text.lower()
            at = self._tb_at if event.kind == "traceback" else self._line_at
            rules = [rules[i] for i in sorted(at[r] for r in index.rules_in(text, lowered) if r in at)]
        for rule in rules:
            if index is None:
                if rule.spec.ignore_case:
                    if lowered is None:
                        lowered = text.lower()
                    hay = lowered
                else:
                    hay = text
                for k in rule.keywords:  # (a loop, not any(): no generator per rule and event)
                    if k in hay:
                        break
                else:
                    continue
            m = self.match_rule(rule, text, event)
            if m is not None:
                start, caps, pattern = m
                line_index = event.origin() if start < 0 else text.count("\n", 0, start)
                known, entries = self._known(rule, text)
                if rule.spec.reports_signal:
                    owner = self.book.claimer(signum(caps["sig"]) if "sig" in caps else exit_signal(caps.get("exitcode")))
                    if owner is not None and owner is not rule and not self.gave_up(owner):
                        # another rule's words: ranked after the claimer's own patterns, and
                        # alike whichever reporter found them (the indices are the reporter's)
                        return Match(owner, caps, line_index, known, entries, len(owner.patterns), via=rule.id)
                return Match(rule, caps, line_index, known, entries, pattern)
        return None

    def _known(self, rule: Rule, text: str) -> tuple[tuple[int, ...], tuple[dict[str, str], ...]]:
        """Ranks the text shows exist, and for each match the regex's named groups (with
        `rank`): a launcher summary's host, pid and exit code of every failed rank.

        A user regex like the patterns: bounded per event, its time counted in the rule's
        budget, and a timeout counted towards dropping the rule."""
        rx = rule.known_ranks
        if rx is None:
            return (), ()
        found: set[int] = set()
        entries: list[dict[str, str]] = []
        named = "rank" in rx.groupindex  # type: ignore[attr-defined]
        t0 = perf_counter()
        try:
            for m in rx.finditer(text, timeout=MATCH_TIMEOUT, concurrent=False):  # type: ignore[attr-defined]
                n = to_int(m.group("rank") if named else m.group(1))
                if n is None or n < 0:
                    continue
                found.add(n)
                if len(entries) < 10_000:
                    e = {k: v for k, v in m.groupdict().items() if v is not None}
                    e["rank"] = str(n)
                    entries.append(e)
        except TimeoutError:
            self._timeout(rule, "known_ranks")
            return (), ()
        finally:
            self._charge(rule, perf_counter() - t0)
        return tuple(sorted(found)), tuple(entries)

    def match_rule(self, rule: Rule, text: str, event: Optional[Event] = None) -> Optional[tuple[int, dict[str, str], int]]:
        """(offset of the match, captures, which of the rule's patterns matched) if the rule
        matches the text (the event's, when one is given), else None.

        Patterns are tried in order. For a traceback event, each pattern is tried on its
        originating exception line first (offset -1), so a chain is classified by the
        exception it started with rather than by the wrapper raised last; then, when that line
        is a wrapper carrying another exception's class (`RayTaskError(ImportError): ...`), on
        the line as the wrapped class's own (`unwrapped`): for a rule with `reads_wrapped`, or
        for any rule when the wrapper's carried frames are cut (`carried_cut`). A rule with
        `raised_in` is tried on the exception lines of the traceback `event` alone (see
        _match_raised).
        """
        origin = event.lines[event.origin()] if event is not None and event.kind == "traceback" else None
        inner = unwrapped(origin) if origin is not None and ")" in origin else None
        if inner is not None and not rule.spec.reads_wrapped and not carried_cut(event):  # type: ignore[arg-type]
            inner = None
        t0 = perf_counter()
        try:
            for ex in rule.excludes:
                lit = self._literal(ex)
                if lit and lit not in text:
                    continue
                if ex.search(text, timeout=MATCH_TIMEOUT, concurrent=False):
                    return None
            if rule.raised_in:
                return self._match_raised(rule, event) if event is not None and event.kind == "traceback" else None
            signals = rule.spec.reports_signal
            for i, pat in enumerate(rule.patterns):
                lit = self._literal(pat)
                if origin is not None and (not lit or lit in origin):
                    m = _search(pat, origin)
                    if m and not (signals and no_signal(m)):
                        return -1, {k: v for k, v in m.groupdict().items() if v is not None}, i
                if inner is not None and (not lit or lit in inner):
                    m = _search(pat, inner)
                    if m and not (signals and no_signal(m)):
                        return -1, {k: v for k, v in m.groupdict().items() if v is not None}, i
                if lit and lit not in text:
                    continue
                m = _search(pat, text)
                if m and not (signals and no_signal(m)):
                    caps = {k: v for k, v in m.groupdict().items() if v is not None}
                    return m.start(), caps, i
        except TimeoutError:
            self._timeout(rule)
        finally:
            self._charge(rule, perf_counter() - t0)
        return None

    def _match_raised(self, rule: Rule, ev: Event) -> Optional[tuple[int, dict[str, str], int]]:
        """A `raised_in` rule: its patterns tried on each exception line of the traceback, the
        originating one first, each match kept only when the innermost frame of that
        exception's own traceback (after the exception line before it) matches one of the
        rule's `raised_in` regexes. The offset returned is that of the exception line."""
        origin = ev.origin()
        order = [origin] + [i for i in ev.exception_idx if i != origin]
        for idx in order:
            if not 0 <= idx < len(ev.lines):
                continue
            line = ev.lines[idx]
            for i, pat in enumerate(rule.patterns):
                lit = self._literal(pat)
                if lit and lit not in line:
                    continue
                m = _search(pat, line)
                if m is None:
                    continue
                if self._raised_where(rule, ev, idx):
                    return sum(len(t) + 1 for t in ev.lines[:idx]), {k: v for k, v in m.groupdict().items() if v is not None}, i
                break  # the same line, the same frames: no other pattern changes the answer
        return None

    def _raised_where(self, rule: Rule, ev: Event, idx: int) -> bool:
        """The innermost frame of the exception at line `idx` (frames after the exception line
        before it) matches one of the rule's `raised_in` regexes."""
        start = max([i + 1 for i in ev.exception_idx if i < idx], default=0)
        own = frames(ev.lines[start:idx])
        if not own:
            return False
        f = own[-1]
        where = "\n".join(ev.lines[start + f.index:start + f.end])
        return any(rx.search(where, timeout=MATCH_TIMEOUT, concurrent=False) for rx in rule.raised_in)

    def _literal(self, rx) -> str:
        """The pattern's required_literal, read the first time it is tried."""
        lit = self._required.get(rx)
        if lit is None:
            lit = self._required[rx] = required_literal(rx.pattern, rx.flags)
        return lit

    def _charge(self, rule: Rule, seconds: float) -> None:
        """Count time a rule's regexes spent; past RULE_TIME_BUDGET the rule is dropped."""
        spent = self._spent[rule.id] = self._spent.get(rule.id, 0.0) + seconds
        if spent > RULE_TIME_BUDGET:
            self._drop(rule, f"spent {spent:.0f}s matching (a slow pattern)")

    def gave_up(self, rule: Rule) -> bool:
        """True once the rule was dropped for this run (too many timeouts, or too slow)."""
        return rule.id in self._dropped

    def _drop(self, rule: Rule, why: str) -> None:
        if rule.id in self._dropped:
            return
        self._dropped.add(rule.id)
        self._line_rules = [r for r in self._line_rules if r is not rule]
        self._tb_rules = [r for r in self._tb_rules if r is not rule]
        self._place_rules()
        self.timeouts.append(f"rule {rule.id}: {why}, not used for the rest of the input (`slurmdoc rules lint` shows risky patterns)")

    def _timeout(self, rule: Rule, what: str = "a pattern") -> None:
        """One warning per rule; after MAX_TIMEOUTS the rule is dropped, so a pattern with
        catastrophic backtracking costs a bounded time however many lines provoke it."""
        n = self._timed_out[rule.id] = self._timed_out.get(rule.id, 0) + 1
        if n == 1:
            self.timeouts.append(f"rule {rule.id} ({rule.file}): {what} ran past {MATCH_TIMEOUT}s on one event and was skipped")
        if n == MAX_TIMEOUTS:
            self._drop(rule, f"timed out on {n} events")
