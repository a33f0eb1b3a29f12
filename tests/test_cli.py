"""The command line: exit codes, formats, one-line errors, stdout vs stderr."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "contract_schema.json").read_text())
EXAMPLE = ROOT / "fixtures" / "torchrun" / "oom_sim" / "job.log"

TB = "\n".join(
    [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 3, in <module>',
        "[rank1]: ModuleNotFoundError: No module named 'apex'",
        "[rank0]: iteration 1",
    ]
)


def run(*args, stdin=None, env=None):
    e = dict(os.environ)
    for var in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG"):
        e.pop(var, None)
    e["XDG_CONFIG_HOME"] = str(ROOT / "tests" / "data" / "no-config-here")  # no user config leaks in
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "slurmdoc", *args], input=stdin, capture_output=True, env=e, timeout=120)


def test_failure_exit_1_and_json_matches_the_contract(write):
    p = write("job.log", TB)
    r = run("diagnose", "--format", "json", p)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["root_cause"]["category"] == "import_error" and doc["root_cause"]["rank"] == 1
    assert doc["root_cause"]["source"] == f"{p}:3"
    assert r.stderr == b""


def test_no_failure_exit_0_and_json_matches_the_contract(write):
    r = run("diagnose", "-f", "json", write("ok.log", "[rank0]: iteration 1\n"))
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["status"] == "no_failure" and doc["root_cause"] is None


def test_text_report_is_plain_when_piped(write):
    r = run("diagnose", write("job.log", TB))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "\x1b[" not in out
    assert "ROOT CAUSE" in out and "rank 1" in out and "ModuleNotFoundError" in out and "uv sync" in out


def test_markdown(write):
    r = run("diagnose", "-f", "markdown", write("job.log", TB))
    out = r.stdout.decode()
    assert out.startswith("# slurmdoc diagnosis") and "`import_error`" in out and "```" in out


def test_stdin_and_gzip_stdin(write):
    assert run("diagnose", "-f", "json", "-", stdin=TB.encode()).returncode == 1
    r = run("diagnose", "-f", "json", "-", stdin=gzip.compress(TB.encode()))
    assert r.returncode == 1 and json.loads(r.stdout)["root_cause"]["rank"] == 1


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda w, t: str(t / "missing.log"), "no such file"),
        (lambda w, t: w("empty.log", ""), "empty"),
        (lambda w, t: w("bin.log", bytes(range(256)) * 64), "binary"),
        (lambda w, t: (t / "d").mkdir() or str(t / "d"), "no log files"),
        (lambda w, t: w("cut.log.gz", gzip.compress(b"x" * 100000)[:12]), "gzip"),  # nothing decompresses
    ],
)
def test_bad_input_is_one_line_and_exit_2(write, tmp_path, make, needle):
    r = run("diagnose", make(write, tmp_path))
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith("slurmdoc: error:") and needle in err
    assert "Traceback" not in err and r.stdout == b""


def test_readable_files_are_diagnosed_when_one_is_damaged(write):
    good = write("good.log", TB)
    bad = write("bad.log", bytes(range(256)) * 64)
    r = run("diagnose", "-f", "json", good, bad)
    assert r.returncode == 1
    assert "skipped, binary" in r.stderr.decode()
    assert json.loads(r.stdout)["warnings"]


def test_invalid_rule_pack_exit_3(write, tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "x.yaml").write_text("title: t\ncategory: nope\n")
    r = run("diagnose", "--rules", str(d), write("job.log", TB))
    err = r.stderr.decode()
    assert r.returncode == 3 and "x.yaml" in err and "rule 'x'" in err and err.count("\n") == 1


def test_a_rule_python_warns_of_leaves_stderr_quiet_and_lint_says_it(write, tmp_path):
    # `[[` in a class: Python's regex engines warn at every compile (a future Python may read a
    # nested set); a diagnosis says nothing of it on stderr, lint says it once per pattern
    d = tmp_path / "rules"
    d.mkdir()
    (d / "bracket.yaml").write_text(
        "title: t\ncategory: python_exception\nrole: cause\nkeywords: [boom]\npatterns:\n  - '[[x]boom'\n"
        "remediation:\n  summary: s\nexamples:\n  match: ['[boom']\n  no_match: ['boom']\n"
    )
    r = run("diagnose", "--format", "json", "--rules", str(d), write("job.log", "[boom\n"))
    assert r.returncode == 1 and json.loads(r.stdout)["root_cause"]["rule_id"] == "bracket"
    assert r.stderr.decode() == ""
    r = run("rules", "lint", str(d))
    out = r.stdout.decode() + r.stderr.decode()
    assert out.count("Possible nested set") == 1 and "patterns[0]" in out


def test_usage_error_exit_2():
    assert run("diagnose").returncode == 2
    assert run("diagnose", "--format", "xml", "x").returncode == 2


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith(b"slurmdoc ")


def test_bundled_example_runs():
    r = run("diagnose", str(EXAMPLE))
    assert r.returncode == 1
    assert b"ROOT CAUSE" in r.stdout


# ---- user rules: where they come from ---------------------------------------------------

USER_RULE = """\
title: Tokenizer and model disagree
category: config_error
role: cause
priority: 70
keywords: ["does not match model embedding size"]
patterns: ['tokenizer vocab size \\((?P<vocab>\\d+)\\) does not match model embedding size']
remediation:
  summary: "{ranks} loaded a tokenizer with {vocab} tokens"
