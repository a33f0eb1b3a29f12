"""The matcher: keyword prefilter, priorities, scopes, excludes, time bounds."""

from __future__ import annotations

import textwrap

import pytest
import regex

from slurmdoc.engine.loader import Rulebook, load_pack
from slurmdoc.engine.matcher import Matcher, required_literal
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import Event, SourceInfo


def rule(name, body):
    return name, textwrap.dedent(body)


def book_of(tmp_path, *rules):
    d = tmp_path / "p"
    d.mkdir()
    for name, body in rules:
        (d / f"{name}.yaml").write_text(body)
    return Rulebook(load_pack(d, "t"))


BASE = """\
title: T
category: {cat}
role: cause
priority: {prio}
scope: {scope}
keywords: [{kw}]
patterns: ['{pat}']
exclude: [{exc}]
remediation: {{summary: s}}
examples: {{match: [x], no_match: [y]}}
"""


def mk(name, cat="unknown", prio=50, scope="any", kw='"boom"', pat="boom (?P<n>\\d+)", exc=""):
    return name, BASE.format(cat=cat, prio=prio, scope=scope, kw=kw, pat=pat, exc=exc)


def line_event(text):
    ll = PrefixParser(2025).parse(SourceInfo(index=0, path="x"), 1, text)
    return Event("line", ll, [ll.text], [1])


def test_highest_priority_wins_and_captures(tmp_path):
    m = Matcher(book_of(tmp_path, mk("low", prio=10), mk("high", prio=90, pat="boom (?P<n>\\d+)(?P<tail>.*)")))
    got = m.classify(line_event("boom 42 here"))
    assert got.rule.id == "high" and got.captures == {"n": "42", "tail": " here"}


def test_keyword_gate_and_exclude(tmp_path):
    m = Matcher(book_of(tmp_path, mk("r", exc="'boom 13'")))
    assert m.interesting("a boom 1") and not m.interesting("quiet")
    assert m.classify(line_event("no keyword 42")) is None
    assert m.classify(line_event("boom 13")) is None
    assert m.classify(line_event("boom 14")).rule.id == "r"


@pytest.mark.parametrize("reading", [" count 0", " count: 0", " errors = 0", " 0", " total: 0.0", " 0, ok 12", " seen so far: 00"])
def test_failure_words_naming_a_counter_that_reads_zero_are_no_event(tmp_path, reading):
    # a run's statistics name the failure they count: a zero says it did not happen, whatever
    # rule's words the counter borrows
    m = Matcher(book_of(tmp_path, mk("r", kw='"disk gone"', pat="(?P<what>disk gone)")))
    assert m.classify(line_event("disk gone" + reading)) is None
    assert m.classify(line_event("stats: disk gone" + reading + "; disk gone: /scratch")).rule.id == "r"  # a later match counts


@pytest.mark.parametrize("text", ["disk gone count 3", "disk gone: 0 bytes of 4096 written", "disk gone 0x7f", "disk gone at 0", "disk gone"])
def test_failure_words_with_anything_but_a_zero_reading_after_them_are_an_event(tmp_path, text):
    m = Matcher(book_of(tmp_path, mk("r", kw='"disk gone"', pat="(?P<what>disk gone)")))
    assert m.classify(line_event(text)).rule.id == "r"


def test_traceback_scope_rules_ignore_lines(tmp_path):
    m = Matcher(book_of(tmp_path, mk("tb", scope="traceback")))
    assert m.classify(line_event("boom 1")) is None


def test_case_insensitive_keywords(tmp_path):
    body = BASE.format(cat="numerical", prio=50, scope="any", kw='"NaN"', pat="loss is nan", exc="") + "ignore_case: true\n"
    m = Matcher(book_of(tmp_path, ("n", body)))
    assert m.classify(line_event("LOSS IS NAN")).rule.id == "n"


