"""Rule pack loading and validation: errors name file, line, rule and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from slurmdoc.engine.loader import bundled_rules_dir, load_pack, load_rulebook
from slurmdoc.errors import RuleError

GOOD = textwrap.dedent(
    """\
    title: Disk full
    category: io_error
    role: cause
    keywords: ["No space left"]
    patterns: ['OSError: \\[Errno 28\\] No space left on device: (?P<path>.+)']
    remediation:
      summary: "Disk full writing {path}"
      fix: ["Free space on {path}", "Check {missing_group_free_line}"]
    examples:
      match: ["OSError: [Errno 28] No space left on device: '/ckpt/x'"]
      no_match: ["hello"]
    """
)


def pack(tmp_path, name, text):
    d = tmp_path / "pack"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


def test_bundled_pack_is_found_and_loads():
    assert (bundled_rules_dir() / "README.md").is_file()
    book = load_rulebook()
    assert len(book.rules) >= 10


def test_placeholder_without_group_is_rejected(tmp_path):
    d = pack(tmp_path, "disk-full.yaml", GOOD)
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    msg = e.value.one_line()
    assert "disk-full.yaml" in msg and "rule 'disk-full'" in msg and "remediation.fix[1]" in msg and "missing_group_free_line" in msg


def test_unknown_field_gets_a_did_you_mean_and_a_line(tmp_path):
    d = pack(tmp_path, "r.yaml", GOOD.replace("keywords:", "keywrods:").replace(", \"Check {missing_group_free_line}\"", ""))
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    msg = e.value.one_line()
    assert "r.yaml:4" in msg and "'keywrods'" in msg and "did you mean 'keywords'" in msg
    assert e.value.exit_code == 3


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda t: t.replace("category: io_error", "category: disk"), "category"),
        (lambda t: t.replace("role: cause", "role: maybe"), "role"),
        (lambda t: t.replace("patterns: ['OSError", "patterns: ['(unclosed OSError"), "patterns[0]"),
        (lambda t: t.replace('  no_match: ["hello"]\n', ""), "examples.no_match"),
        (lambda t: t.replace("id: ", "") + "id: other\n", "id"),
    ],
)
def test_schema_errors_name_the_field(tmp_path, mutate, field):
    text = mutate(GOOD.replace(', "Check {missing_group_free_line}"', ""))
    d = pack(tmp_path, "r.yaml", text)
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    assert f"field '{field}" in e.value.one_line()


def test_yaml_is_loaded_safely(tmp_path):
    d = pack(tmp_path, "r.yaml", "!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(RuleError, match="not valid YAML"):
        load_pack(d, "user")


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!!python/object/new:os.system", "!!python/name:os.system", "!!python/object:pathlib.Path"])
def test_python_tags_inside_a_rule_are_rejected_and_never_run(tmp_path, tag):
    marker = tmp_path / "pwned"
    text = GOOD.replace(', "Check {missing_group_free_line}"', "").replace(
        "title: Disk full", f"title: {tag} [\"touch {marker}\"]"
    )
    d = pack(tmp_path, "r.yaml", text)
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    assert "not valid YAML" in e.value.one_line() and "r.yaml:1" in e.value.one_line()
    assert not marker.exists()


@pytest.mark.parametrize(
    "text",
    [
        "title: 0000-0-0 0:00:00\n",  # found by fuzzing: PyYAML raises ValueError, not YAMLError
        "title: " + "[" * 5000 + "]" * 5000 + "\n",
        "title: !!binary not-base64!\n",
        "\x00\x01",
    ],
)
def test_yaml_that_breaks_the_yaml_library_is_a_rule_error(tmp_path, text):
    d = pack(tmp_path, "r.yaml", text)
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    # deep nesting parses or not depending on the recursion limit; either way a rule error
    assert "r.yaml" in e.value.one_line() and e.value.exit_code == 3


def test_pattern_python_re_accepts_but_regex_rejects_is_a_load_error(tmp_path):
    # found by fuzzing: `{divisor}` is text to `re` but a fuzzy-match constraint to `regex`,
    # so checking with `re` alone let the rule load and then crash at match time
    text = GOOD.replace(', "Check {missing_group_free_line}"', "").replace("No space left on device: (?P<path>.+)'", "No space left on device {divisor}: (?P<path>.+)'")
    d = pack(tmp_path, "r.yaml", text)
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    assert "field 'patterns[0]'" in e.value.one_line() and "invalid regex" in e.value.one_line()


def test_user_rule_overrides_bundled_rule_with_the_same_id(tmp_path):
    d = pack(tmp_path, "cuda-oom.yaml", GOOD.replace(', "Check {missing_group_free_line}"', "").replace("Disk full", "Overridden"))
    book = load_rulebook([str(d)])
    rule = book.by_id("cuda-oom")
    assert rule is not None and rule.spec.title == "Overridden" and rule.pack == str(d)


def test_duplicate_ids_in_one_pack(tmp_path):
    text = GOOD.replace(', "Check {missing_group_free_line}"', "")
    d = pack(tmp_path, "a.yaml", text)
    (d / "sub").mkdir()
    (d / "sub" / "a.yaml").write_text(text)
    with pytest.raises(RuleError, match="duplicate rule id"):
        load_pack(d, "user")


def test_missing_rule_dir(tmp_path):
    with pytest.raises(RuleError, match="does not exist"):
        load_rulebook([str(tmp_path / "nope")])


def test_installed_package_ships_every_rule():
    # from a wheel (as CI installs it) the pack must come from inside the package, complete
    import slurmdoc

    pkg = Path(slurmdoc.__file__).resolve().parent
    repo_rules = Path(__file__).resolve().parent.parent / "rules"
    shipped = bundled_rules_dir()
    if not (pkg / "rulepack").is_dir():
        pytest.skip("running from a source checkout (editable install): the pack is read from rules/")
    assert shipped == pkg / "rulepack"
    rel = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*.yaml"))  # noqa: E731
    assert rel(shipped) == rel(repo_rules)


def test_the_readme_rule_example_loads_and_passes_its_examples(tmp_path):
    import re

    from slurmdoc.engine.selftest import check_book

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    m = re.search(r"```yaml\n# my-rules/(\S+)\.yaml.*?\n(.*?)```", readme, re.S)
    assert m, "README lost its rule example"
    d = tmp_path / "my-rules"
    d.mkdir()
    (d / f"{m.group(1)}.yaml").write_text(m.group(2))
    book = load_rulebook([str(d)])
    failed = [r for r in check_book(book) if r.rule_id == m.group(1) and not r.ok]
    assert book.by_id(m.group(1)) is not None and not failed, failed


def _rule_with(pattern: str, example: str) -> str:
    return textwrap.dedent(
        """\
        title: Disk full
        category: io_error
        role: cause
        keywords: ["No space left"]
        remediation:
          summary: "Disk full writing {path}"
        """
    ) + f"patterns: ['{pattern}']\nexamples:\n  match: ['{example}']\n  no_match: ['hello']\n"


@pytest.mark.parametrize(
    "pattern, text, want",
    [
        # understood by Python's re: validated by it at load, compiled by regex on first use
        (r"No space left on device: (?P<path>\S+)", "OSError: No space left on device: /ckpt", "/ckpt"),
        # regex-only syntax (a Unicode property): compiled by regex at load
        (r"No space left on device: (?P<path>\p{L}+)", "OSError: No space left on device: ckpt", "ckpt"),
    ],
)
def test_patterns_compile_lazily_but_are_checked_at_load(tmp_path, pattern, text, want):
    (rule,) = load_pack(pack(tmp_path, "disk-full.yaml", _rule_with(pattern, text)), "user")
    (pat,) = rule.patterns
    assert "path" in rule.groups and pat.groupindex == {"path": 1}
    m = pat.search(text, timeout=0.25)
    assert m is not None and m.group("path") == want


def test_an_invalid_pattern_still_fails_at_load(tmp_path):
    with pytest.raises(RuleError, match=r"patterns\[0\].*invalid regex"):
        load_pack(pack(tmp_path, "disk-full.yaml", _rule_with("space left (?P<path>.+", "No space left x")), "user")


def test_released_pack_skips_only_the_regex_check():
    """The pack installed with slurmdoc compiles its patterns on first use; every other
    load-time fact (groups for placeholders, keywords, ids) is the same as when checked."""
    checked = {r.id: r for r in load_pack(bundled_rules_dir(), "bundled")}
    released = {r.id: r for r in load_pack(bundled_rules_dir(), "bundled", released=True)}
    assert checked.keys() == released.keys()
    for rid, r in released.items():
        c = checked[rid]
        assert r.groups == c.groups and r.keywords == c.keywords, rid
        for a, b in zip(r.patterns, c.patterns):
            assert a.groupindex == b.groupindex, (rid, a.pattern)  # compiled now, on demand


def _remembering(tmp_path, monkeypatch):
    """CHECKED_CACHE under tmp_path, written even under PYTHONDONTWRITEBYTECODE; the number of
    patterns given the regex checks, counted."""
    import slurmdoc.engine.loader as lm

    monkeypatch.setattr(lm, "CHECKED_CACHE", tmp_path / "cache" / "__pycache__" / "rulepack-checked.txt")
    monkeypatch.setattr(lm, "PARSED_CACHE", tmp_path / "cache" / "__pycache__" / "rulepack-parsed.marshal")
    monkeypatch.setattr(lm.sys, "dont_write_bytecode", False)
    calls = []
    real = lm.repeat_weight
    monkeypatch.setattr(lm, "repeat_weight", lambda p: calls.append(p) or real(p))
    return lm, calls


def test_a_remembered_pack_checks_only_what_changed(tmp_path, monkeypatch):
    """A checkout's bundled pack: each file's patterns are checked once; the next load skips
    them for the files whose bytes it checked (same rules, same groups); an edited file is
    checked again, and a bad edit still fails at load."""
    lm, calls = _remembering(tmp_path, monkeypatch)
    d = pack(tmp_path, "disk-full.yaml", _rule_with("space left on (?P<path>.+)", "No space left on /x"))
    (d / "disk-quota.yaml").write_text(_rule_with("quota exceeded on (?P<path>.+)", "No space left: quota exceeded on /y"))
    first = {r.id: r for r in load_pack(d, "bundled", remember=True)}
    assert len(calls) == 2 and lm.CHECKED_CACHE.is_file()
    calls.clear()
    second = {r.id: r for r in load_pack(d, "bundled", remember=True)}
    assert calls == [] and second.keys() == first.keys()
    for rid, r in second.items():
        assert r.groups == first[rid].groups == {"path"} and r.keywords == first[rid].keywords
        assert r.patterns[0].search("No space left on /z quota exceeded on /z", timeout=1) is not None
    (d / "disk-quota.yaml").write_text(_rule_with("quota (?P<path>.+", "No space left: quota /y"))
    with pytest.raises(RuleError, match=r"disk-quota.*patterns\[0\].*invalid regex"):
        load_pack(d, "bundled", remember=True)
    assert calls == ["quota (?P<path>.+"]  # only the edited file was checked


def test_remembering_is_only_for_a_checkout_and_never_written_when_told_not_to(tmp_path, monkeypatch):
    lm, calls = _remembering(tmp_path, monkeypatch)
    d = pack(tmp_path, "disk-full.yaml", _rule_with("space left on (?P<path>.+)", "No space left on /x"))
    load_pack(d, "user")  # a user's pack: checked every time, nothing kept
    load_pack(d, "bundled", released=True)  # a wheel's: never checked at load
    assert not lm.CHECKED_CACHE.exists()
    monkeypatch.setattr(lm.sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE
    load_pack(d, "bundled", remember=True)
    load_pack(d, "bundled", remember=True)
    assert not lm.CHECKED_CACHE.exists() and len(calls) == 3


def test_a_damaged_or_foreign_record_only_means_checking_again(tmp_path, monkeypatch):
    lm, calls = _remembering(tmp_path, monkeypatch)
    d = pack(tmp_path, "disk-full.yaml", _rule_with("space left on (?P<path>.+)", "No space left on /x"))
    lm.CHECKED_CACHE.parent.mkdir(parents=True)
    lm.CHECKED_CACHE.write_bytes(b"\xff\x00 not a digest\n" + b"0" * 64 + b"\n")
    assert [r.id for r in load_pack(d, "bundled", remember=True)] == ["disk-full"]
    assert len(calls) == 1 and lm.CHECKED_CACHE.read_text().split() == [lm._digest((d / "disk-full.yaml").read_bytes())]


def _parsing(monkeypatch, lm):
    """The YAML texts the loader parses, counted."""
    parsed = []
    real = lm.safeyaml.load
    monkeypatch.setattr(lm.safeyaml, "load", lambda text: parsed.append(text) or real(text))
    return parsed


@pytest.mark.parametrize("how", [{"remember": True}, {"released": True}])
def test_the_pack_s_yaml_is_parsed_again_only_where_a_file_changed(tmp_path, monkeypatch, how):
    """The bundled pack (a checkout's or a wheel's): the YAML of the files that passed is kept
    parsed beside the bytecode, and the next load parses only a changed file; the rules are
    the same, and a changed file that is now wrong is still refused."""
    lm, _ = _remembering(tmp_path, monkeypatch)
    parsed = _parsing(monkeypatch, lm)
    d = pack(tmp_path, "disk-full.yaml", _rule_with("space left on (?P<path>.+)", "No space left on /x"))
    (d / "disk-quota.yaml").write_text(_rule_with("quota exceeded on (?P<path>.+)", "No space left: quota exceeded on /y"))
    first = {r.id: r for r in load_pack(d, "bundled", **how)}
    assert len(parsed) == 2 and lm.PARSED_CACHE.is_file()
    parsed.clear()
    second = {r.id: r for r in load_pack(d, "bundled", **how)}
    assert parsed == [] and second.keys() == first.keys()
    for rid, r in second.items():
        assert r.spec == first[rid].spec and r.groups == first[rid].groups and r.keywords == first[rid].keywords
    (d / "disk-quota.yaml").write_text(_rule_with("quota exceeded on (?P<path>.+)", "No space left: quota exceeded on /y") + "priority: 101\n")
    with pytest.raises(RuleError, match=r"disk-quota.*priority"):
        load_pack(d, "bundled", **how)
    assert len(parsed) == 1  # only the edited file


def test_the_parsed_yaml_is_kept_for_the_bundled_pack_only_and_like_bytecode(tmp_path, monkeypatch):
    """A user's pack is parsed every time and nothing is kept; under PYTHONDONTWRITEBYTECODE
    nothing is written either; a damaged record only means parsing again."""
    lm, _ = _remembering(tmp_path, monkeypatch)
    parsed = _parsing(monkeypatch, lm)
    d = pack(tmp_path, "disk-full.yaml", _rule_with("space left on (?P<path>.+)", "No space left on /x"))
    load_pack(d, "user")
    load_pack(d, "user")
    assert len(parsed) == 2 and not lm.PARSED_CACHE.exists()
    monkeypatch.setattr(lm.sys, "dont_write_bytecode", True)
    load_pack(d, "bundled", remember=True)
    assert not lm.PARSED_CACHE.exists()
    monkeypatch.setattr(lm.sys, "dont_write_bytecode", False)
    lm.PARSED_CACHE.parent.mkdir(parents=True, exist_ok=True)
    for junk in (b"", b"\xff\x00 not marshal", b"\xe9\x00\x00\x00\x00"):  # nothing, garbage, a marshalled int
        lm.PARSED_CACHE.write_bytes(junk)
        parsed.clear()
        assert [r.id for r in load_pack(d, "bundled", remember=True)] == ["disk-full"]
        assert len(parsed) == 1
    parsed.clear()
    assert [r.id for r in load_pack(d, "bundled", remember=True)] == ["disk-full"] and parsed == []


# ---- hostile packs: refused at load, quickly, with exit 3 and a line naming the file -----

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from slurmdoc.engine import loader as loader_mod  # noqa: E402

CLEAN = GOOD.replace(', "Check {missing_group_free_line}"', "")
ROOT = Path(__file__).resolve().parent.parent


def diagnose_with(rules_dir, tmp_path):
    """`slurmdoc diagnose -r DIR` on a small failed log: (exit code, stderr, seconds)."""
    log = tmp_path / "job.log"
    log.write_text("[rank1]: Traceback (most recent call last):\n[rank1]: ModuleNotFoundError: No module named 'apex'\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG")}
    env["XDG_CONFIG_HOME"] = str(ROOT / "tests" / "data" / "no-config-here")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-r", str(rules_dir), str(log)],
                       capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stderr, time.perf_counter() - t


def assert_refused(rules_dir, tmp_path, name, *words):
    code, err, took = diagnose_with(rules_dir, tmp_path)
    assert code == 3, (code, err[-2000:])
    assert err.count("\n") == 1 and name in err and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    assert took < 60, took  # sanity cap only: refusing takes well under a second
    return err


def test_merge_key_bomb_is_refused_before_it_expands(tmp_path):
    # 8 levels of `<<: [*a, *a, ...]`: a KB of text that expanded past gigabytes
    lines = ["m0: &m0 {k0: v, k1: v, k2: v, k3: v}"]
    for i in range(1, 9):
        lines.append(f"m{i}: &m{i}\n  <<: [" + ", ".join([f"*m{i - 1}"] * 9) + "]")
    d = pack(tmp_path, "bomb.yaml", CLEAN + "\n".join(lines) + "\n")
    assert_refused(d, tmp_path, "bomb.yaml", "merge keys")


def test_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ['l0: &l0 "lol"'] + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    d = pack(tmp_path, "laughs.yaml", "\n".join(lines) + "\n" + CLEAN)
    assert_refused(d, tmp_path, "laughs.yaml", "expands to more than")


@pytest.mark.parametrize("opener, closer", [("[", "]"), ("{k: ", "}")])
def test_thirty_thousand_nested_brackets_are_an_error_not_a_crash(tmp_path, opener, closer):
    d = pack(tmp_path, "deep.yaml", "title: " + opener * 30_000 + closer * 30_000 + "\n")
    code, err, _ = diagnose_with(d, tmp_path)
    assert code == 3 and "deep.yaml" in err and err.count("\n") == 1, (code, err[-500:])


def test_a_file_past_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    d = pack(tmp_path, "big.yaml", CLEAN + "description: '" + "x" * 2_000 + "'\n")
    monkeypatch.setattr(loader_mod.safeyaml, "MAX_BYTES", 1_000)
    monkeypatch.setattr(loader_mod.safeyaml.read_capped, "__defaults__", (1_000,))
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    assert "big.yaml" in e.value.one_line() and "larger than 1000 bytes" in e.value.one_line()


def with_keywords(n, prefix="kw"):
    return CLEAN.replace('keywords: ["No space left"]', "keywords: [" + ", ".join(f"{prefix}{i}" for i in range(n)) + "]")


def test_millions_of_keywords_are_refused_fast(tmp_path):
    # 3.5 M keywords took minutes and gigabytes to load and build a prefilter for
    d = pack(tmp_path, "many.yaml", with_keywords(3_500_000))
    assert_refused(d, tmp_path, "many.yaml")


def test_keywords_per_rule_are_capped(tmp_path):
    n = loader_mod.MAX_RULE_KEYWORDS
    assert load_pack(pack(tmp_path, "ok.yaml", with_keywords(n)), "user")
    (tmp_path / "b").mkdir()
    d = pack(tmp_path / "b", "many.yaml", with_keywords(n + 1))
    with pytest.raises(RuleError) as e:
        load_pack(d, "user")
    msg = e.value.one_line()
    assert "many.yaml" in msg and "field 'keywords'" in msg and f"more than the {n}" in msg and e.value.exit_code == 3


def test_keywords_per_pack_are_capped_across_files(tmp_path):
    per = loader_mod.MAX_RULE_KEYWORDS
    files = loader_mod.MAX_PACK_KEYWORDS // per + 1  # each file within its cap, the pack past it
    d = tmp_path / "pack"
    d.mkdir()
    for f in range(files):
        (d / f"r{f}.yaml").write_text(with_keywords(per, prefix=f"f{f}k"))
    err = assert_refused(d, tmp_path, str(d), f"more than {loader_mod.MAX_PACK_KEYWORDS} keywords")
    assert "field 'keywords'" in err


def test_a_long_keyword_is_refused(tmp_path):
    # the prefilter factors keywords as a trie, one nesting level per character
    d = pack(tmp_path, "long.yaml", CLEAN.replace('"No space left"', '"' + "x" * 50_000 + '"'))
    with pytest.raises(RuleError, match=r"field 'keywords\[0\]'.*longer than the 200"):
        load_pack(d, "user")


@pytest.mark.parametrize("field, pattern", [
    ("patterns[0]", "a" * 4_001),
    ("known_ranks", "(\\d+)" + "x" * 4_000),
    ("exclude[0]", "(" * 3_000 + ")" * 3_000),
])
def test_oversized_patterns_are_refused(tmp_path, field, pattern):
    text = CLEAN
    if field == "patterns[0]":
        text = text.replace("patterns: ['OSError", f"patterns: ['{pattern}', 'OSError")
    elif field == "known_ranks":
        text += f"known_ranks: '{pattern}'\n"
    else:
        text += f"exclude: ['{pattern}']\n"
    with pytest.raises(RuleError) as e:
        load_pack(pack(tmp_path, "p.yaml", text), "user")
    assert f"field '{field}'" in e.value.one_line() and "longer than the 4000" in e.value.one_line()


def test_template_nesting_is_checked_at_load(tmp_path):
    # 500 nested helper calls loaded and linted clean, then hit the recursion limit when a
    # diagnosis filled the remediation in; now the pack is refused when it loads
    deep = "size(" * 500 + "n" + ")" * 500
    text = CLEAN.replace("(?P<path>.+)", "(?P<path>.+) (?P<n>\\d+)").replace('summary: "Disk full writing {path}"', f'summary: "Disk full {{{deep}}}"')
    d = pack(tmp_path, "deep-template.yaml", text)
    assert_refused(d, tmp_path, "deep-template.yaml", "remediation.summary")


def test_a_template_at_the_nesting_limit_works_at_diagnosis(tmp_path):
    import json

    from slurmdoc.engine.template import MAX_DEPTH

    deep = "gcd(n, " * MAX_DEPTH + "n" + ")" * MAX_DEPTH
    text = textwrap.dedent(
        f"""\
        title: Frobnication failed
        category: python_exception
        role: cause
        priority: 100
        keywords: ["FrobnicateError"]
        patterns: ['FrobnicateError: gave up after (?P<n>\\d+) tries']
        remediation:
          summary: "Frobnication gave up after {{{deep}}} tries"
        examples:
          match: ["FrobnicateError: gave up after 7 tries"]
          no_match: ["hello"]
        """
    )
    d = pack(tmp_path, "deep-ok.yaml", text)
    assert load_pack(d, "user")
    log = tmp_path / "job.log"
    log.write_text("[rank2]: FrobnicateError: gave up after 2048 tries\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG")}
    env["XDG_CONFIG_HOME"] = str(ROOT / "tests" / "data" / "no-config-here")
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json", "-r", str(d), str(log)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    root = json.loads(r.stdout)["root_cause"]
    assert root["rule_id"] == "deep-ok" and root["remediation"].startswith("Frobnication gave up after 2048 tries"), root


@pytest.mark.parametrize("field", ["patterns[0]", "exclude[0]", "known_ranks"])
@pytest.mark.parametrize("pattern", ["(?:a{1000}){1000}", "x{4294967294}", "(?:(?:b{100}){100}){100}", "(?P<n>a)|(?P<n>b{900}){900}"])
def test_counted_repetitions_that_expand_past_the_bound_are_refused_fast(tmp_path, field, pattern):
    # `regex` takes seconds and hundreds of MB to compile a million-piece expansion (and
    # never finishes a four-billion one); the pattern is measured before it is compiled
    text = CLEAN
    if field == "patterns[0]":
        text = text.replace("patterns: ['OSError", f"patterns: ['{pattern}', 'OSError")
    elif field == "known_ranks":
        text += f"known_ranks: '(\\d+){pattern}'\n"
    else:
        text += f"exclude: ['{pattern}']\n"
    t = time.perf_counter()
    with pytest.raises(RuleError) as e:
        load_pack(pack(tmp_path, "rep.yaml", text), "user")
    assert time.perf_counter() - t < 30  # sanity cap: measuring takes milliseconds
    msg = e.value.one_line()
    assert f"field '{field}'" in msg and "counted repetitions" in msg, msg


def test_the_bundled_pack_passes_every_load_check_a_user_pack_gets():
    # released packs skip the compile-time checks at start-up; they must pass them here
    rules = load_pack(bundled_rules_dir(), "bundled", released=False)
    assert len(rules) >= 10
    for r in rules:
        for p in list(r.spec.patterns) + list(r.spec.exclude) + ([r.spec.known_ranks] if r.spec.known_ranks else []):
            assert loader_mod.repeat_weight(p) <= loader_mod.MAX_PATTERN_WEIGHT and loader_mod.group_depth(p) <= loader_mod.MAX_PATTERN_DEPTH


CONDITIONAL = GOOD.replace(
    'fix: ["Free space on {path}", "Check {missing_group_free_line}"]',
    'fix:\n    - "Free space on {path}"\n    - {if: [rank_zero, one_rank], text: "Only rank 0 wrote it"}\n    - {unless: path, text: "No path"}',
)


def test_conditional_fix_lines_load_with_facts_and_groups(tmp_path):
    rules = load_pack(pack(tmp_path, "disk-full.yaml", CONDITIONAL), "user")
    fix = rules[0].spec.remediation.fix
    assert fix[1].if_ == ["rank_zero", "one_rank"] and fix[2].unless == ["path"]


@pytest.mark.parametrize(
    "line, field, words",
    [
        ('{if: rank_is_zero, text: "x"}', "remediation.fix[1].if", ["unknown fact 'rank_is_zero'", "did you mean 'rank_zero'"]),
        ('{unless: [one_rank, pth], text: "x"}', "remediation.fix[1].unless", ["unknown fact 'pth'"]),
        ('{text: "x"}', "remediation.fix[1]", ["needs `if` or `unless`"]),
        ('{iff: one_rank, text: "x"}', "remediation.fix", ["unknown field 'iff'"]),
        ('{if: one_rank}', "remediation.fix", ["needs its text"]),
        ('{if: one_rank, text: "Only {rnk}"}', "remediation.fix[1]", ["'{rnk}' names no capture group"]),
        ('{if: one_rank=1, text: "x"}', "remediation.fix[1].if", ["'one_rank=1'", "needs one (a yes/no fact is named alone)"]),
        ('{unless: path=, text: "x"}', "remediation.fix[1].unless", ["'path='"]),
        ('{if: pth=3, text: "x"}', "remediation.fix[1].if", ["unknown fact 'pth'"]),
    ],
)
def test_a_bad_conditional_fix_line_is_a_pack_error_naming_file_rule_and_field(tmp_path, line, field, words):
    text = GOOD.replace('fix: ["Free space on {path}", "Check {missing_group_free_line}"]', f'fix:\n    - "Free space"\n    - {line}')
    with pytest.raises(RuleError) as e:
        load_pack(pack(tmp_path, "disk-full.yaml", text), "user")
    msg = e.value.one_line()
    assert e.value.exit_code == 3
    assert "disk-full.yaml" in msg and "rule 'disk-full'" in msg and field in msg, msg
    for w in words:
        assert w in msg, msg


def test_yaml_parsed_once_is_kept_beside_the_bytecode_and_refused_when_it_does_not_fit(tmp_path, monkeypatch):
    """A YAML text parsed in one run is taken from the cache in the next (no parse, no PyYAML);
    another text, a damaged cache, or a run that may not write bytecode parses again."""
    import sys as _sys

    from slurmdoc.engine import loader as lm

    cache = tmp_path / "__pycache__" / "x-parsed.marshal"
    calls: list[str] = []

    def parse(text):
        calls.append(text)
        return {"markers": [{"id": text.strip(), "n": 1}]}

    def refuse(text):
        raise AssertionError("parsed again")

    monkeypatch.setattr(_sys, "dont_write_bytecode", False)
    first = lm.parsed_yaml("a: 1\n", cache, parse)
    assert lm.parsed_yaml("a: 1\n", cache, refuse) == first and calls == ["a: 1\n"]
    assert lm.parsed_yaml("b: 2\n", cache, parse) == parse("b: 2\n")  # another text: parsed
    cache.write_bytes(b"\x00junk")
    assert lm.parsed_yaml("a: 1\n", cache, parse) == first and calls.count("a: 1\n") == 2
    monkeypatch.setattr(_sys, "dont_write_bytecode", True)
    cache.unlink()
    lm.parsed_yaml("a: 1\n", cache, parse)
    assert not cache.exists()


def test_raised_in_is_for_traceback_rules_and_its_regexes_are_checked(tmp_path):
    # where an exception was raised exists only in a traceback: a line rule naming frames is
    # a load error naming the field, as is a frame regex that does not compile
    body = GOOD.replace(', "Check {missing_group_free_line}"', "")
    body = body.replace('keywords: ["No space left"]', 'keywords: ["No space left"]\nraised_in: [\'{rx}\']\nscope: {scope}')
    with pytest.raises(RuleError, match="raised_in.*scope: traceback"):
        load_pack(pack(tmp_path, "a.yaml", body.replace("{rx}", "storage\\.py").replace("{scope}", "any")), "t")
    with pytest.raises(RuleError, match=r"raised_in\[0\].*invalid regex"):
        load_pack(pack(tmp_path, "a.yaml", body.replace("{rx}", "storage(").replace("{scope}", "traceback")), "t")
    rules = load_pack(pack(tmp_path, "a.yaml", body.replace("{rx}", "storage\\.py").replace("{scope}", "traceback")), "t")
    assert [rx.pattern for rx in rules[0].raised_in] == ["storage\\.py"]


# ---- signals a rule claims, and rules that report signals ----------------------------------

def _claiming(signals: str, category: str = "killed") -> str:
    return GOOD.replace(', "Check {missing_group_free_line}"', "").replace(
        "category: io_error", f"category: {category}\nsignals: {signals}")


@pytest.mark.parametrize("signals", ["[SIGNOTHING]", "[0]", "[200]", "[Killed]"])
def test_a_claimed_signal_must_be_a_signal_name_or_number(tmp_path, signals):
    d = pack(tmp_path, "a.yaml", _claiming(signals))
    with pytest.raises(RuleError, match="signals"):
        load_pack(d, "user")


def test_a_signal_is_claimed_by_one_rule_at_most(tmp_path):
    # a user rule claiming a signal the bundled pack already gives to another rule would make
    # the signal's reports depend on the order the pack was read in
    d = pack(tmp_path, "my-kill.yaml", _claiming("[9]"))
    with pytest.raises(RuleError, match="also claimed"):
        load_rulebook([str(d)])


def test_a_user_rule_replacing_the_claimer_takes_its_claim(tmp_path):
    d = pack(tmp_path, "killed-sigkill.yaml", _claiming("[SIGKILL]"))
    book = load_rulebook([str(d)])
    assert book.claimer(9) is book.by_id("killed-sigkill") and book.claimer(9).pack == str(d)


def test_a_signal_reporter_must_capture_the_signal(tmp_path):
    text = GOOD.replace(', "Check {missing_group_free_line}"', "").replace("category: io_error", "category: unknown\nreports_signal: true")
    d = pack(tmp_path, "a.yaml", text)
    with pytest.raises(RuleError, match="sig"):
        load_pack(d, "user")
