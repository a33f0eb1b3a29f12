"""fleet/command.py and `slurmdoc scan` on the command line: formats, exit codes, merge, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TB = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n{}\n"


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "slurmdoc", "scan", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def logs(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "slurm-11.out").write_text("0: " + TB.format("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").replace("\n", "\n0: "))
    (d / "slurm-12.out").write_text(TB.format("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.50 GiB"))
    (d / "slurm-13.out").write_text("step 1 loss 2.0\nstep 2 loss 1.9\n")
    return d


def test_formats(logs):
    r = run("-f", "json", str(logs))
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and [j["job_id"] for j in doc["jobs"]] == ["11", "12", "13"]
    (sig,) = [s for s in doc["summary"]["signatures"] if s["category"] == "cuda_oom"]
    assert sig["count"] == 2 and sig["jobs"] == ["11", "12"]
    r = run("-f", "jsonl", str(logs))
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["status"] for x in lines] == ["failed", "failed", "no_failure"]
    r = run("-f", "markdown", str(logs))
    assert r.stdout.count("\n| 1") == 3 and "## Summary" in r.stdout
    r = run(str(logs))
    assert r.stdout.splitlines()[0].startswith("JOB") and "3 jobs: 2 failed, 1 no failure" in r.stdout
    assert "Unclassified: 0 of 2" in r.stdout


def test_exit_codes(logs, tmp_path):
    assert run(str(logs / "slurm-13.out")).returncode == 0
    for args in ([], ["-f", "xml", str(logs)], [str(tmp_path / "nope")], ["--shard", "5/2", str(logs)],
                 ["--ledger", str(tmp_path / "nope.jsonl")]):
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, args


def test_merge_on_the_command_line(logs, tmp_path):
    for i in range(2):
        (tmp_path / f"p{i}.jsonl").write_text(run("--shard", f"{i}/2", str(logs)).stdout)
    r = run("merge", str(tmp_path / "p1.jsonl"), str(tmp_path / "p0.jsonl"), "-f", "json")
    assert r.returncode == 1 and r.stdout == run("-f", "json", str(logs)).stdout