def test_catastrophic_pattern_is_time_bounded(tmp_path):
    m = Matcher(book_of(tmp_path, mk("slow", kw='"a"', pat="(a|aa)+$")))
    got = m.classify(line_event("a" * 40 + "!"))
    assert got is None
    assert m.timeouts and "slow" in m.timeouts[0]


def test_a_rule_that_keeps_timing_out_is_dropped(tmp_path):
    import time

    from slurmdoc.engine.matcher import MAX_TIMEOUTS

    m = Matcher(book_of(tmp_path, mk("slow", kw='"a"', pat="(a|aa)+$"), mk("fast", kw='"boom"')))
    hostile = line_event("a" * 40 + "!")
    for _ in range(MAX_TIMEOUTS):
        assert m.classify(hostile) is None
    assert m.gave_up(m.book.by_id("slow"))
    t = time.monotonic()
    for _ in range(100):  # no longer tried: a hundred more hostile lines cost nothing
        assert m.classify(hostile) is None
    assert time.monotonic() - t < 0.1
    assert m.classify(line_event("boom 7")).rule.id == "fast"  # the others still work
    assert len(m.timeouts) == 2 and "not used for the rest of the input" in m.timeouts[1]


def test_a_rule_slow_on_every_line_without_timing_out_is_dropped(tmp_path, monkeypatch):
    # each search stays under the per-search timeout, but a keyword on every line would
    # make the run take hours: a rule's total matching time is bounded too
    import time

    import slurmdoc.engine.matcher as matcher_mod

    m = Matcher(book_of(tmp_path, mk("slowish", kw='"a"', pat="(a|aa)+$"), mk("fast", kw='"boom"')))
    slow = m.book.by_id("slowish").patterns[0]
    n = 12
    while True:  # a line this pattern needs a few milliseconds to give up on
        t = time.perf_counter()
        slow.search("a" * n + "!")
        if time.perf_counter() - t > 0.003 or n > 40:
            break
        n += 1
    monkeypatch.setattr(matcher_mod, "RULE_TIME_BUDGET", 0.2)
    t = time.perf_counter()
    for _ in range(2000):
        m.classify(line_event("a" * n + "!"))
    took = time.perf_counter() - t
    assert m.gave_up(m.book.by_id("slowish")) and not m.gave_up(m.book.by_id("fast"))
    assert took < 2.0, took  # ~0.2 s of matching, then the rule is no longer tried
    assert any("slowish: spent" in w and "not used for the rest of the input" in w for w in m.timeouts), m.timeouts
    assert m.classify(line_event("boom 7")).rule.id == "fast"


from hypothesis import given
from hypothesis import strategies as st

from slurmdoc.engine.matcher import trie_regex


@given(st.lists(st.text(alphabet="ab(c.*", min_size=1, max_size=5), min_size=1, max_size=12), st.text(alphabet="ab(c.*x", max_size=30))
def test_trie_prefilter_finds_exactly_the_keywords(words, text):
    import re

    assert bool(re.search(trie_regex(words), text)) == any(w in text for w in words)


def test_a_catastrophic_known_ranks_regex_is_bounded_counted_and_dropped(tmp_path):
    # `known_ranks` is a user regex like the patterns: before, it spent its full timeout on
    # every matching event, with no warning and no end
    import time

    from slurmdoc.engine.matcher import MAX_TIMEOUTS

    body = mk("summary", kw='"failed rank"', pat="failed rank (?P<rank>\\d+)")[1] + "known_ranks: '(a|aa)+$(\\d)'\n"
    m = Matcher(book_of(tmp_path, ("summary", body), mk("fast", kw='"boom"')))
    hostile = line_event("failed rank 3 " + "a" * 40 + "!")
    t = time.perf_counter()
    for _ in range(MAX_TIMEOUTS):
        got = m.classify(hostile)
        assert got.rule.id == "summary" and got.known_ranks == ()  # the pattern's match still counts
    assert m.gave_up(m.book.by_id("summary"))
    assert any("summary" in w and "known_ranks ran past" in w for w in m.timeouts), m.timeouts
    assert any("summary: timed out on" in w and "not used for the rest of the input" in w for w in m.timeouts)
    for _ in range(1000):  # dropped: a thousand more hostile lines cost nothing
        assert m.classify(hostile) is None
    assert time.perf_counter() - t < 30  # sanity cap: about MAX_TIMEOUTS x the per-event timeout
    assert m.classify(line_event("boom 7")).rule.id == "fast"


