"""`--format html`: one self-contained page, small for any job size, rendered in a real
headless Chromium (skipped when it is absent, except in CI: SLURMDOC_REQUIRE_CHROMIUM=1)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slurmdoc.api import diagnose
from slurmdoc.models import RankTime
from slurmdoc.report.html import render

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES = sorted(p.parent for p in FIXTURES.rglob("truth.yaml"))
REQUIRE = os.environ.get("SLURMDOC_REQUIRE_CHROMIUM") == "1"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT_BAND = (0xFF, 0xD6, 0xD6)  # the root row's band (#ffd6d6)


def big_oom_log(ranks: int = 512, root: int = 137, per_node: int = 8) -> str:
    """`ranks` ranks, `per_node` a node: progress, then rank `root` runs out of memory and every
    other rank's collective times out ten minutes later; srun names the hosts."""
    t0 = datetime(2026, 11, 21, 10, 0, 0)
    out = []
    for step in (1, 2):
        out += [f"[{(t0 + timedelta(seconds=step)).isoformat(sep=' ')},000] [rank{r}]: iteration {step}/1000 | lm loss 2.3" for r in range(ranks)]
    at = (t0 + timedelta(seconds=5)).isoformat(sep=" ")
    out += [f"[{at},000] [rank{root}]: Traceback (most recent call last):",
            f'[{at},000] [rank{root}]:   File "/home/u/train.py", line 40, in <module>',
            f"[{at},000] [rank{root}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    for r in range(ranks):
        if r != root:
            ts = (t0 + timedelta(seconds=605 + r / ranks)).isoformat(sep=" ")
            out.append(f"[{ts},000] [rank{r}]: [E1121 10:10:05.1 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
    out += [f"srun: error: node{r // per_node:03d}: task {r}: Exited with exit code 1" for r in (root,)]
    return "\n".join(out) + "\n"


# ---- the page, without a browser ------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_renders_a_self_contained_page(case):
    page = render(diagnose([str(case)]))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page.lower() and "@import" not in page and "@font-face" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page, re.I), "nothing fetched"
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", page, re.I)


def test_the_page_stays_small_for_100000_ranks():
    t0 = datetime(2026, 11, 21, 10)
    tl = tuple(RankTime(rank=r, node=f"n{r // 8:05d}", failed_at=(t0 + timedelta(seconds=600 + r % 97)).isoformat(),
                        category="nccl_timeout", role="symptom", progress_at=(t0 + timedelta(seconds=r % 5)).isoformat(),
                        step=100 + r % 3, last_output=(t0 + timedelta(seconds=700)).isoformat()) for r in range(100_000))
    d = diagnose([str(FIXTURES / "torchrun" / "oom_sim")])
    d = d.model_copy(update={"timeline": tl, "ranks_seen": 100_000})
    page = render(d)
    assert len(page.encode()) < 400_000, len(page)
    assert page.count('class="row') <= 32


def test_a_page_highlights_the_root_rank_s_row(write):
    d = diagnose([write("job.log", big_oom_log())])
    assert d.root_cause.rank == 137
    page = render(d)
    rows = re.findall(r'<g class="row([^"]*)" data-ranks="([^"]*)"', page)
    root_rows = [ranks for cls, ranks in rows if "root" in cls.split()]
    assert len(root_rows) == 1
    lo, _, hi = root_rows[0].partition("-")
    assert int(lo) <= 137 <= int(hi or lo), root_rows
    assert '<g class="axis">' in page and 'class="legend"' in page


# ---- in a real browser ---------------------------------------------------------------

def _chromium():
    if CHROMIUM is None:
        if REQUIRE:
            pytest.fail("SLURMDOC_REQUIRE_CHROMIUM=1 but chromium is not installed")
        pytest.skip("chromium is not installed")
    return CHROMIUM


def _browse(page: Path, *what: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
               *what, page.as_uri()]
        return subprocess.run(cmd, capture_output=True, timeout=120)


def _png_pixels(path: Path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    w = h = ctype = 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, rows


def _has_color(rows, rgb, bpp) -> int:
    want = bytes(rgb)
    return sum(row.count(want) for row in rows) if bpp == 3 else sum(
        1 for row in rows for i in range(0, len(row), 4) if bytes(row[i:i + 3]) == want)


FIVE = {
    "oom_one_of_512": None,  # built below
    "straggler_hang": FIXTURES / "documented" / "nccl_watchdog_straggler",
    "every_rank_config_assert": FIXTURES / "torchrun" / "assert_all",
    "multi_attempt": FIXTURES / "attempts" / "slurm_requeue",
    "node_failure": FIXTURES / "slurm" / "srun_node_fail",
}


@pytest.mark.parametrize("name", list(FIVE))
def test_chromium_renders_the_page(name, tmp_path, write):
    _chromium()
    src = FIVE[name] or write("job_512.log", big_oom_log())
    d = diagnose([str(src)])
    page = tmp_path / f"{name}.html"
    page.write_text(render(d), encoding="utf-8")
    dom = _browse(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-500:]
    html = dom.stdout.decode("utf-8", "replace")
    assert 'id="verdict"' in html and "slurmdoc diagnosis" in html
    rc = d.root_cause
    assert rc is not None
    timeline = re.search(r'<svg class="timeline"', html)
    if timeline:
        assert '<g class="axis">' in html and 'class="legend"' in html
        marked = [m for m in re.findall(r'<g class="(row[^"]*)"', html) if "root" in m.split() or "straggler" in m.split()]
        assert marked, "the root rank's (or straggler's) row is marked"
    else:
        assert "too few times" in html
    shot = tmp_path / f"{name}.png"
    s = _browse(page, "--window-size=1200,1400", f"--screenshot={shot}")
    assert s.returncode == 0 and shot.stat().st_size > 10_000
    w, h, rows = _png_pixels(shot)
    assert (w, h) == (1200, 1400)
    if timeline and any("root" in m.split() for m in re.findall(r'<g class="(row[^"]*)"', html)):
        bpp = len(rows[0]) // w
        assert _has_color(rows, ROOT_BAND, bpp) > 500, "the root row's highlight is drawn"
    if name == "oom_one_of_512":
        assert timeline and "137" in html


def test_at_least_three_of_the_five_draw_a_timeline(write):
    drawn = 0
    for name, src in FIVE.items():
        d = diagnose([str(src or write("job_512.log", big_oom_log()))])
        drawn += '<svg class="timeline"' in render(d)
    assert drawn >= 3