examples:
  match: ["ValueError: tokenizer vocab size (32000) does not match model embedding size (32256)"]
  no_match: ["vocab size 32000"]
"""
VOCAB_LOG = "[rank3]: ValueError: tokenizer vocab size (32000) does not match model embedding size (32256)\n"


def user_pack(tmp_path, name="mine", rule_id="vocab-mismatch", text=USER_RULE):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / f"{rule_id}.yaml").write_text(text)
    return d


def rule_of(r):
    """The root cause's rule id, or None when no failure was found."""
    assert r.returncode in (0, 1), r.stderr
    root = json.loads(r.stdout)["root_cause"]
    assert (root is None) == (r.returncode == 0)
    return root and root["rule_id"]


def test_user_rules_from_flag_environment_and_config_file(write, tmp_path):
    log = write("job.log", VOCAB_LOG)
    mine = user_pack(tmp_path)
    # a bare ValueError line: only the bundled generic fallbacks know it
    assert rule_of(run("diagnose", "-f", "json", log)) not in (None, "vocab-mismatch")
    assert rule_of(run("diagnose", "-f", "json", "--rules", str(mine), log)) == "vocab-mismatch"
    assert rule_of(run("diagnose", "-f", "json", log, env={"SLURMDOC_RULES": str(mine)})) == "vocab-mismatch"
    conf = tmp_path / "xdg" / "slurmdoc" / "config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text('rules = ["../../mine"]\n')
    assert rule_of(run("diagnose", "-f", "json", log, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})) == "vocab-mismatch"
    # a set (even empty) SLURMDOC_RULES replaces the config file's list
    assert rule_of(run("diagnose", "-f", "json", log, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "SLURMDOC_RULES": ""})) not in (None, "vocab-mismatch")


def test_rule_dir_named_by_the_environment_is_validated_exit_3(write, tmp_path):
    bad = user_pack(tmp_path, text=USER_RULE.replace("keywords:", "keyword:"))
    r = run("diagnose", write("job.log", VOCAB_LOG), env={"SLURMDOC_RULES": str(bad)})
    err = r.stderr.decode()
    assert r.returncode == 3 and err.count("\n") == 1, err
    assert "vocab-mismatch.yaml:5: rule 'vocab-mismatch': field 'keyword': unknown field; did you mean 'keywords'?" in err


def test_missing_rule_dir_says_which_setting_named_it(write, tmp_path):
    r = run("diagnose", write("job.log", VOCAB_LOG), env={"SLURMDOC_RULES": str(tmp_path / "gone")})
    assert r.returncode == 3 and b"gone: rule directory does not exist (named by SLURMDOC_RULES)" in r.stderr
    r = run("rules", "list", "--rules", str(tmp_path / "gone"))
    assert r.returncode == 3 and b"(named by --rules)" in r.stderr


