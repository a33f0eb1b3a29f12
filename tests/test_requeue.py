"""slurm/requeue.py: a requeued job's attempts in `sacct -D` output are kept apart; triage judges
the last attempt and shows the others as its history (both -P and --json forms)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slurmdoc.slurm.requeue import split_attempts
from slurmdoc.slurm.sacct import parse_json, parse_psv, read_sacct_file
from slurmdoc.slurm.triage import triage_rows

ROOT = Path(__file__).resolve().parent.parent
HEAD = "JobID|JobIDRaw|JobName|State|ExitCode|DerivedExitCode|Elapsed|Timelimit|Start|End|NodeList"


def psv(*rows: str):
    return parse_psv([HEAD, *rows])


# Hand-written `sacct -P -D` samples, each labelled with the verdict on its last attempt.
SAMPLES = {
    # preempted, then a node failed, then the third run completed: the job is fine
    "preempted-then-ok": (psv(
        "7|7|train|PREEMPTED|0:15|0:0|01:00:00|04:00:00|2026-01-02T00:00:00|2026-01-02T01:00:00|g[1-2]",
        "7.batch|7.batch|batch|CANCELLED|0:15||01:00:00||2026-01-02T00:00:00|2026-01-02T01:00:00|g1",
        "7.0|7.0|python|CANCELLED|0:15||01:00:00||2026-01-02T00:00:01|2026-01-02T01:00:00|g[1-2]",
        "7|7|train|NODE_FAIL|0:0|0:0|00:10:00|04:00:00|2026-01-02T02:00:00|2026-01-02T02:10:00|g[3-4]",
        "7.0|7.0|python|CANCELLED|0:9||00:10:00||2026-01-02T02:00:01|2026-01-02T02:10:00|g[3-4]",
        "7|7|train|COMPLETED|0:0|0:0|02:00:00|04:00:00|2026-01-02T03:00:00|2026-01-02T05:00:00|g[5-6]",
        "7.batch|7.batch|batch|COMPLETED|0:0||02:00:00||2026-01-02T03:00:00|2026-01-02T05:00:00|g5",
        "7.0|7.0|python|COMPLETED|0:0||02:00:00||2026-01-02T03:00:01|2026-01-02T05:00:00|g[5-6]",
    ), {"status": "ok", "category": None, "states": ["PREEMPTED", "NODE_FAIL", "COMPLETED"]}),
    # requeued after a node failure, then the last run hit its time limit
    "node-fail-then-timeout": (psv(
        "8|8|train|NODE_FAIL|0:0|0:0|00:05:00|01:00:00|2026-01-02T00:00:00|2026-01-02T00:05:00|g1",
        "8.0|8.0|python|CANCELLED|0:9||00:05:00||2026-01-02T00:00:01|2026-01-02T00:05:00|g1",
        "8|8|train|TIMEOUT|0:0|0:0|01:00:00|01:00:00|2026-01-02T01:00:00|2026-01-02T02:00:00|g2",
        "8.batch|8.batch|batch|CANCELLED|0:15||01:00:00||2026-01-02T01:00:00|2026-01-02T02:00:00|g2",
        "8.0|8.0|python|CANCELLED|0:15||01:00:00||2026-01-02T01:00:01|2026-01-02T02:00:00|g2",
    ), {"status": "failed", "category": "time_limit", "states": ["NODE_FAIL", "TIMEOUT"]}),
    # listed newest first: start times put the attempts in order
    "listed-newest-first": (psv(
        "9|9|train|FAILED|1:0|1:0|00:01:00|01:00:00|2026-01-03T00:00:00|2026-01-03T00:01:00|g2",
        "9.0|9.0|python|FAILED|1:0||00:01:00||2026-01-03T00:00:01|2026-01-03T00:01:00|g2",
        "9|9|train|REQUEUED|0:0|0:0|00:01:00|01:00:00|2026-01-02T00:00:00|2026-01-02T00:01:00|g1",
        "9.0|9.0|python|CANCELLED|0:15||00:01:00||2026-01-02T00:00:01|2026-01-02T00:01:00|g1",
    ), {"status": "failed", "step": "9.0 FAILED 1:0", "states": ["REQUEUED", "FAILED"]}),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_hand_written_samples(name):
    rows, want = SAMPLES[name]
    (job,) = triage_rows(rows)
    assert job.status == want["status"]
    if "category" in want:
        assert job.category == want["category"]
    if "step" in want:
        s = job.first_failed_step
        assert f"{s.id} {s.state} {s.exit_code}" == want["step"]
    assert [a.state for a in job.attempts] == want["states"]
    assert [a.index for a in job.attempts] == list(range(len(want["states"])))
    assert any(n.startswith(f"judged the last of {len(want['states'])} attempts") for n in job.notes)


@pytest.mark.parametrize("case", ["sbatch_requeue_then_oom", "sbatch_requeue_twice_fail"])
@pytest.mark.parametrize("form", ["sacct_p", "sacct_json"])
def test_real_requeued_jobs_judge_the_last_attempt(case, form):
    d = ROOT / "fixtures" / "slurm" / case
    truth = yaml.safe_load((d / "truth.yaml").read_text())
    (job,) = triage_rows(read_sacct_file(str(d / truth["slurm_files"][form])))
    acct = truth["accounting"]
    assert len(job.attempts) == acct["attempt_rows"] == 2
    assert job.state == acct["job_state"]
    step = job.first_failed_step
    want = acct["steps"][step.id]
    # Slurm 22.05's --json leaves non-zero exit statuses out: the state still has to be the last attempt's
    if form == "sacct_p":
        assert f"{step.state} {step.exit_code}" == want
    else:
        assert step.state == want.split()[0]
    assert {s.id for s in job.steps if "." in s.id} == set(acct["steps"])  # the last attempt's steps only
    assert job.attempts[0].state == "REQUEUED" and job.attempts[-1].state == acct["job_state"]


def test_json_form_hand_written():
    doc = {"jobs": [
        {"job_id": 5, "name": "t", "state": {"current": "PREEMPTED"}, "time": {"start": 100, "end": 200, "elapsed": 100},
         "exit_code": {"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 15}},
         "steps": [{"step": {"id": "batch", "name": "batch"}, "state": "CANCELLED",
                    "exit_code": {"return_code": 0, "signal": {"signal_id": 15}}}]},
        {"job_id": 5, "name": "t", "state": {"current": "OUT_OF_MEMORY"}, "time": {"start": 300, "end": 400, "elapsed": 100},
         "exit_code": {"return_code": 0, "signal": {"signal_id": 9}},
         "steps": [{"step": {"id": 0, "name": "python"}, "state": "OUT_OF_MEMORY",
                    "exit_code": {"return_code": 0, "signal": {"signal_id": 9}}}]},
    ]}
    (job,) = triage_rows(parse_json(json.dumps(doc)))
    assert job.category == "host_oom" and job.state == "OUT_OF_MEMORY"
    assert [a.state for a in job.attempts] == ["PREEMPTED", "OUT_OF_MEMORY"]
    assert job.attempts[0].steps == ("5.batch CANCELLED 0:15",)


def test_one_attempt_and_het_components_are_not_split():
    rows = read_sacct_file(str(ROOT / "tests" / "data" / "sacct" / "hetjob.psv"))
    assert len(split_attempts(rows)) == 1
    (job,) = triage_rows(rows)
    assert job.attempts == () and len(job.components) == 2
    (one,) = triage_rows(psv("3|3|x|FAILED|1:0|0:0|00:00:01|00:01:00|2026-01-02T00:00:00|2026-01-02T00:00:01|n1"))
    assert one.attempts == ()


def test_json_report_carries_the_history():
    from slurmdoc.api import triage

    rep = triage([], sacct_file=str(ROOT / "fixtures" / "slurm" / "sbatch_requeue_then_oom" / "sacct.psv"))
    out = json.loads(rep.model_dump_json())
    assert [a["state"] for a in out["jobs"][0]["attempts"]] == ["REQUEUED", "FAILED"]
    assert out["jobs"][0]["attempts"][0]["steps"] == ["43.batch CANCELLED 0:15", "43.0 CANCELLED 0:15"]
