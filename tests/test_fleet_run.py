"""fleet/run.py: the listing, one record per job in listing order, shards and their merge, K processes."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from slurmdoc.errors import InputError
from slurmdoc.fleet.command import ScanRequest, run_scan
from slurmdoc.fleet import run as run_mod
from slurmdoc.fleet.run import ScanOptions, merge, parse_shard, scan

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
sys.path.insert(0, str(ROOT / "tests"))
from corpus_cases import case_dirs, load_truth  # noqa: E402

TB = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n{}\n"


def out_of(req: ScanRequest) -> tuple[int, str]:
    buf = io.StringIO()
    code = run_scan(req, buf, lambda w: None)
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def fixtures_scan():
    code, text = out_of(ScanRequest(paths=[str(FIX)], fmt="json"))
    return code, text, json.loads(text)


def test_one_row_per_fixture_job_with_its_category(fixtures_scan):
    code, _, doc = fixtures_scan
    assert code == 1 and doc["schema_version"] == 1 and doc["kind"] == "scan"
    rows = doc["jobs"]
    assert [r["index"] for r in rows] == list(range(len(rows)))
    by_dir = {}
    for r in rows:
        w = Path(r["where"]).resolve()
        by_dir[w if w.is_dir() else w.parent] = r
    from test_corpus import KNOWN_MISSES  # the diagnosis's known misses are not the scan's to judge

    cases = [c for c in case_dirs() if str(c.relative_to(FIX)) not in KNOWN_MISSES]
    assert len(cases) > 40
    for case in cases:
        truth = load_truth(case)
        r = by_dir[case.resolve()]
        want = truth.get("expect_status", "failed")
        assert r["status"] == want, case.name
        if want == "failed":
            # as tests/test_fixtures.py: when the root rank's own error never reached the logs,
            # `unknown` naming the rank with the evidence there is is the honest answer
            cats = (truth["category"],) if truth.get("root_source_line") is not None else (truth["category"], "unknown")
            assert r["category"] in cats, case.name
            assert r["signature"].startswith(r["category"] + ":"), case.name
        if truth.get("job_id") is not None:
            assert r["job_id"] == str(truth["job_id"]), case.name
    assert doc["summary"]["jobs"] == len(rows)
    assert doc["summary"]["failed"] == sum(1 for r in rows if r["status"] == "failed")


def test_shards_then_merge_are_byte_identical(fixtures_scan, tmp_path):
    _, full, _ = fixtures_scan
    parts = []
    for i in range(3):
        code, text = out_of(ScanRequest(paths=[str(FIX)], shard=f"{i}/3"))
        p = tmp_path / f"part{i}.jsonl"
        p.write_text(text)
        parts.append(str(p))
        head = json.loads(text.splitlines()[0])
        assert head["shard"] == i and head["of"] == 3 and all(
            json.loads(line)["index"] % 3 == i for line in text.splitlines()[1:])
    code, merged = out_of(ScanRequest(merge_parts=parts[::-1], fmt="json"))
    assert merged == full and code == 1


def test_merge_refuses_incomplete_or_foreign_parts(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    for j in (1, 2):
        (d / f"slurm-{j}.out").write_text(TB.format("ValueError: x"))
    parts = []
    for i in range(2):
        _, text = out_of(ScanRequest(paths=[str(d)], shard=f"{i}/2"))
        (tmp_path / f"p{i}").write_text(text)
        parts.append(str(tmp_path / f"p{i}"))
    with pytest.raises(InputError, match="missing shard"):
        merge(parts[:1])
    with pytest.raises(InputError, match="given twice"):
        merge([parts[0], parts[0], parts[1]])
    (tmp_path / "other").write_text('{"kind": "something"}\n')
    with pytest.raises(InputError, match="not a scan part"):
        merge([str(tmp_path / "other")])


@pytest.mark.parametrize("text, ok", [("0/1", True), ("2/3", True), ("3/3", False), ("-1/2", False), ("a/b", False), ("1", False)])
def test_parse_shard(text, ok):
    if ok:
        assert parse_shard(text)
    else:
        with pytest.raises(InputError):
            parse_shard(text)


def test_k_processes_give_the_same_records():
    paths = [str(FIX / "documented")]
    one = out_of(ScanRequest(paths=paths, fmt="jsonl", jobs=1))
    two = out_of(ScanRequest(paths=paths, fmt="jsonl", jobs=2))
    assert one == two and len(one[1].splitlines()) == 7


def test_an_unreadable_job_is_a_row_not_the_end(tmp_path):
    (tmp_path / "slurm-1.out").write_text(TB.format("ValueError: x"))
    (tmp_path / "slurm-2.out").write_bytes(b"\x00\x01\x02" * 400)
    (tmp_path / "slurm-3.out").write_text("all good\n")
    total, recs = scan(ScanOptions([str(tmp_path)]), [])
    rows = list(recs)
    assert total == 3 and [r.status for r in rows] == ["failed", "error", "no_failure"]
    assert "binary" in rows[1].error


def test_no_logs_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        scan(ScanOptions([str(tmp_path / "missing")]), [])


def test_records_stream_one_at_a_time(tmp_path):
    """The scan yields as it goes: the first record arrives before later jobs are read."""
    for j in range(3):
        (tmp_path / f"slurm-{j}.out").write_text(TB.format("ValueError: x"))
    total, recs = scan(ScanOptions([str(tmp_path)]), [])
    first = next(recs)
    os.remove(tmp_path / "slurm-2.out")  # not read yet
    rest = list(recs)
    assert first.status == "failed" and rest[-1].status == "error"


def test_rules_are_loaded_once_per_process(tmp_path, monkeypatch):
    import slurmdoc.engine.loader as loader

    for j in range(3):
        (tmp_path / f"slurm-{j}.out").write_text(TB.format("ValueError: x"))
    calls = []
    real = loader.load_rulebook
    monkeypatch.setattr(loader, "load_rulebook", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(run_mod, "_BOOK", None)
    total, recs = scan(ScanOptions([str(tmp_path)]), [])
    assert [r.category for r in recs] == ["python_exception"] * 3 and len(calls) == 1


def test_the_prefilter_is_compiled_once_per_process(tmp_path, monkeypatch):
    import slurmdoc.api as api

    for j in range(3):
        (tmp_path / f"slurm-{j}.out").write_text(TB.format("ValueError: x"))
    built = []
    real = api.Prefilter
    monkeypatch.setattr(api, "Prefilter", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(api, "_PREFILTERS", {})
    total, recs = scan(ScanOptions([str(tmp_path)]), [])
    assert len(list(recs)) == 3 and len(built) == 1