def test_known_ranks_time_counts_in_the_rule_budget(tmp_path, monkeypatch):
    import time

    import slurmdoc.engine.matcher as matcher_mod

    body = mk("summary", kw='"failed rank"', pat="failed rank (?P<rank>\\d+)")[1] + "known_ranks: '(a|aa)+$(\\d)'\n"
    m = Matcher(book_of(tmp_path, ("summary", body)))
    rx = m.book.by_id("summary").known_ranks
    n = 12
    while True:  # a line the known_ranks regex needs a few milliseconds to give up on
        t = time.perf_counter()
        list(rx.finditer("a" * n + "!"))
        if time.perf_counter() - t > 0.003 or n > 40:
            break
        n += 1
    monkeypatch.setattr(matcher_mod, "RULE_TIME_BUDGET", 0.2)
    for _ in range(2000):
        if m.classify(line_event(f"failed rank 1 {'a' * n}!")) is None:
            break
    assert m.gave_up(m.book.by_id("summary"))
    assert any("summary: spent" in w for w in m.timeouts), m.timeouts


def test_known_ranks_still_reads_ranks(tmp_path):
    body = mk("summary", kw='"failed rank"', pat="failed rank (?P<rank>\\d+)")[1] + "known_ranks: 'rank (\\d+)'\n"
    m = Matcher(book_of(tmp_path, ("summary", body)))
    got = m.classify(line_event("failed rank 3, rank 5, rank 4"))
    assert got.known_ranks == (3, 4, 5) and not m.timeouts


# ---- the keyword index (many events: every rule's keywords found in one pass) ----------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from slurmdoc.engine import matcher as matcher_mod  # noqa: E402
from slurmdoc.engine.loader import load_rulebook  # noqa: E402
from slurmdoc.ingest import hsdb  # noqa: E402

_BOOK = load_rulebook(None)
_PIECES = sorted({k for r in _BOOK.rules for k in r.keywords})[::7] + ["\n", " ", "É", "ß", "İ", "K"]


def _by_loop(rules, text: str) -> set[str]:
    lowered = text.lower()
    return {r.id for r in rules if any(k in (lowered if r.spec.ignore_case else text) for k in r.keywords)}


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
@given(st.lists(st.sampled_from(_PIECES).flatmap(lambda k: st.sampled_from([k, k.upper(), k.lower(), k[1:], k[:-1]])), max_size=12))
def test_the_keyword_index_finds_the_rules_the_loop_finds(pieces):
    """The bundled pack's keywords, glued, cut, in other cases, beside non-ASCII letters
    whose lower case differs in length: the index names exactly the rules whose keywords the
    text (the lowered text, for an ignore-case rule) holds."""
    text = "".join(pieces)
    index = matcher_mod.KeywordIndex(_BOOK.rules, hsdb._hs)
    assert index.rules_in(text, text.lower()) == _by_loop(_BOOK.rules, text)


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
def test_with_the_index_from_the_first_event_every_fixture_reads_the_same(monkeypatch):
    """A big log switches to the index after INDEX_AFTER events; with it from the first,
    every form and fixture gives the same JSON as with none."""
    import json
    from pathlib import Path

    from slurmdoc.api import diagnose
    from slurmdoc.report.json_format import render

    root = Path(__file__).resolve().parent.parent
    cases = sorted(str(p) for p in (root / "tests" / "forms").glob("*.log")) + sorted(
        str(p) for p in (root / "fixtures").glob("*/*") if p.is_dir())
    assert len(cases) > 20
    built = []
    real = matcher_mod.KeywordIndex
    monkeypatch.setattr(matcher_mod, "KeywordIndex", lambda *a: built.append(1) or real(*a))
    for case in cases:
        monkeypatch.setattr(matcher_mod, "INDEX_AFTER", 10**9)
        without = json.loads(render(diagnose([case], rulebook=_BOOK)))
        monkeypatch.setattr(matcher_mod, "INDEX_AFTER", 1)
        assert json.loads(render(diagnose([case], rulebook=_BOOK))) == without, case
    assert len(built) > 0.9 * len(cases)  # built on the first event (a log with none builds none)