def test_bad_config_file_is_one_line_exit_2(write, tmp_path):
    conf = tmp_path / "c.toml"
    conf.write_text("rulez = []\n")
    r = run("diagnose", write("job.log", VOCAB_LOG), env={"SLURMDOC_CONFIG": str(conf)})
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "did you mean 'rules'" in err and "Traceback" not in err


HOSTILE_RULE = r"""
title: Bad options
category: config_error
role: cause
keywords: ["bad options:"]
patterns: ['bad options: (?P<words>(?:\w|\w\w)+)$']
remediation:
  summary: "{ranks} got bad options {words}"
examples:
  match: ["bad options: foo"]
  no_match: ["good options: foo"]
"""


def test_catastrophic_user_rule_cannot_hang_a_run(write, tmp_path):
    # (?:\w|\w\w)+$ backtracks exponentially on a long word followed by a non-word character;
    # every search is time-bounded and the rule is dropped after a few timeouts, so 2000
    # hostile lines cost about a second instead of ten minutes
    mine = user_pack(tmp_path, rule_id="trailing-words", text=HOSTILE_RULE)
    hostile = "".join(f"[rank{i % 8}]: bad options: {'a' * 48}!\n" for i in range(2000)) + TB + "\n"
    log = write("hostile.log", hostile)
    import time

    t = time.monotonic()
    r = run("diagnose", "-f", "json", "--rules", str(mine), log)
    took = time.monotonic() - t
    err = r.stderr.decode()
    assert r.returncode == 1 and json.loads(r.stdout)["root_cause"]["category"] == "import_error"
    assert took < 30, took
    assert "rule trailing-words" in err and "ran past" in err and "not used for the rest of the input" in err
    assert err.count("warning: rule trailing-words") == 2  # one when it first times out, one when dropped


# ---- rules commands ---------------------------------------------------------------------

BROKEN = ROOT / "tests" / "data" / "broken_rules"


def test_rules_test_and_lint_pass_on_the_bundled_pack():
    r = run("rules", "test")
    assert r.returncode == 0, r.stdout.decode()
    assert b" 0 failed" in r.stdout
    r = run("rules", "lint", "--strict")
    assert r.returncode == 0, r.stdout.decode()
    assert r.stdout.decode().endswith("0 errors, 0 warnings\n")


def test_rules_test_and_lint_fail_on_the_broken_pack():
    r = run("rules", "test", str(BROKEN))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "✗ stolen-example" in out and "not classified as stolen-example (got: cuda-oom)" in out
    assert "✗ cannot load" in out and "did you mean 'keywords'" in out
    r = run("rules", "lint", str(BROKEN))
    out = r.stdout.decode()
    assert r.returncode == 1 and "4 errors, 2 warnings" in out
    assert "catastrophic.yaml: rule 'catastrophic': field 'patterns[0]': ambiguous repetition" in out
    assert r.stderr == b""


def test_rules_test_missing_dir_is_usage_error(tmp_path):
    r = run("rules", "test", str(tmp_path / "nope"))
    assert r.returncode == 2 and b"no such rule directory" in r.stderr


def test_rules_list_shows_where_each_rule_comes_from(tmp_path):
    mine = user_pack(tmp_path)
    r = run("rules", "list", env={"SLURMDOC_RULES": str(mine)})
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines[0].split() == ["ID", "CATEGORY", "ROLE", "PRIO", "PACK"]
    row = next(line for line in lines if line.startswith("vocab-mismatch "))
    assert row.split()[1:] == ["config_error", "cause", "70", str(mine)]
    assert any(line.startswith("cuda-oom ") and line.endswith("bundled") for line in lines)


def test_rules_show_and_unknown_id():
    r = run("rules", "show", "nccl-watchdog-timeout")
    assert r.returncode == 0 and b"remediation (template" in r.stdout
    r = run("rules", "show", "nccl-watchdog")
    assert r.returncode == 2 and b"did you mean nccl-watchdog-timeout" in r.stderr and r.stderr.count(b"\n") == 1


def test_rules_try_streams_stdin_and_exits_1_on_no_match():
    r = run("rules", "try", "import-error", "-", stdin=TB.encode())
    out = r.stdout.decode()
    assert r.returncode == 0 and "<stdin>:3  rank 1  traceback" in out and "No module named 'apex'" in out
    r = run("rules", "try", "cuda-oom", "-", stdin=TB.encode())
    assert r.returncode == 1 and b"cuda-oom: 0 matches" in r.stdout

