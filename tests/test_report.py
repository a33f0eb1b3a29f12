"""Renderers: text, json, markdown from one diagnosis."""

from __future__ import annotations

import io
import json

from rich.console import Console

from slurmdoc.api import diagnose
from slurmdoc.report import json_format, markdown, terminal

LOG = "\n".join(
    [
        "0: iteration 1",
        "1: Traceback (most recent call last):",
        '1:   File "train.py", line 7, in <module>',
        "1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.23 GiB is free.",
        "0: [E1121 10:00:00.1 1 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        "2: [E1121 10:00:00.1 1 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    ]
)


def diag(write):
    return diagnose([write("job.log", LOG)])


def test_terminal_report_structure(write):
    buf = io.StringIO()
    terminal.render(diag(write), Console(file=buf, width=200, no_color=True, soft_wrap=True))
    out = buf.getvalue()
    assert out.startswith("VERDICT") and out.count("VERDICT") == 1
    assert out.index("ROOT CAUSE") < out.index("WHAT TO DO") < out.index("TRACEBACK") < out.index("OTHER FAILURES")
    assert "rank 1" in out and "raised at train.py:7" in out
    assert "0, 2" in out  # the timeouts, folded into one row with their ranks
    assert "\x1b[" not in out


def test_json_is_the_model(write):
    d = diag(write)
    doc = json.loads(json_format.render(d))
    assert doc["root_cause"]["rank"] == 1 and doc["symptoms"][0]["ranks"] == [0, 2]
    assert doc["verdict"] == d.verdict


def test_markdown_has_sections_and_a_fenced_traceback(write):
    md = markdown.render(diag(write))
    assert "## Root cause: CUDA out of memory (`cuda_oom`)" in md
    assert "```\nTraceback (most recent call last):" in md
    assert "| `nccl_timeout` | `nccl-watchdog-timeout` | 0, 2 | 2 |" in md


def test_no_failure_renders(write):
    d = diagnose([write("ok.log", "[rank0]: iteration 1\n")])
    buf = io.StringIO()
    terminal.render(d, Console(file=buf, no_color=True))
    assert "No failure found" in buf.getvalue()
    assert "No failure found" in markdown.render(d)