@pytest.mark.skipif(hsdb._hs is None, reason="Hyperscan has no wheel here")
@given(st.lists(st.sampled_from(_PIECES).flatmap(lambda k: st.sampled_from([k, k.upper(), k.lower(), k[1:], k[:-1]])), max_size=12))
def test_a_line_is_interesting_with_the_index_as_without(pieces):
    """Once the keywords are indexed, `interesting` asks the index for the exact keywords and
    Python's re for the ignore-case ones, as before: the same answer for any text."""
    text = "".join(pieces)
    plain = Matcher(_BOOK)
    indexed = Matcher(_BOOK)
    indexed._classified = matcher_mod.INDEX_AFTER - 1
    indexed._keyword_index()
    assert indexed._index is not None
    assert indexed.interesting(text) == plain.interesting(text)


@pytest.mark.parametrize(
    "pattern, flags, literal",
    [
        (r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+)", 0, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum="),
        (r"\[(?P<g>[^\]]*gloo[^\]]*)\] Timed out waiting (?P<t>\d+)ms", 0, "] Timed out waiting "),
        (r"(?:ab)+cd", 0, "cd"),  # a repeated group is not required as it is written
        (r"a|bcd", 0, ""),  # alternatives: nothing is required of every match
        (r"(?i)abc", 0, ""),  # case-insensitive
        ("abc", regex.IGNORECASE, ""),
        (r"x{e<=1}abc", 0, ""),  # a fuzzy constraint, which only `regex` reads
        (r"[[:digit:]]abc", 0, ""),  # a POSIX class, which Python's parser reads as a set then `]`
        (r"\p{Lu}rror", 0, ""),  # syntax only `regex` reads
        (r"x\d{1,3}yyy", 0, "yyy"),
    ],
)
def test_a_patterns_required_literal(pattern, flags, literal):
    assert required_literal(pattern, flags) == literal


def test_no_bundled_pattern_matches_a_text_without_its_required_literal(book):
    # a pattern is only searched for in a text holding its literal: every example a pattern
    # matches holds it
    for r in book.rules:
        texts = [e.text for e in r.spec.examples.matches()] + list(r.spec.examples.no_match)
        for pat in [*r.patterns, *r.excludes]:
            lit = required_literal(pat.pattern, pat.flags)
            for text in texts:
                if pat.search(text):
                    assert lit in text, (r.id, pat.pattern, text)


RAISED = """\
title: T
category: rendezvous_error
role: cause
scope: {scope}
keywords: ["Error"]
raised_in: ['in open_store', 'kv_store\\.py']
patterns: ['^\\w+Error: (?P<why>Broken link|Access refused)$']
remediation: {{summary: s}}
examples: {{match: [x], no_match: [y]}}
"""


def tb_event(lines):
    ll = PrefixParser(2025).parse(SourceInfo(index=0, path="x"), 1, lines[0])
    exc = [i for i, t in enumerate(lines) if t and not t[0].isspace() and "Error:" in t]
    return Event("traceback", ll, list(lines), list(range(1, len(lines) + 1)), exception_idx=exc, form="whole")


