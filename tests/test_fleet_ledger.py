"""fleet/ledger.py: `scan --ledger` summarises the ledger the real epilog writes, without logs."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from slurmdoc.fleet.command import ScanRequest, run_scan
from slurmdoc.fleet.ledger import ledger_records

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"


def epilog(job: str, log: Path, ledger: Path, out: Path, code: str) -> None:
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "epilog", "--job-id", job, "--exit-code", code, "--log", str(log),
                        "--no-sacct", "--ledger", str(ledger), "--out-dir", str(out), "--always"],
                       capture_output=True, text=True)
    assert p.returncode == 0


def test_ledger_written_by_the_epilog(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    epilog("49", FIX / "srun_torchrun_oom_nolabel" / "slurm-49.out", ledger, tmp_path, "1")
    epilog("24", FIX / "srun_import_first" / "slurm-24.out", ledger, tmp_path, "1")
    with open(ledger, "a") as fh:
        fh.write("not json\n")
    buf, warned = io.StringIO(), []
    code = run_scan(ScanRequest(ledger=str(ledger), fmt="json"), buf, warned.append)
    doc = json.loads(buf.getvalue())
    assert code == 1
    assert [(j["job_id"], j["category"]) for j in doc["jobs"]] == [("49", "cuda_oom"), ("24", "import_error")]
    assert all(j["signature"].startswith(j["category"] + ": ") and j["time"] for j in doc["jobs"])
    assert doc["summary"]["failed"] == 2 and doc["summary"]["per_day"]
    assert warned and "1 line(s) are not epilog ledger lines (first: line 3)" in warned[0]


def test_healthy_jobs_and_empty_ledger(tmp_path):
    p = tmp_path / "l.jsonl"
    p.write_text(json.dumps({"schema_version": 1, "kind": "epilog", "job_id": "5", "status": "no_failure", "category": None,
                             "verdict": "no failure", "time": "2026-01-02T00:00:00+00:00"}) + "\n")
    (rec,) = list(ledger_records(str(p), []))
    assert rec.status == "no_failure" and rec.signature is None and rec.category is None
    p.write_text("")
    buf = io.StringIO()
    assert run_scan(ScanRequest(ledger=str(p), fmt="json"), buf, print) == 0
    assert json.loads(buf.getvalue())["jobs"] == []