def test_exact_reader_gives_the_same_json():
    log = str(EXAMPLE)
    fast = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json", log], capture_output=True, text=True)
    exact = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "--exact", "-f", "json", log], capture_output=True, text=True)
    assert fast.returncode == exact.returncode == 1
    assert fast.stdout == exact.stdout and '"cuda_oom"' in fast.stdout


# ---- conventions: -h, -V, --output, --color, stdin, the picture, --full ------------------

def test_short_help_and_version_flags():
    h = run("-h")
    assert h.returncode == 0 and b"diagnose" in h.stdout and b"--install-completion" in h.stdout
    commands = h.stdout.split(b"Commands:")[1]
    assert b"..." not in commands, "no command's help is cut off"
    assert run("diagnose", "-h").returncode == 0
    v = run("-V")
    assert v.returncode == 0 and v.stdout.startswith(b"slurmdoc ")


def test_output_writes_the_report_to_a_file(tmp_path):
    out = tmp_path / "report.txt"
    r = run("diagnose", "--output", str(out), str(EXAMPLE))
    assert r.returncode == 1 and r.stdout == b""
    assert out.read_text().startswith("VERDICT  cuda_oom on rank 0")
    bad = run("diagnose", "--output", str(tmp_path / "no" / "such" / "dir.txt"), str(EXAMPLE))
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1 and b"Traceback" not in bad.stderr


@pytest.mark.parametrize("args,env,colored", [
    ([], {}, False),  # not a terminal
    (["--color", "always"], {}, True),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True),  # forcing wins
    (["--color", "always"], {"NO_COLOR": "1"}, True),
])
def test_color_auto_always_never_and_force_color(args, env, colored):
    r = run("diagnose", *args, str(EXAMPLE), env={"FORCE_COLOR": "", "NO_COLOR": "", **env})
    assert (b"\x1b[" in r.stdout) == colored


def test_diagnose_reads_a_piped_log_when_no_path_is_given(tmp_path):
    r = run("diagnose", "-f", "json", stdin=EXAMPLE.read_bytes())
    assert r.returncode == 1 and json.loads(r.stdout)["root_cause"]["category"] == "cuda_oom"
    with open(EXAMPLE, "rb") as fh:  # a redirected file too
        e = dict(os.environ, XDG_CONFIG_HOME=str(ROOT / "tests" / "data" / "no-config-here"))
        r2 = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json"], stdin=fh, capture_output=True, env=e, timeout=120)
    assert r2.returncode == 1
    with open(os.devnull, "rb") as fh:  # nothing piped: still a usage error
        r3 = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose"], stdin=fh, capture_output=True, env=e, timeout=120)
    assert r3.returncode == 2 and b"no log given" in r3.stderr


def test_the_picture_can_be_turned_off_and_full_shows_every_frame():
    case = ROOT / "fixtures" / "documented" / "cuda_oom_allocator"
    on = run("diagnose", "--width", "80", str(case)).stdout.decode()
    off = run("diagnose", "--width", "80", "--no-picture", str(case)).stdout.decode()
    assert "TIMELINE" in on and "TIMELINE" not in off
    full = run("diagnose", "--full", str(case)).stdout.decode()
    assert "torch/autograd/__init__.py" in full and "torch/autograd/__init__.py" not in on
    assert "library frame" in on and "library frame" not in full


def test_every_hint_names_an_option_that_exists():
    import re

    from slurmdoc import cli

    pkg = Path(cli.__file__).parent
    src = "".join(p.read_text() for p in [pkg / "cli.py", pkg / "errors.py", *(pkg / "report").glob("*.py")])
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", src))
    helps = b"".join(run(c, "-h").stdout for c in ("diagnose", "triage", "scan", "epilog")) + run("-h").stdout
    helps += b"".join(run("rules", c, "-h").stdout for c in ("list", "show", "test", "lint", "try"))
    assert {"--full", "--width", "--output"} <= named  # the hints the reports print are seen
    missing = sorted(o for o in named if o.encode() not in helps)
    assert not missing, missing


