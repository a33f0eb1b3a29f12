"""One verdict from a job's log and its accounting record, on real logs and sacct output saved
from the local Slurm (tests/data/sacct/; the job scripts are tests/slurm_jobs/)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from slurmdoc.api import diagnose, diagnose_job
from slurmdoc.cli import app
from slurmdoc.slurm.fuse import fuse
from slurmdoc.slurm.triage import triage_job
from slurmdoc.slurm.sacct import read_sacct_file

DATA = Path(__file__).parent / "data" / "sacct"
JOBS = dict(line.split("=") for line in (DATA / "jobs.txt").read_text().split())
SCHEMA = json.loads((Path(__file__).parent / "contract_schema.json").read_text())

# name -> (category, rank, a contradiction expected?)
TRUTH = {
    "exit1": ("unknown", 1, False),
    "sigkill": ("killed", 1, False),
    "segfault": ("segfault", 1, False),
    "timeout": ("time_limit", None, False),
    "cancel": ("cancelled", None, False),
    "pyranks": ("import_error", 2, True),  # sacct: step COMPLETED, only the batch script failed
    "killonbad": ("import_error", 2, True),  # sacct: 0:15, the log: rank 2's import error
    "swallowed": ("import_error", 2, True),  # sacct: COMPLETED 0:0
}


def log_of(name: str) -> str:
    return str(next(DATA.glob(f"{name}.*.out")))


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_saved_jobs(name):
    cat, rank, contra = TRUTH[name]
    d = diagnose_job(JOBS[name], logs=[log_of(name)], sacct_file=str(DATA / f"{name}.psv"))
    j = d.job
    assert (j.status, j.category, j.rank) == ("failed", cat, rank)
    assert bool(j.contradictions) == contra
    assert j.agrees is (not contra)
    assert d.status == "failed"
    jsonschema.validate(json.loads(d.model_dump_json()), SCHEMA)


def test_healthy_job():
    d = diagnose_job(JOBS["ok"], logs=[log_of("ok")], sacct_file=str(DATA / "ok.psv"))
    assert d.job.status == "no_failure" and d.job.category is None and d.status == "no_failure"


def test_accounting_failure_with_a_clean_log_is_a_contradiction():
    acct = triage_job(read_sacct_file(str(DATA / "exit1.psv")))
    clean = diagnose([log_of("ok")])
    v = fuse(JOBS["exit1"], clean, acct)
    assert v.status == "failed" and v.category == "unknown" and v.contradictions
    # a SIGKILL that left no trace is no contradiction: it is what the OOM killer looks like
    acct = triage_job(read_sacct_file(str(DATA / "sigkill.psv")))
    v = fuse(JOBS["sigkill"], clean, acct)
    assert v.category == "killed" and not v.contradictions and v.notes


def test_log_failure_before_a_time_limit():
    acct = triage_job(read_sacct_file(str(DATA / "timeout.psv")))
    v = fuse(JOBS["timeout"], diagnose([log_of("pyranks")]), acct)
    assert v.category == "import_error" and v.rank == 2
    assert any("hung after the failure" in c for c in v.contradictions)


def test_one_half_only():
    acct = triage_job(read_sacct_file(str(DATA / "segfault.psv")))
    v = fuse("4", None, acct, log_note="the job's log /x/slurm-4.out does not exist")
    assert v.category == "segfault" and "accounting only" in v.verdict and v.agrees is None
    v = fuse("4", diagnose([log_of("segfault")]), None)
    assert v.category == "segfault" and "log only" in v.verdict


runner = CliRunner()


def test_cli_diagnose_job():
    r = runner.invoke(app, ["diagnose", "--job", JOBS["killonbad"], "--log", log_of("killonbad"),
                            "--sacct-file", str(DATA / "killonbad.psv")])
    assert r.exit_code == 1
    assert r.stdout.startswith("JOB VERDICT") and "CONTRADICTION" in r.stdout and "ROOT CAUSE" in r.stdout
    r = runner.invoke(app, ["diagnose", log_of("swallowed"), "--job", JOBS["swallowed"],
                            "--sacct-file", str(DATA / "swallowed.psv"), "-f", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["job"]["accounting"]["state"] == "COMPLETED" and doc["job"]["contradictions"]
    r = runner.invoke(app, ["diagnose", "--job", JOBS["sigkill"], "--log", log_of("sigkill"),
                            "--sacct-file", str(DATA / "sigkill.psv"), "-f", "markdown"])
    assert r.exit_code == 1 and r.stdout.startswith(f"# slurmdoc: job {JOBS['sigkill']}")


def test_cli_diagnose_job_errors(tmp_path):
    r = runner.invoke(app, ["diagnose", "--log", "x.log"])
    assert r.exit_code == 2 and "--job" in r.stderr
    r = runner.invoke(app, ["diagnose"])
    assert r.exit_code == 2 and "no log given" in r.stderr
    r = runner.invoke(app, ["diagnose", "--job", "555555", "--sacct-file", str(DATA / "all.psv"),
                            "--log", str(tmp_path / "missing.out")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "555555" in r.stderr
    r = runner.invoke(app, ["diagnose", "--job", "abc", "--sacct-file", str(DATA / "all.psv")])
    assert r.exit_code == 2 and "not a Slurm job id" in r.stderr
