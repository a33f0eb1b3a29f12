"""fleet/render.py: every format streams rows as they come and ends with the summary."""

from __future__ import annotations

import io
import json

import pytest

from slurmdoc.fleet.record import JobRecord
from slurmdoc.fleet.render import PartOut, make_output
from slurmdoc.fleet.summary import FleetSummary

ROWS = [
    JobRecord(index=0, job_id="7", where="/l/slurm-7.out", files=1, status="failed", category="cuda_oom", rank=1,
              node="n1", signature="cuda_oom: CUDA out of memory | <size>", time_use=0.5, mem_use=1.0),
    JobRecord(index=1, job_id=None, where="/runs/exp_a/job.log", files=1, status="no_failure"),
    JobRecord(index=2, job_id="9", where="/l/slurm-9.out", files=1, status="error", error="binary data"),
]


def render(fmt):
    out = io.StringIO()
    o = make_output(fmt, out)
    s = FleetSummary()
    o.start()
    seen = []
    for r in ROWS:
        o.row(r)
        s.add(r)
        seen.append(out.getvalue())
    o.finish(s.to_dict())
    return seen, out.getvalue()


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "jsonl"])
def test_rows_are_written_as_they_come(fmt):
    seen, _ = render(fmt)
    assert len(seen[0]) < len(seen[1]) < len(seen[2])


def test_json_is_one_document():
    _, text = render("json")
    doc = json.loads(text)
    assert doc["schema_version"] == 1 and doc["kind"] == "scan" and len(doc["jobs"]) == 3
    assert doc["summary"]["failed"] == 1 and doc["summary"]["errors"] == 1
    out = io.StringIO()
    o = make_output("json", out)
    o.start()
    o.finish(FleetSummary().to_dict())
    assert json.loads(out.getvalue())["jobs"] == []


def test_text_and_markdown_rows():
    _, text = render("text")
    lines = text.splitlines()
    assert lines[1].startswith("7 ") and "[time 50% of limit, mem 100% of request]" in lines[1]
    assert lines[2].startswith("exp_a/job.log") and lines[3].startswith("9 ") and "binary data" in lines[3]
    assert "Unclassified: 0 of 1 failed jobs" in text
    _, md = render("markdown")
    assert "\\| <size>" in md and md.count("\n| ") == 4  # header + 3 rows, the pipe escaped


def test_jsonl_is_rows_only():
    _, text = render("jsonl")
    assert [json.loads(x)["index"] for x in text.splitlines()] == [0, 1, 2]


def test_part_header():
    out = io.StringIO()
    p = PartOut(out, (1, 3), 70)
    p.start()
    p.row(ROWS[0])
    head, row = out.getvalue().splitlines()
    assert json.loads(head) == {"kind": "scan-part", "schema_version": 1, "shard": 1, "of": 3, "jobs_total": 70}
    assert JobRecord.from_dict(json.loads(row)) == ROWS[0]