@pytest.mark.parametrize("args", [["--format", "x"], ["--skew", "-1"], ["--width", "abc"], ["--color", "maybe"], ["--width", "5"]])
def test_usage_errors_speak_without_validation_library_wording(args):
    r = run("diagnose", *args, str(EXAMPLE))
    assert r.returncode == 2
    assert b"Value error" not in r.stderr and b"Input should" not in r.stderr and b"pydantic" not in r.stderr.lower()
    assert b"Invalid value for" in r.stderr


# ---- start-up: what `diagnose` loads --------------------------------------------------------

# Modules of what a `diagnose` run of one log file does not do: the other report formats,
# the Slurm side (--job, triage, epilog), the flight-recorder dumps (--traces), rule
# authoring, the fleet scan (fleet.jobs too: one file is one job's log; a directory, a glob
# or several paths are looked at for logs of several jobs).
NOT_FOR_DIAGNOSE = (
    "slurmdoc.slurm.api", "slurmdoc.slurm.sacct", "slurmdoc.slurm.triage", "slurmdoc.slurm.epilog",
    "slurmdoc.slurm.locate", "slurmdoc.slurm.fuse", "slurmdoc.slurm.privsep", "slurmdoc.traces",
    "slurmdoc.diagnosis.recorder", "slurmdoc.engine.authoring", "slurmdoc.engine.selftest",
    "slurmdoc.report.html", "slurmdoc.report.markdown", "slurmdoc.report.triage", "slurmdoc.report.job",
    "slurmdoc.fleet",
)
NOT_FOR_FORMAT = {
    "json": ("slurmdoc.report.terminal", "slurmdoc.report.picture", "rich"),
    # the probe's stdout is not a terminal, and FORCE_COLOR is unset: no colour, so no rich
    # (report/styled.py writes what it would)
    "text": ("slurmdoc.report.json_format", "rich"),
}

START_UP_PROBE = """
import gc, io, json, sys
import slurmdoc.api
seen = []
real = slurmdoc.api.diagnose
def diagnose(*a, **kw):
    seen.append(gc.isenabled())
    return real(*a, **kw)
slurmdoc.api.diagnose = diagnose
import slurmdoc.cli as cli
import slurmdoc.__main__ as entry
left = []
def leave(code):  # the real one ends the process at once, this probe included
    left.append(code)
    raise SystemExit(code)
cli._leave = leave
early = []  # collections before the diagnosis began
gc.callbacks.append(lambda phase, info: phase == "start" and not seen and early.append(info["generation"]))
sys.argv = ["slurmdoc", "diagnose", "--format", sys.argv[1], sys.argv[2]]
out, sys.stdout = sys.stdout, io.StringIO()
try:
    entry.run()  # what `slurmdoc` and `python -m slurmdoc` run
except SystemExit as e:
    code = e.code
sys.stdout = out
import slurmdoc.slurm.models as sm
built = [c.__name__ for c in (sm.StepInfo, sm.AttemptRecord, sm.JobTriage, sm.TriageReport, sm.JobVerdict) if c.__pydantic_complete__]
print(json.dumps({"code": code, "left": left, "gc_on_during_work": seen, "start_up_collections": early, "modules": sorted(sys.modules), "slurm_models_built": built}))
"""


@pytest.mark.parametrize("fmt", ["json", "text"])
@pytest.mark.parametrize("log", [TB, "[rank0]: iteration 1\n[rank1]: iteration 1\n"], ids=["failed", "no_failure"])
def test_diagnose_loads_no_module_of_a_format_or_command_it_does_not_use(write, fmt, log):
    """Start-up: `diagnose` pays for the format asked for and nothing of the other commands
    (the Slurm side's models are imported, Diagnosis.job names one, but none is built); the
    collector, paused while the command starts (no collection), is on again for the diagnosis
    itself; once the report is out, the process ends at once with the verdict's exit code."""
    e = dict(os.environ, XDG_CONFIG_HOME=str(ROOT / "tests" / "data" / "no-config-here"))
    for var in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG", "FORCE_COLOR"):
        e.pop(var, None)
    r = subprocess.run([sys.executable, "-c", START_UP_PROBE, fmt, write("job.log", log)], capture_output=True, text=True, env=e, timeout=120)
    got = json.loads(r.stdout)
    assert got["code"] == (1 if "Traceback" in log else 0), r.stderr
    assert got["left"] == [got["code"]]
    assert got["gc_on_during_work"] == [True] and got["start_up_collections"] == []
    unwanted = NOT_FOR_DIAGNOSE + NOT_FOR_FORMAT[fmt]
    if not Path("/etc/slurmdoc/config.toml").exists():  # no config file: no TOML reader either
        unwanted += ("tomllib", "tomli")
    assert [m for m in got["modules"] if m.startswith(unwanted)] == []
    assert got["slurm_models_built"] == []
    assert ("slurmdoc.report.json_format" if fmt == "json" else "slurmdoc.report.terminal") in got["modules"]



