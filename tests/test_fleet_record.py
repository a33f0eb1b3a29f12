"""fleet/record.py: a job's row from a diagnosis, and back and forth through JSON unchanged."""

from __future__ import annotations

import json
from types import SimpleNamespace

from slurmdoc.fleet.record import JobRecord, from_diagnosis, from_error


def diag(**rc):
    base = dict(category="cuda_error", rule_id="cuda-ecc", rank=3, node="gpu-e04", source="a.out:12",
                message="RuntimeError: CUDA error: uncorrectable ECC error encountered\nmore", timestamp="2026-01-02T03:04:05.123+00:00")
    base.update(rc)
    return SimpleNamespace(status="failed", root_cause=SimpleNamespace(**base))


def test_from_diagnosis(tmp_path):
    p = tmp_path / "slurm-5.out"
    p.write_text("x\n")
    r = from_diagnosis(0, "5", (str(p),), diag(evidence="traceback", rank_source="prefix"))
    assert (r.category, r.rank, r.node, r.where, r.files) == ("cuda_error", 3, "gpu-e04", str(p), 1)
    assert r.signature == "cuda_error: RuntimeError: CUDA error: uncorrectable ECC error encountered"
    assert r.time == "2026-01-02T03:04:05" and r.day == "2026-01-02" and r.hardware
    assert (r.evidence, r.rank_source) == ("traceback", "prefix")


def test_evidence_only_when_the_diagnosis_names_a_level(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("x\n")
    r = from_diagnosis(0, None, (str(p),), diag(evidence=("line 1", "line 2")))  # lines, not a level
    assert r.evidence is None and r.rank_source is None


def test_no_failure_and_errors_use_the_log_time(tmp_path):
    a, b = tmp_path / "n0.log", tmp_path / "n1.log"
    a.write_text("x\n")
    b.write_text("y\n")
    r = from_diagnosis(1, None, (str(a), str(b)), SimpleNamespace(status="no_failure", root_cause=None))
    assert r.signature is None and r.where == str(tmp_path) and r.files == 2 and r.time
    e = from_error(2, "9", (str(a),), "binary data " * 100)
    assert e.status == "error" and len(e.error) == 300 and not e.hardware


def test_json_round_trip():
    r = JobRecord(index=4, job_id="10_2", where="x", files=1, status="failed", category="killed", rank=0, mem_use=0.97)
    assert JobRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert JobRecord.from_dict({**r.to_dict(), "added_later": 1}) == r  # newer fields are ignored
