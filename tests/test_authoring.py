"""Rule authoring: list, show, test, lint, try; the bundled pack passes, a broken one fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slurmdoc.engine.authoring import (
    AMBIGUOUS_REPEAT,
    QUADRATIC_RUN,
    OVERLAPPING_ALTERNATIVES,
    lint,
    lint_rule,
    list_rules,
    load_layers,
    render_lint,
    render_test,
    render_try,
    risky_constructs,
    show_rule,
    test_rules,
    try_rule,
)
from slurmdoc.engine.loader import Rulebook, load_file, load_rulebook
from slurmdoc.errors import InputError

BROKEN = Path(__file__).parent / "data" / "broken_rules"


def test_bundled_pack_passes_test_and_lint():
    pack = load_layers([])
    assert pack.problems == [] and len(pack.targets) == len(load_rulebook().rules)
    report = test_rules(pack)
    assert report.ok, render_test(report)
    assert len(report.results) > 3 * len(pack.targets)
    linted = lint(pack)
    # the bundled pack is lint-clean, warnings included: a risky pattern or an example gap
    # added to it should be fixed, not tolerated
    assert not linted.failed(strict=True), render_lint(linted)


def test_broken_pack_fails_rules_test_with_each_reason():
    report = test_rules(load_layers([str(BROKEN)]))
    assert not report.ok
    not_loaded = {(Path(p.where.split(":")[0]).name, p.field) for p in report.problems}
    assert not_loaded == {("typo-field.yaml", "keywrods"), ("bad-placeholder.yaml", "remediation.summary"), ("dup-id.yaml", "id")}
    failed = {(r.rule_id, r.kind, r.index): r.detail for r in report.failed}
    assert failed == {
        ("stolen-example", "match", 0): "not classified as stolen-example (got: cuda-oom)",
        ("wrong-capture", "match", 0): "captures differ: shard: expected '4', got '3'",
        ("matches-no-match", "no_match", 0): "matches-no-match matched text it must not match",
        ("todo-now-matches", "todo_match", 0): "now matches: move it to match",
    }
    # only the directory's rules are reported on, in the context of the whole pack
    assert {r.rule_id for r in report.results} == {r.id for r in load_layers([str(BROKEN)]).targets}
    text = render_test(report)
    assert "did you mean 'keywords'" in text and "| RuntimeError: missing shard 3 of 8" in text
    assert text.splitlines()[-1].startswith("8 rules, ") and "4 failed in 4 rules" in text and "3 rule files not loaded" in text


def test_broken_pack_fails_lint_with_errors_and_warnings():
    report = lint(load_layers([str(BROKEN)]))
    got = {(Path(p.where.split(":")[0]).name, p.level, p.field) for p in report.problems if p.level != "info"}
    assert got == {
        ("typo-field.yaml", "error", "keywrods"),
        ("bad-placeholder.yaml", "error", "remediation.summary"),
        ("dup-id.yaml", "error", "id"),
        ("empty-match.yaml", "error", "patterns[0]"),
        ("catastrophic.yaml", "warning", "patterns[0]"),
        ("half-placeholder.yaml", "warning", "remediation.summary"),
    }
    assert report.failed() and report.count("error") == 4 and report.count("warning") == 2
    text = render_lint(report)
    assert "typo-field.yaml:4: rule 'typo-field': field 'keywrods': unknown field; did you mean 'keywords'?" in text
    assert "{device} prints '?' when patterns[1] matches" in text


def test_lint_warnings_alone_fail_only_when_strict(tmp_path):
    d = tmp_path / "pack"
    d.mkdir()
    shutil.copy(BROKEN / "catastrophic.yaml", d)
    report = lint(load_layers([str(d)]))
    assert report.count("warning") == 1 and report.count("error") == 0
    assert not report.failed() and report.failed(strict=True)


def test_a_user_rule_replacing_a_bundled_one_is_noted(tmp_path):
    d = tmp_path / "pack"
    d.mkdir()
    text = (BROKEN / "wrong-capture.yaml").read_text().replace('shard: "4"', 'shard: "3"')
    (d / "cuda-oom.yaml").write_text(text)
    pack = load_layers([str(d)])
    notes = [p for p in pack.problems if p.level == "info"]
    assert len(notes) == 1 and "replaces the rule of the same id" in notes[0].message and "cuda-oom.yaml" in notes[0].message
    rows = {r.id: r for r in list_rules(load_rulebook([str(d)]))}
    assert rows["cuda-oom"].pack == str(d) and rows["cuda-oom"].replaces.endswith("memory/cuda-oom.yaml")
    assert rows["nan-loss"].pack == "bundled" and rows["nan-loss"].replaces is None


def test_refine_with_a_category_no_rule_produces_is_an_error():
    rule = load_file(BROKEN / "wrong-capture.yaml", "user")
    object.__setattr__(rule.spec, "refine_with", ["host_oom"])  # frozen model: a test-only edit
    problems = lint_rule(rule, Rulebook([rule]))
    assert [(p.level, p.field) for p in problems if p.field == "refine_with"] == [("error", "refine_with")]
    problems = lint_rule(rule, load_rulebook())
    assert not [p for p in problems if p.field == "refine_with"]


@pytest.mark.parametrize(
    "pattern, risk",
    [
        (r"(a+)+$", AMBIGUOUS_REPEAT),
        (r"(.*)*", AMBIGUOUS_REPEAT),
        (r"(\w+\s?)+$", AMBIGUOUS_REPEAT),
        (r"(a|aa)+$", AMBIGUOUS_REPEAT),
        (r"(x+x+)+y", AMBIGUOUS_REPEAT),
        (r"(?i)(A+)+", AMBIGUOUS_REPEAT),
        (r"(?:a|a)+$", OVERLAPPING_ALTERNATIVES),
        (r"(\d+|\w+)*", OVERLAPPING_ALTERNATIVES),
        # a greedy run of (almost) any character before a word boundary or alternatives, in a
        # lookaround or not: quadratic in a long line
        (r"^(?![^\n]*\bWARN(?:ING)?\b)", QUADRATIC_RUN),
        (r"^(?=.*(?:retry|again))x", QUADRATIC_RUN),
        (r"Command '[^'\n]*\bpython", QUADRATIC_RUN),
        (r"^[^\n]*\b(?:WARN|\w*Warning)\b", QUADRATIC_RUN),
    ],
)
def test_risky_patterns_are_flagged(pattern, risk):
    assert risk in risky_constructs(pattern)


@pytest.mark.parametrize(
    "pattern",
    [r"(\s+\w+)+", r"x(?:\d+,)*\d+", r"(?:foo|bar)+", r"(?:ab|ac)+", r"(?>a+)+", r"(?:a++)+", r"[^\]]+", r"(?:.*\n)*?Error", r"(?:, \w+)*", r"\p{L}+",
     # a lazy run, a greedy one before a literal or at the end, a run of a positive class
     r"^(?![^\n]*?\bWARN\b)", r"^(?![^\n]*' died with )", r"(?P<detail>[^\n]*\S)", r"x: (?P<rest>.*)", r"^\s*(?:a|b)", r"\w*\b"],
)
def test_safe_patterns_are_not_flagged(pattern):
    assert risky_constructs(pattern) == []


def test_flagged_patterns_really_backtrack_and_safe_ones_do_not():
    # the lint's claim checked against the regex engine itself, with the matcher's flags
    import regex

    flags = regex.MULTILINE | regex.VERSION0
    hostile = "a" * 40 + "!"
    with pytest.raises(TimeoutError):
        regex.compile(r"(?:a|aa)+$", flags).search(hostile, timeout=0.2)
    for safe in (r"(?>a|aa)+$", r"a+$"):
        assert regex.compile(safe, flags).search(hostile, timeout=0.2) is None


def test_a_flagged_greedy_run_is_quadratic_in_the_engine_and_the_lazy_one_is_not():
    # the lint's claim checked against the regex engine: twice the line, about four times the
    # time greedy (timed out here), twice lazy
    import regex

    flags = regex.MULTILINE | regex.VERSION0
    line = "Error writing to " + "ab " * 200_000
    with pytest.raises(TimeoutError):
        regex.compile(r"^(?![^\n]*\b(?:WARN(?:ING)?|\w*[Ww]arning|[Rr]etry)\b)", flags).search(line, timeout=0.5)
    assert regex.compile(r"^(?![^\n]*?\b(?:WARN(?:ING)?|\w*[Ww]arning|[Rr]etry)\b)", flags).search(line, timeout=2.0) is not None


def test_show_renders_template_and_the_filled_remediation():
    book = load_rulebook()
    text = show_rule(book, "cuda-oom")
    assert text.startswith("cuda-oom: CUDA out of memory")
    assert "{ranks} ran out of GPU memory" in text  # the template, placeholders visible
    assert "{size} (capture)" in text and "{ranks} (built-in)" in text
    assert "Rank 0 ran out of GPU memory" in text  # as diagnose prints it
    assert f"examples: {len(book.by_id('cuda-oom').spec.examples.matches())} match" in text  # the pack grows


def test_show_labels_computed_placeholders():
    text = show_rule(load_rulebook(), "shape-divisibility")
    assert "{divisors(world_size)} (computed)" in text and "{world_size} (capture)" in text
    assert "(?)" not in text


def test_show_unknown_id_suggests_close_ids():
    with pytest.raises(InputError) as e:
        show_rule(load_rulebook(), "cuda-om")
    assert "did you mean cuda-oom" in e.value.one_line()


def test_try_reports_lines_ranks_captures_and_the_winner(write):
    log = write(
        "job.log",
        "\n".join(
            [
                "[rank0]: iteration 5",
                "[rank2]: Traceback (most recent call last):",
                '[rank2]:   File "train.py", line 9, in <module>',
                "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
                "[rank1]: RuntimeError: CUDA error: out of memory",
                "[rank3]: out of memory in the bucket allocator",
            ]
        ),
    )
    book = load_rulebook()
    rep = try_rule(book, "cuda-oom", [log])
    assert [(h.lineno, h.who, h.kind, h.winner) for h in rep.hits] == [(4, "rank 2", "traceback", "cuda-oom"), (5, "rank 1", "traceback", "cuda-oom")]  # an exception line alone is a (partial) traceback
    assert rep.hits[0].captures == {"size": "1.00 GiB"}
    assert [w for w, _ in rep.near] == [f"{log}:6"]
    assert rep.lines == 6
    out = render_try(rep, show_near=True)
    assert f"{log}:4  rank 2  traceback" in out and "size='1.00 GiB'" in out and "keyword, no pattern matched" in out
    # a rule whose matches a higher-priority rule takes says so
    rep = try_rule(book, "python-exception", [log])
    assert [(h.lineno, h.winner) for h in rep.hits] == [(4, "cuda-oom"), (5, "cuda-oom")]
    assert "which ranks higher" in render_try(rep)



def test_try_finds_what_a_rule_naming_frames_matches_and_not_the_same_words_raised_elsewhere(write):
    # rendezvous-store-oserror names the frame that raised (raised_in): `rules try` judges the
    # traceback as diagnose does, so its hit is a hit, and the same words raised by other code
    # are a near miss
    log = write(
        "job.log",
        "\n".join(
            [
                "Traceback (most recent call last):",
                '  File "/opt/env/lib/python3.9/site-packages/torch/distributed/rendezvous.py", line 150, in _env_rendezvous_handler',
                "    store = TCPStore(master_addr, master_port, world_size, start_daemon)",
                "RuntimeError: Connection refused",
                "",
                "Traceback (most recent call last):",
                '  File "/srv/rendezvous_notes.py", line 4, in upload',
                "    sock.connect(addr)",
                "RuntimeError: Connection refused",
            ]
        ),
    )
    rep = try_rule(load_rulebook(), "rendezvous-store-oserror", [log])
    assert [(h.lineno, h.winner, h.captures.get("what")) for h in rep.hits] == [(4, "rendezvous-store-oserror", "Connection refused")]
    assert [w for w, _ in rep.near] == [f"{log}:6"]


# ---- hostile packs under `rules lint`: each a reported error, never a crash -------------

HOSTILE_BASE = """\
title: T
category: unknown
role: cause
keywords: [{kw}]
patterns: ['{pat}']
remediation: {{summary: "{summary}"}}
examples: {{match: ["{ex}"], no_match: [y]}}
"""


def hostile(kw="boom", pat="boom (?P<n>\\\\d+)", summary="s", ex="boom 1", extra=""):
    return HOSTILE_BASE.format(kw=kw, pat=pat, summary=summary, ex=ex) + extra


@pytest.mark.parametrize("name, text, field, words", [
    ("merge.yaml", hostile(extra="a: &a {x: 1}\nb:\n  <<: [*a, *a]\n"), None, "merge keys"),
    ("deep.yaml", "title: " + "[" * 30_000 + "]" * 30_000 + "\n", None, "nest"),  # libyaml's own limit, or the event-stream one
    ("template.yaml", hostile(summary="{" + "size(" * 500 + "n" + ")" * 500 + "}"), "remediation.summary", "longer than"),
    ("template9.yaml", hostile(summary="{" + "gcd(n, " * 9 + "n" + ")" * 9 + "}"), "remediation.summary", "nested deeper"),
    ("groups.yaml", hostile(pat="(" * 1_000 + "boom" + ")" * 1_000), "patterns[0]", "nested deeper"),
    ("slow.yaml", hostile(kw="a", pat="(a|aa)+$", ex="a" * 60 + "!"), "patterns[0]", "ran past"),
])
def test_hostile_rule_files_are_lint_errors_not_crashes(tmp_path, name, text, field, words):
    d = tmp_path / "pack"
    d.mkdir()
    (d / name).write_text(text)
    report = lint(load_layers([str(d)]))
    errors = [p for p in report.problems if p.level == "error"]
    assert report.failed() and len(errors) == 1, errors
    assert name in errors[0].where and errors[0].field == field and words in errors[0].message, errors[0]


def test_pack_keyword_cap_is_a_lint_error(tmp_path):
    from slurmdoc.engine.loader import MAX_PACK_KEYWORDS, MAX_RULE_KEYWORDS

    d = tmp_path / "pack"
    d.mkdir()
    for f in range(MAX_PACK_KEYWORDS // MAX_RULE_KEYWORDS + 1):
        kws = ", ".join(f"f{f}k{i}" for i in range(MAX_RULE_KEYWORDS))
        (d / f"r{f}.yaml").write_text(hostile(kw=kws))
    report = lint(load_layers([str(d)]))
    assert any(p.level == "error" and p.field == "keywords" and f"more than {MAX_PACK_KEYWORDS} keywords" in p.message for p in report.problems)


LINT_RULE = """\
title: Exit
category: unknown
role: cause
keywords: ["exited"]
patterns: ['exited (?P<code>\\\\d+)', 'exited on (?P<name>SIG\\\\w+)']
remediation:
  summary: "SUMMARY"
