"""The rank x time strip of the terminal report."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmdoc.api import diagnose
from slurmdoc.report.picture import LEGEND, strip

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted(p.parent for p in (ROOT / "fixtures").rglob("truth.yaml"))


def _log(ranks: int, root: int, hosts: int = 1) -> str:
    """A job of `ranks` ranks on `hosts` hosts: rank `root` runs out of memory at 10:00:05,
    every other rank times out ten minutes later, one second apart per host."""
    per = ranks // hosts
    out = [f"[2026-11-21 10:00:00,000] {r}: [rank{r}]: started on node{r // per:02d}" for r in range(ranks)]
    out += [f"[2026-11-21 10:00:05,000] {root}: [rank{root}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    out += [
        f"[2026-11-21 10:10:{5 + r // per:02d},000] {r}: [rank{r}]: [E1121 10:10:05.1 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
        for r in range(ranks) if r != root
    ]
    return "\n".join(out) + "\n"


def test_few_ranks_one_row_each_with_the_root_marked(write):
    d = diagnose([write("job.log", _log(3, root=1))])
    rows = strip(d, 80)
    assert rows[0].startswith("TIMELINE") and LEGEND in rows[0]
    body = {ln.split()[1]: ln for ln in rows[1:4]}
    assert set(body) == {"0", "1", "2"}
    assert "X" in body["1"] and body["1"].endswith("<- root")
    cells1 = body["1"].split()[2]
    assert cells1.index("X") == 0, "the root cause is the first failure evidence"
    assert body["0"].split()[2].rstrip("]").endswith("o"), "the timeouts come last, ten minutes later"
    assert "10:00:05" in rows[4] and "+10 min" in rows[4]


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_it_fits_the_width(write, width):
    d = diagnose([write("job.log", _log(64, root=37, hosts=8))])
    rows = strip(d, width)
    assert rows and all(len(r) <= width for r in rows)


def test_many_ranks_group_into_rows_and_the_root_rank_is_named(write):
    d = diagnose([write("job.log", _log(64, root=37, hosts=8))])
    rows = strip(d, 100)[1:-1]
    assert 2 <= len(rows) <= 8
    marked = [r for r in rows if "<- root" in r]
    assert len(marked) == 1 and "rank 37" in marked[0] and "X" in marked[0]


def test_no_times_no_picture(write):
    log = "\n".join(ln.split(" ", 2)[2] for ln in _log(3, root=1).splitlines())
    d = diagnose([write("job.log", log.replace("[E1121 10:10:05.1 1 ProcessGroupNCCL.cpp:629] ", ""))])
    assert strip(d, 80) == []


def test_a_straggler_is_marked_without_a_glyph_of_another_ranks_time():
    d = diagnose([str(ROOT / "fixtures" / "documented" / "nccl_watchdog_straggler")])
    rows = strip(d, 80)
    (row,) = [r for r in rows if "straggler" in r]
    assert "rank 6" in row or row.split()[1] == "6"
    assert "X" not in row, "the root line is a reporter's: its time is not the straggler's"


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fixture_at_80_columns(case):
    d = diagnose([str(case)])
    rows = strip(d, 80)
    assert all(len(r) <= 80 for r in rows)
    if rows:
        rc = d.root_cause
        assert any("<- root" in r or "straggler" in r for r in rows) or rc.rank is None