EXIT_PROBE = """
import json, os, runpy, sys
out, leave = sys.argv[1], os._exit
def recorded(code):  # `diagnose` ends with os._exit once its report is out
    with open(out, "w") as f:  # the modules loaded from a file
        json.dump(sorted(m for m, mod in sys.modules.items() if m != "pydantic.plugin._loader" or hasattr(mod, "__file__")), f)
    leave(code)
os._exit = recorded
sys.argv = ["slurmdoc", *sys.argv[2:]]
runpy.run_module("slurmdoc", run_name="__main__")
"""


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_diagnose_never_loads_pydantic_plugin_loader_while_plugins_are_off(write, tmp_path, fmt):
    """`python -m slurmdoc diagnose`, run as it is: pydantic's plugins are off (the CLI's
    default), so neither pydantic's plugin loader nor the importlib.metadata it would import
    (about 15 ms of start-up) is loaded; set to name one plugin only, pydantic looks them up."""
    e = dict(os.environ, XDG_CONFIG_HOME=str(ROOT / "tests" / "data" / "no-config-here"))
    for var in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG", "PYDANTIC_DISABLE_PLUGINS"):
        e.pop(var, None)
    log = write("job.log", TB)
    loaded = {}
    for plugins in ("default", "one-off"):
        if plugins == "one-off":
            e["PYDANTIC_DISABLE_PLUGINS"] = "some-plugin"
        out = tmp_path / f"{plugins}.json"
        r = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(out), "diagnose", "--format", fmt, log], capture_output=True, text=True, env=e, timeout=120)
        assert r.returncode == 1, r.stderr
        loaded[plugins] = json.loads(out.read_text())
    assert [m for m in loaded["default"] if m.startswith(("importlib.metadata", "pydantic.plugin._loader"))] == []
    assert "importlib.metadata" in loaded["one-off"] and "pydantic.plugin._loader" in loaded["one-off"]


PLUGIN_PROBE = """
import json, os, sys
import slurmdoc.cli as cli
cli._defer_plugin_loader()
import pydantic

class M(pydantic.BaseModel):
    x: int

M(x=1)
deferred = "importlib.metadata" not in sys.modules
from pydantic.plugin import _loader
answers = {}
for value in ("__all__", "1", "true", "some-plugin", None):
    if value is None:
        os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
    else:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = value
    answers[str(value)] = sorted(map(repr, _loader.get_plugins()))
print(json.dumps({"deferred": deferred, "answers": answers, "group": _loader.PYDANTIC_ENTRY_POINT_GROUP,
                  "real_loaded": "importlib.metadata" in sys.modules}))
"""


def test_pydantic_plugins_answer_as_pydantic_would_with_the_loader_deferred():
    """The stand-in for pydantic's plugin loader answers every question as pydantic's own
    does (plugins off in each spelling, one plugin off, plugins on, the loader's other
    names), and keeps the loader's imports out until something but "plugins off" is asked."""
    e = dict(os.environ, PYDANTIC_DISABLE_PLUGINS="__all__")

    def probe(code):
        return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120, check=True).stdout)

    got, want = probe(PLUGIN_PROBE), probe(PLUGIN_PROBE.replace("cli._defer_plugin_loader()", ""))
    assert got["deferred"] is True and want["deferred"] is False
    assert (got["answers"], got["group"], got["real_loaded"]) == (want["answers"], want["group"], want["real_loaded"])
