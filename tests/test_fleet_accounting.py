"""fleet/accounting.py: `scan --since/--sacct-file` takes the jobs from Slurm's accounting, with
filters, locates each job's log and joins it with the record; efficiency columns."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmdoc.errors import InputError
from slurmdoc.fleet.accounting import Window, accounting_jobs
from slurmdoc.fleet.command import ScanRequest, run_scan

DATA = Path(__file__).resolve().parent / "data" / "sacct"
HEAD = "JobID|JobIDRaw|JobName|State|ExitCode|DerivedExitCode|Elapsed|Timelimit|ReqMem|MaxRSS|NNodes|NodeList|Start|End|User|Partition|WorkDir|AllocCPUS|TotalCPU"
JOB = 987650  # ids no test cluster hands out soon


def rows(work: Path) -> str:
    return "\n".join([
        HEAD,
        f"{JOB}|{JOB}|train|FAILED|1:0|1:0|00:45:00|01:00:00|8000M||1|g1|2026-03-01T10:00:00|2026-03-01T10:45:00|alice|gpu|{work}|8|",
        f"{JOB}.0|{JOB}.0|python|FAILED|1:0||00:45:00|||7600M|1|g1|2026-03-01T10:00:01|2026-03-01T10:45:00||||8|02:15:00",
        f"{JOB + 1}|{JOB + 1}|eval|TIMEOUT|0:0|0:0|01:00:00|01:00:00|8000M||1|g2|2026-03-02T09:00:00|2026-03-02T10:00:00|bob|cpu|{work}|4|30:00.000",
        f"{JOB + 1}.0|{JOB + 1}.0|python|CANCELLED|0:15||01:00:00|||100M|1|g2|2026-03-02T09:00:01|2026-03-02T10:00:00||||4|INVALID",
        f"{JOB + 2}|{JOB + 2}|ok|COMPLETED|0:0|0:0|00:10:00|01:00:00|8000M||1|g3|2026-03-03T09:00:00|2026-03-03T09:10:00|alice|gpu|{work}|2|",
        f"{JOB + 3}|{JOB + 3}|run|RUNNING|0:0|0:0|00:10:00|01:00:00|8000M||1|g3|2026-03-03T09:00:00|Unknown|alice|gpu|{work}|2|",
    ]) + "\n"


@pytest.fixture
def saved(tmp_path):
    (tmp_path / f"slurm-{JOB}.out").write_text(
        "0: Traceback (most recent call last):\n0:   File \"t.py\", line 1, in <module>\n"
        "0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    p = tmp_path / "sacct.psv"
    p.write_text(rows(tmp_path))
    return p


def scan_json(**kw) -> dict:
    buf = io.StringIO()
    run_scan(ScanRequest(fmt="json", **kw), buf, lambda w: None)
    return json.loads(buf.getvalue())


def test_jobs_from_the_accounting_joined_with_their_logs(saved):
    doc = scan_json(sacct_file=str(saved))
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    assert list(jobs) == [str(JOB), str(JOB + 1), str(JOB + 2)]  # the running job is left out
    a = jobs[str(JOB)]
    assert (a["category"], a["rank"], a["user"], a["partition"], a["state"], a["exit_code"]) == (
        "cuda_oom", 0, "alice", "gpu", "FAILED", "1:0")
    assert a["log_found_by"] == "default" and a["signature"].startswith("cuda_oom: torch.OutOfMemoryError")
    assert a["time_use"] == 0.75 and a["mem_use"] == 0.95 and a["time"] == "2026-03-01T10:45:00"
    assert a["cpu_use"] == 0.375  # TotalCPU 2:15:00 of 8 CPUs x 45 min
    b = jobs[str(JOB + 1)]  # no log: the accounting alone
    assert b["category"] == "time_limit" and b["files"] == 0 and "does not exist" in b["error"]
    assert b["cpu_use"] == 0.125  # the step's INVALID is unknown: the job row's 30 min of 4 CPUs x 1 h
    assert jobs[str(JOB + 2)]["cpu_use"] is None
    assert jobs[str(JOB + 2)]["status"] == "no_failure"
    assert [d["day"] for d in doc["summary"]["per_day"]] == ["2026-03-01", "2026-03-02"]


@pytest.mark.parametrize("kw, want", [
    ({"users": ["alice"]}, [JOB, JOB + 2]),
    ({"users": ["bob,carol"]}, [JOB + 1]),
    ({"partitions": ["cpu"]}, [JOB + 1]),
    ({"states": ["failed", "TIMEOUT"]}, [JOB, JOB + 1]),
    ({"since": "2026-03-02"}, [JOB + 1, JOB + 2]),
    ({"until": "2026-03-02T12:00"}, [JOB, JOB + 1]),
])
def test_filters_apply_to_saved_output(saved, kw, want):
    assert [int(j.job_id) for j in accounting_jobs(Window(sacct_file=str(saved), **kw))] == want


def test_requeued_job_is_judged_on_its_last_attempt():
    fx = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "sbatch_requeue_then_oom" / "sacct.psv"
    (j,) = accounting_jobs(Window(sacct_file=str(fx)))
    assert j.state == "FAILED" and len(j.attempts) == 2


@pytest.mark.parametrize("w, msg", [
    (Window(until="2026-01-01"), "give --since too"),
    (Window(since="yesterday-ish"), "not a time"),
])
def test_window_errors(w, msg):
    with pytest.raises(InputError, match=msg):
        accounting_jobs(w)


def test_cli_paths_or_accounting_not_both(saved, tmp_path):
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "scan", str(tmp_path), "--sacct-file", str(saved)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "not both" in p.stderr
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "scan", "--sacct-file", str(saved)], capture_output=True, text=True)
    assert p.returncode == 1 and "[time 75% of limit, mem 95% of request, cpu 38% of allocation]" in p.stdout