def test_raised_in_classifies_an_exception_by_the_frame_that_raised_it(tmp_path):
    # the words alone are any program's; where they were raised tells what failed
    m = Matcher(book_of(tmp_path, ("where", RAISED.format(scope="traceback"))))
    head = ["Traceback (most recent call last):", '  File "/app/main.py", line 3, in <module>', "    run()"]
    inside = head + ['  File "/lib/kv_store.py", line 80, in connect', "    sock.dial(host)", "OSError: Broken link"]
    by_function = head + ['  File "/lib/net.py", line 12, in open_store', "    return Store(addr)", "RuntimeError: Access refused"]
    elsewhere = head + ['  File "/app/fetch.py", line 9, in download', "    urlopen(url)", "OSError: Broken link"]
    got = m.classify(tb_event(inside))
    assert got is not None and got.rule.id == "where" and got.captures == {"why": "Broken link"} and got.line_index == 5
    assert m.classify(tb_event(by_function)).captures == {"why": "Access refused"}
    assert m.classify(tb_event(elsewhere)) is None
    # only the innermost frame of that exception's own traceback counts, not an outer frame
    # and not a frame of another exception of the chain
    outer = ['Traceback (most recent call last):', '  File "/lib/kv_store.py", line 5, in run', "    fetch()",
             '  File "/app/fetch.py", line 9, in download', "    urlopen(url)", "OSError: Broken link"]
    assert m.classify(tb_event(outer)) is None
    chained = inside[:-1] + ["ValueError: bad key", "", "During handling of the above exception, another exception occurred:", "",
                             "Traceback (most recent call last):", '  File "/app/main.py", line 4, in <module>', "    retry()", "OSError: Broken link"]
    assert m.classify(tb_event(chained)) is None
    # no frame at all (an exception line alone): nothing says where it was raised
    assert m.classify(tb_event(["OSError: Broken link"])) is None


# ---- a report of a process ended by a signal is the finding of the rule claiming it --------

REPORTER = """\
title: ended by a signal
category: unknown
role: symptom
reports_signal: true
keywords: ["signal"]
patterns: ['ended by signal (?P<sig>-?\\w+)']
remediation: {summary: s}
examples: {match: [x], no_match: [y]}
"""
CLAIMER = """\
title: {title}
category: {cat}
role: cause
priority: 60
signals: [{sigs}]
keywords: ["never printed"]
patterns: ['never printed']
remediation: {{summary: s}}
examples: {{match: [x], no_match: [y]}}
"""


def _classified(book, text):
    from slurmdoc.engine.selftest import classify_text

    got = [m for _, m in classify_text(Matcher(book), text) if m is not None]
    assert len(got) == 1, got
    return got[0]


@pytest.mark.parametrize("said, claimer", [
    ("9", "kill"), ("SIGKILL", "kill"), ("Killed", "kill"), ("-9", "kill"),
    ("11", "crash"), ("SIGBUS", "crash"), ("SIGFPE", "crash"),
    ("13", "ended-by-a-signal"), ("SIGPIPE", "ended-by-a-signal"),
])
def test_a_signal_report_becomes_the_claiming_rule_s_finding(tmp_path, said, claimer):
    book = book_of(tmp_path, ("ended-by-a-signal", REPORTER),
                   ("kill", CLAIMER.format(title="k", cat="killed", sigs="SIGKILL")),
                   ("crash", CLAIMER.format(title="c", cat="segfault", sigs="11, 7, SIGFPE")))
    m = _classified(book, f"worker 3 ended by signal {said}")
    assert m.rule.id == claimer and m.captures["sig"] == said
    # the reporter is kept, so a rule's examples and `rules try` can say whose words matched
    assert m.via == (None if claimer == "ended-by-a-signal" else "ended-by-a-signal")


# the contract's categories of a process ended by a signal (shared/notes/contract.md): a
# SIGKILL with no word of why is `killed`, the native crashes are `segfault`
CONTRACT = {9: "killed", 11: "segfault", 7: "segfault", 4: "segfault", 8: "segfault", 6: "segfault"}
# each signal as reporters name it: number, SIG name, the C library's words, zsh's words
NAMES = {9: ("9", "SIGKILL", "Killed", "killed"), 11: ("11", "SIGSEGV", "Segmentation fault", "segmentation fault"),
         7: ("7", "SIGBUS", "Bus error", "bus error"), 4: ("4", "SIGILL", "Illegal instruction", "illegal hardware instruction"),
         8: ("8", "SIGFPE", "Floating point exception", "floating point exception"), 6: ("6", "SIGABRT", "Aborted", "abort")}
