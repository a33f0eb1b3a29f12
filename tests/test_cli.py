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
    e.pop("SLURMDOC_DEBUG", None)
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
        (lambda w, t: w("cut.log.gz", gzip.compress(b"x" * 100000)[:30]), "gzip"),
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
