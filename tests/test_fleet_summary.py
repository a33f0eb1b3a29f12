"""fleet/summary.py: counters, shares, signatures, per day, node suspects, unclassified rate."""

from __future__ import annotations

import json

from slurmdoc.fleet import summary as summary_mod
from slurmdoc.fleet.record import JobRecord
from slurmdoc.fleet.summary import FleetSummary


def rec(i, cat=None, node=None, sig=None, time="2026-01-02T03:04:05", status=None, job=None):
    return JobRecord(index=i, job_id=job or str(100 + i), where=f"/logs/slurm-{100 + i}.out", files=1,
                     status=status or ("failed" if cat else "no_failure"), category=cat, node=node,
                     signature=sig or (f"{cat}: msg" if cat else None), time=time)


def test_counts_shares_and_unclassified():
    s = FleetSummary()
    for r in [rec(0, "cuda_oom"), rec(1, "cuda_oom"), rec(2, "unknown"), rec(3, "python_exception"), rec(4),
              rec(5, status="error")]:
        s.add(r)
    d = s.to_dict()
    assert (d["jobs"], d["failed"], d["no_failure"], d["errors"]) == (6, 4, 1, 1)
    assert d["categories"][0] == {"category": "cuda_oom", "count": 2, "share": 0.5}
    assert d["unclassified"] == {"count": 2, "rate": 0.5, "unknown": 1, "python_exception": 1}


def test_signatures_ranked_with_sample_jobs():
    s = FleetSummary(top=2)
    for i in range(7):
        s.add(rec(i, "cuda_oom", sig="cuda_oom: Tried to allocate <size>"))
    s.add(rec(7, "import_error", sig="import_error: No module named 'apex'"))
    s.add(rec(8, "segfault", sig="segfault: x"))
    d = s.to_dict()
    assert [g["count"] for g in d["signatures"]] == [7, 1] and d["distinct_signatures"] == 3
    assert d["signatures"][0]["jobs"] == ["100", "101", "102", "103", "104"]  # a sample, bounded
    assert d["signatures"][1]["signature"] == "import_error: No module named 'apex'"  # ties by name


def test_distinct_signatures_are_bounded(monkeypatch):
    monkeypatch.setattr(summary_mod, "MAX_SIGNATURES", 3)
    s = FleetSummary()
    for i in range(10):
        s.add(rec(i, "unknown", sig=f"unknown: {i}"))
    assert len(s.signatures) == 3
    d = s.to_dict()
    assert d["signatures_not_counted"] == 7 and d["failed"] == 10


def test_per_day():
    s = FleetSummary()
    s.add(rec(0, "cuda_oom", time="2026-01-02T01:00:00"))
    s.add(rec(1, "killed", time="2026-01-02T23:00:00"))
    s.add(rec(2, "killed", time="2026-01-03T00:00:01"))
    s.add(rec(3, "killed", time=None))
    d = s.to_dict()
    assert d["per_day"] == [{"day": "2026-01-02", "failed": 2, "categories": {"cuda_oom": 1, "killed": 1}},
                            {"day": "2026-01-03", "failed": 1, "categories": {"killed": 1}}]
    assert d["failed_without_time"] == 1


def test_node_suspects_and_the_drain_line():
    s = FleetSummary(suspect_min=2)
    s.add(rec(0, "cuda_error", node="gpu-e04", time="2026-01-01T00:00:00"))
    s.add(rec(1, "nccl_error", node="gpu-e04", time="2026-01-05T00:00:00"))
    s.add(rec(2, "cuda_error", node="gpu-e04"))
    s.add(rec(3, "cuda_oom", node="gpu-e04"))  # not hardware-looking
    s.add(rec(4, "segfault", node="gpu-a01"))  # once only
    s.add(rec(5, "killed", node="localhost"))  # not a node name
    s.add(rec(6, "killed", node="localhost"))
    d = s.to_dict()
    (n,) = d["node_suspects"]
    assert n["node"] == "gpu-e04" and n["count"] == 3 and n["categories"] == {"cuda_error": 2, "nccl_error": 1}
    assert (n["first"], n["last"]) == ("2026-01-01", "2026-01-05")
    assert n["drain"].startswith("scontrol update nodename=gpu-e04 state=drain reason=\"slurmdoc: 3 ")
    assert "jobs 100,101,102" in n["drain"]
    assert d["hardware_failures_without_node"] == 2


def test_same_records_same_bytes():
    def run(order):
        s = FleetSummary()
        for i in order:
            s.add(rec(i, ["cuda_oom", "killed", "unknown"][i % 3], node=f"n{i % 2}"))
        return json.dumps(s.to_dict())

    assert run(range(30)) == run(range(30))