NOUNS = ("worker", "DataLoader worker (pid 4411)", "child process 77", "job 3", "the reader process")
VERBS = ("is killed by signal:", "was terminated by signal", "exited due to signal", "died from signal", "crashed with signal")


@pytest.mark.parametrize("signum", sorted(CONTRACT))
def test_any_reporter_s_words_for_a_signal_death_give_the_contract_s_category(signum):
    from slurmdoc.engine.loader import load_rulebook

    book = load_rulebook()
    for i, name in enumerate(NAMES[signum]):
        if name.lower() == name and not name.isdigit():
            continue  # zsh's lower-case words are the shell's own report, tested below
        noun, verb = NOUNS[i % len(NOUNS)], VERBS[(i + signum) % len(VERBS)]
        text = f"ERROR: {noun} {verb} {name}. Stopping."
        m = _classified(book, text)
        assert m.rule.category == CONTRACT[signum], (text, m.rule.id)


@pytest.mark.parametrize("signum", sorted(CONTRACT))
def test_a_shell_s_report_of_a_job_a_signal_ended_gives_the_contract_s_category(signum):
    from slurmdoc.engine.loader import load_rulebook

    book = load_rulebook()
    c_words, zsh_words = NAMES[signum][2], NAMES[signum][3]
    for text in (f"/opt/jobs/run.sh: line 40: 18832 {c_words}{' ' * max(2, 24 - len(c_words))}python fit.py",
                 f"[2]+  {c_words}{' ' * max(2, 24 - len(c_words))}python fit.py --lr 3e-4",
                 f"zsh: {zsh_words}  python fit.py",
                 f"[1]  + 18832 {zsh_words}     python fit.py",
                 f"{c_words} (core dumped)"):
        m = _classified(book, text)
        assert m.rule.category == CONTRACT[signum], (text, m.rule.id)


@pytest.mark.parametrize("text", [
    "Lost a worker. Possible causes: it was killed by SIGKILL, or it crashed with SIGSEGV.",
    "A task's process went away. Common causes include: (1) killed by SIGKILL from the OOM killer, (2) it crashed due to SIGBUS.",
    "Your step might have been killed by signal 9 when it used more memory than it asked for.",
])
def test_a_signal_named_as_a_possible_cause_is_no_report(text):
    from slurmdoc.engine.loader import load_rulebook
    from slurmdoc.engine.selftest import classify_text

    got = [m for _, m in classify_text(Matcher(load_rulebook()), text) if m is not None]
    assert not [m for m in got if m.rule.category in ("killed", "segfault")], got


# an exit status names a signal when it is a shell's 128+N or Python's minus N; an ordinary
# status (1, 2, 127, 255) names none and stays an exit code with no words
STATUS_CATEGORY = {137: "killed", 139: "segfault", 135: "segfault", 132: "segfault", 136: "segfault", 134: "segfault",
                   -9: "killed", -11: "segfault", -7: "segfault", -6: "segfault", 1: "unknown", 2: "unknown", 127: "unknown", 255: "unknown"}


@pytest.mark.parametrize("status", sorted(STATUS_CATEGORY))
def test_an_exit_status_that_names_a_signal_gives_that_signal_s_category(status):
    from slurmdoc.engine.loader import load_rulebook

    book = load_rulebook()
    texts = [f"Command '['python', 'fit.py']' returned non-zero exit status {status}."]
    if status > 0:
        texts.append(f"Process finished with exit code {status}")
    else:
        texts.append(f"ERROR: the decoder child ended, exit status {status}")
    for text in texts:
        m = _classified(book, text)
        assert m.rule.category == STATUS_CATEGORY[status], (text, m.rule.id)


