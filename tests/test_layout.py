"""Layout of every report: locations are never wrapped or cut, whatever the format and the
width, and each points at the line it names; the verdict, the root cause and what to do come
first; symptoms in time order; nothing printed twice."""

from __future__ import annotations

import io
import re
from functools import lru_cache
from pathlib import Path

import pytest
from rich.console import Console

from slurmdoc.api import diagnose
from slurmdoc.models import Diagnosis
from slurmdoc.report import emit, terminal
from slurmdoc.report.layout import delay, ordered_symptoms, trim_traceback, wrap

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES = sorted(p.parent.relative_to(ROOT) for p in FIXTURES.rglob("truth.yaml"))
WIDTHS = [80, 120, None]  # None: off a terminal
FORMATS = ["text", "markdown", "json", "html"]


@lru_cache(maxsize=None)
def diag(case: Path) -> Diagnosis:
    return diagnose([str(case)])


def render(d: Diagnosis, fmt: str, width) -> str:
    buf = io.StringIO()
    if fmt == "text" and width is not None:
        terminal.render(d, Console(file=buf, width=width, no_color=True, soft_wrap=True), width=width)
    else:
        emit.emit(d, fmt, buf, color="never")  # a StringIO is not a terminal: no wrapping
    return buf.getvalue()


def where_it_points(loc: str) -> str:
    path, _, n = loc.rpartition(":")
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, 1):
            if i == int(n):
                return line
    raise AssertionError(f"{loc}: the file has fewer lines")


@pytest.fixture(scope="module", autouse=True)
def _in_repo(request):
    import os

    old = os.getcwd()
    os.chdir(ROOT)  # the fixtures are named relative to the repository, as a user would
    yield
    os.chdir(old)


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w or 'off'}")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_locations_are_whole_and_point_at_their_line(case, fmt, width):
    if fmt != "text" and width is not None:
        pytest.skip("only the text report depends on the width")
    d = diag(case)
    out = render(d, fmt, width)
    lines = out.splitlines()
    inputs = sorted(d.inputs, key=len, reverse=True)
    found = 0
    for i, line in enumerate(lines):
        for path in inputs:
            for m in re.finditer(re.escape(path) + r"(:\d+)?", line):
                found += 1
                if m.group(1) is None:
                    # a path alone (the footer's inputs): never the start of a location cut here
                    nxt = lines[i + 1].lstrip() if i + 1 < len(lines) else ""
                    assert not (m.end() == len(line) and re.match(r":?\d", nxt)), (line, nxt)
                    continue
                assert where_it_points(m.group(0)) is not None
        # nothing printed ends with the start of an input path whose rest opens the next line
        if i + 1 < len(lines):
            nxt = lines[i + 1].lstrip()
            for path in inputs:
                for k in range(3, len(path)):
                    if line.endswith(path[:k]) and nxt.startswith(path[k:]):
                        raise AssertionError(f"{path} broken across lines {i + 1}-{i + 2}")
    rc = d.root_cause
    if rc is not None:
        assert rc.source in out.replace("\\/", "/"), "the root cause's location, whole on one line"
        text = where_it_points(rc.source)
        assert rc.message[:40] in text or any(rc.message[:40] in t for t in rc.traceback), (rc.source, text)
        if fmt in ("text", "markdown"):
            for s in d.symptoms:
                assert any(s.first_source in ln for ln in lines), s.first_source
                assert s.message[:30] in where_it_points(s.first_source)
    if fmt == "text" and width is not None:
        assert all(len(ln) <= width or " " not in ln.strip() or any(p in ln for p in inputs) or "File \"" in ln
                   for ln in lines if not ln.startswith("    ")), "prose wraps at the width"


def test_the_check_sees_locations():
    d = diag(Path("fixtures/torchrun/oom_sim"))
    assert d.root_cause.source in render(d, "text", 80)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_single_rank_failure_says_what_to_do_within_25_lines_at_80_columns(case):
    d = diag(case)
    rc = d.root_cause
    if rc is None or len(rc.ranks) > 1 or rc.rank is None:
        return
    lines = render(d, "text", 80).splitlines()
    top = "\n".join(lines[:25])
    assert lines[0].startswith("VERDICT")
    assert "ROOT CAUSE" in top and rc.source in top
    assert rc.message.split()[0] in top
    i = next(i for i, ln in enumerate(lines) if ln == "WHAT TO DO")
    assert i + 1 < 25 and lines[i + 1].strip(), "the first advice line is on screen"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_off_a_terminal_nothing_is_wrapped_and_nothing_is_printed_twice(case):
    d = diag(case)
    rc = d.root_cause
    out = render(d, "text", None)
    if rc is None:
        return
    # each prose line of the model is one line of the report
    summary = rc.remediation_parts.summary.replace(rc.message, "(the error above)") if len(rc.message) > 60 else rc.remediation_parts.summary
    assert any(summary in ln for ln in out.splitlines())
    if len(rc.message) > 60:
        assert out.count(rc.message) == 1, "the error message once"
    assert out.count(d.verdict) == 1


