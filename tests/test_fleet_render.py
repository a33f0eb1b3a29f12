"""fleet/render.py: every format streams rows as they come and ends with the summary."""

from __future__ import annotations

import io
import json
import re

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


def test_text_status_in_colour_keeps_the_columns():
    plain, colour = io.StringIO(), io.StringIO()
    for out, c in ((plain, False), (colour, True)):
        o = make_output("text", out, color=c)
        o.start()
        for r in ROWS:
            o.row(r)
    assert "\x1b[" not in plain.getvalue()
    lines = colour.getvalue().splitlines()
    assert "\x1b[1;31mfailed\x1b[0m" in lines[1] and "\x1b[32mno_failure\x1b[0m" in lines[2] and "\x1b[33merror\x1b[0m" in lines[3]
    assert re.sub(r"\x1b\[[0-9;]*m", "", colour.getvalue()) == plain.getvalue()


@pytest.mark.parametrize("args, env, coloured", [
    ([], {}, False),  # not a terminal
    (["--color", "always"], {}, True),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True),  # FORCE_COLOR wins, as for diagnose and triage
    (["--format", "json", "--color", "always"], {}, False),  # colour is for the text rows only
])
def test_scan_colour_on_the_command_line(tmp_path, args, env, coloured):
    import os
    import subprocess
    import sys

    (tmp_path / "slurm-5.out").write_text('Traceback (most recent call last):\n  File "t.py", line 1, in <module>\nValueError: x\n')
    e = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")} | env
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "scan", str(tmp_path), *args], capture_output=True, text=True, env=e)
    assert p.returncode == 1 and ("\x1b[" in p.stdout) == coloured