examples:
  match: ["exited 3", "exited on SIGBUS"]
  no_match: ["ok"]
"""


@pytest.mark.parametrize(
    "summary, warned",
    [
        # a helper call is judged by the names it reads, not as a group named 'signal(code)'
        ("ended by {signal(code)}", "{signal(code)} prints '?' when patterns[1] matches (it has no group 'code')"),
        ("ended by {signal(name)}", "{signal(name)} prints '?' when patterns[0] matches (it has no group 'name')"),
        ("ended on {node}", "{node} prints '?' when the diagnosis does not know {node}"),
        ("ended by {size(count)}", "{size(count)} prints '?' when size() cannot compute"),
        ("ended[[ by {signal(code)}]] on {ranks}, {count} times", None),
    ],
)
def test_lint_flags_each_placeholder_that_can_print_a_question_mark(tmp_path, summary, warned):
    d = tmp_path / "pack"
    d.mkdir()
    (d / "exit.yaml").write_text(LINT_RULE.replace("SUMMARY", summary))
    rule = load_file(d / "exit.yaml", "user")
    got = [p.message for p in lint_rule(rule, Rulebook([rule])) if p.field == "remediation.summary"]
    if warned is None:
        assert got == []
    else:
        assert len(got) == 1 and got[0].startswith(warned), got