def test_wrap_never_breaks_a_location_even_one_with_spaces():
    loc = "/data/my runs/job 7/slurm-880412.out:2812"
    text = f"the first failure is at {loc} and more words follow here to wrap the line"
    for width in range(20, 90):
        lines = wrap(text, width, keep=[loc])
        assert sum(loc in ln for ln in lines) == 1, (width, lines)
        assert " ".join(ln.strip() for ln in lines) == text


def test_a_traceback_keeps_the_users_frames_and_the_raising_frame():
    tb = [
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 10, in <module>',
        "    main()",
        '  File "/opt/v/lib/python3.11/site-packages/torch/nn/module.py", line 1, in _call',
        "    return f()",
        '  File "/opt/v/lib/python3.11/site-packages/torch/nn/module.py", line 2, in f',
        "    return g()",
        '  File "/home/u/model.py", line 5, in forward',
        "    x = self.lin(x)",
        '  File "/opt/v/lib/python3.11/site-packages/torch/nn/linear.py", line 3, in forward',
        "    return F.linear(x)",
        '  File "/opt/v/lib/python3.11/site-packages/torch/nn/functional.py", line 4, in linear',
        "    raise RuntimeError('shapes cannot be multiplied (4x3 and 5x6) because of a mismatch here')",
        "RuntimeError: shapes cannot be multiplied (4x3 and 5x6) because of a mismatch here",
    ]
    short = trim_traceback(tb, tb[-1])
    assert '  File "/home/u/train.py", line 10, in <module>' in short
    assert '  File "/home/u/model.py", line 5, in forward' in short
    assert tb[-3] in short and tb[-2] in short  # the frame that raised
    assert not any("module.py" in ln or "linear.py" in ln for ln in short)
    assert short.count("  ... 2 library frames (--full shows them)") == 1
    assert short.count("  ... 1 library frame (--full shows them)") == 1
    assert short[-1] == "RuntimeError: (the error above)"
    assert trim_traceback(tb, tb[-1], full=True)[:-1] == tb[:-1]


def test_symptoms_in_time_order_with_their_delay(write):
    log = "\n".join([
        "[2026-11-21 10:00:05,000] [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[2026-11-21 10:10:09,000] [rank2]: W1121 10:10:09.0 1 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 7 closing signal SIGTERM",
        "[2026-11-21 10:10:05,000] [rank0]: [E1121 10:10:05.1 1 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    ])
    d = diagnose([write("job.log", log)])
    syms = ordered_symptoms(d)
    assert [s.first_time for s in syms] == sorted(s.first_time for s in syms) and len(syms) >= 2
    out = render(d, "text", None)
    rows = [ln for ln in out.splitlines() if ln.startswith(tuple(s.category + " " for s in syms))]
    assert [r.split()[0] for r in rows] == [s.category for s in syms]
    assert "+10 min" in rows[0]


def test_a_symptom_seen_before_the_root_cause_has_a_negative_delay_not_plus_minus():
    # DeepSpeed's launcher reports rank 1's SIGKILL after rank 0 saw its peer go away
    d = diag(Path("fixtures/launchers/ds_sigkill"))
    shown = [delay(s, d.root_cause) for s in d.symptoms]
    assert any(x and x.startswith("-") for x in shown) and not any(x and x.startswith("+-") for x in shown)
    assert "+-" not in render(d, "text", None)


def test_tables_become_plain_rows_when_they_do_not_fit():
    d = diag(Path("fixtures/documented/cuda_oom_allocator"))
    narrow = render(d, "text", 80).split("OTHER FAILURES")[1]
    wide = render(d, "text", None).split("OTHER FAILURES")[1]
    assert "first seen" in wide and "first seen" not in narrow
    assert "first at" in narrow
    assert all(s.first_source in narrow for s in d.symptoms)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_straggler_root_block_shows_the_straggler_s_own_evidence(case):
    d = diag(case)
    rc = d.root_cause
    if rc is None or not rc.stragglers:
        return
    rank = rc.rank if rc.rank is not None else rc.stragglers[0]
    for fmt in ("text", "markdown"):
        out = render(d, fmt, None)
        block = out.split("WHAT TO DO")[0] if fmt == "text" else out.split("### What to do")[0]
        mine = next((p for p in d.progress if p.rank == rank), None)
        if mine is not None:
            assert mine.last_source in block and mine.last_line in block, "its own last line, where it is"
        else:
            assert "printed nothing" in block
    text = render(d, "text", None).split("WHAT TO DO")[0]
    assert f"rank {rank} (straggler)" in text
    assert f"reported at {rc.source}" in text, "the root line is named as another's report"


def test_footers_never_claim_zero_ranks_when_no_line_named_one(write):
    d = diagnose([write("a.log", "\n".join(f"step {s} loss 1.0" for s in range(5)))])
    assert d.ranks_seen == 0
    for fmt in ("markdown", "html", "text"):
        out = render(d, fmt, None)
        assert "0 ranks" not in out and "no line names its rank" in out, fmt
    d = diagnose([write("b.log", "\n".join(f"{r}: step 1" for r in range(4)))])
    assert "4 ranks seen" in render(d, "markdown", None) and "4 ranks seen" in render(d, "html", None)