@pytest.mark.parametrize("said, signum", [("-9", 9), ("137", 9), ("139", 11), ("-11", 11), ("143", 15),
                                          ("1", None), ("2", None), ("127", None), ("128", None), ("255", None), ("-1073741819", None), ("x", None)])
def test_exit_signal_reads_only_statuses_that_name_a_signal(said, signum):
    from slurmdoc.engine.template import exit_signal

    assert exit_signal(said) == signum


def _tb_event(lines):
    src = SourceInfo(index=0, path="x")
    p = PrefixParser(2025)
    lls = [p.parse(src, i, t) for i, t in enumerate(lines, 1)]
    ev = Event("traceback", lls[0], [ll.text for ll in lls], list(range(1, len(lls) + 1)))
    ev.exception_idx.append(len(lls) - 1)
    return ev


def test_an_exception_wrapping_another_class_is_read_as_the_wrapped_one(tmp_path):
    # a wrapper that carries the class of what failed in its own name (`Wrapper(Inner): msg`):
    # a rule for the inner class reads it as `Inner: msg`; a rule for the wrapper still reads
    # the wrapper first; a call in the text (`f(Value)`) or a non-exception name is no wrapper
    inner = mk("inner", prio=80, scope="traceback", kw='"Error"', pat="^DiskFullError: (?P<what>.*)")
    outer = mk("outer", prio=90, scope="traceback", kw='"Error"', pat="^(?:\\w+\\.)*TaskFailedError\\(PoolBrokeError\\)")
    m = Matcher(book_of(tmp_path, inner, outer))
    frames = ["Traceback (most recent call last):", '  File "run.py", line 3, in <module>']
    got = m.classify(_tb_event([*frames, "lib.errors.TaskFailedError(DiskFullError): writer 3 stopped"]))
    assert got.rule.id == "inner" and got.captures == {"what": "writer 3 stopped"}
    assert m.classify(_tb_event([*frames, "lib.errors.TaskFailedError(PoolBrokeError): writer 3 stopped"])).rule.id == "outer"
    for line in ("lib.errors.TaskFailedError: DiskFullError: in a message", "compute(DiskFullError): not a class wrapper", "TaskFailedError(diskfull): lower case"):
        got = m.classify(_tb_event([*frames, line]))
        assert got is None or got.rule.id != "inner", line


# the C library's words for a signal in the shell's language, alone on a line as a shell
# prints them for a foreground command, with its core-dump note in that language or none
LOCALISED = [("段错误", "segfault"), ("已放弃", "segfault"), ("总线错误", "segfault"), ("非法指令", "segfault"),
             ("浮点数例外", "segfault"), ("Speicherzugriffsfehler", "segfault"), ("Abgebrochen", "segfault"),
             ("セグメンテーション違反です", "segfault")]


@pytest.mark.parametrize("words, category", LOCALISED)
@pytest.mark.parametrize("note", ["", " (核心已转储)", "（核心已转储）", " (Speicherabzug geschrieben)", " (コアダンプ)"])
def test_a_signal_s_words_in_the_shell_s_language_give_its_category(words, category, note):
    from slurmdoc.engine.loader import load_rulebook

    m = _classified(load_rulebook(), words + note)
    assert m.rule.category == category, m.rule.id


@pytest.mark.parametrize("words", ["Segmentation fault", "bus error", "Aborted", "段错误", "已放弃", "Speicherzugriffsfehler"])
@pytest.mark.parametrize("sentence", ["After the first epoch it printed {} and stopped.", "训练时程序中断，并提示：{}。怎么办？", "it comes wrong:{}"])
def test_a_signal_s_words_with_the_core_dump_note_in_a_sentence_are_its_report(words, sentence):
    from slurmdoc.engine.loader import load_rulebook

    book = load_rulebook()
    for note in (" (core dumped)", "(核心已转储)", "（核心已转储）"):
        m = _classified(book, sentence.format(words + note))
        assert m.rule.category == "segfault", (words, note, m.rule.id)
