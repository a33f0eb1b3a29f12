"""fleet/cache.py: a scan re-reads only new or changed logs; the rule pack is part of the key."""

from __future__ import annotations

import io
import os

from slurmdoc.fleet import run as run_mod
from slurmdoc.fleet.cache import Cache, files_key, pack_fingerprint
from slurmdoc.fleet.command import ScanRequest, run_scan

TB = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n{}\n"


def scan_counting(monkeypatch, req):
    seen = []
    real = run_mod.diagnose_one

    def counting(work):
        seen.append(work.job_id)
        return real(work)

    monkeypatch.setattr(run_mod, "diagnose_one", counting)
    buf = io.StringIO()
    run_scan(req, buf, lambda w: None)
    return seen, buf.getvalue()


def test_second_scan_reads_only_what_changed(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    for j in (1, 2, 3):
        (logs / f"slurm-{j}.out").write_text(TB.format("ValueError: x"))
    req = ScanRequest(paths=[str(logs)], fmt="jsonl", cache=str(tmp_path / "cache.db"))
    seen, first = scan_counting(monkeypatch, req)
    assert seen == ["1", "2", "3"]
    seen, again = scan_counting(monkeypatch, req)
    assert seen == [] and again == first
    (logs / "slurm-2.out").write_text(TB.format("ModuleNotFoundError: No module named 'apex'"))  # rewritten
    (logs / "slurm-4.out").write_text("ok\n")  # new
    seen, third = scan_counting(monkeypatch, req)
    assert seen == ["2", "4"]
    assert third.splitlines()[0] == first.splitlines()[0] and '"import_error"' in third.splitlines()[1]


def test_key_changes_with_size_mtime_and_rules(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("x\n")
    fp = pack_fingerprint([])
    k = files_key(fp, (str(p),))
    os.utime(p, ns=(1, 1))
    assert files_key(fp, (str(p),)) != k
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text("id: r\n")
    assert pack_fingerprint([str(rules)]) != fp
    assert files_key(fp, (str(tmp_path / "gone.log"),)) is None


def test_errors_are_not_cached(tmp_path):
    from slurmdoc.fleet.record import JobRecord

    c = Cache(str(tmp_path / "c.db"))
    c.put("k", JobRecord(index=0, job_id="1", where="x", files=1, status="error", error="unreadable"))
    assert c.get("k", 0) is None
    c.put("k2", JobRecord(index=0, job_id="1", where="x", files=1, status="failed", category="unknown"))
    assert c.get("k2", 5).index == 5
    c.close()


def test_a_cache_that_is_not_one_is_a_clear_error(tmp_path):
    import pytest

    from slurmdoc.errors import InputError

    bad = tmp_path / "c.db"
    bad.write_text("this is not sqlite " * 100)
    with pytest.raises(InputError, match="cannot use as a scan cache"):
        Cache(str(bad))
