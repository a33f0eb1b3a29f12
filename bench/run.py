"""Benchmark: slurmdoc diagnose against grep -E on the same generated logs.

    python bench/run.py              # the standard table (about 2 minutes on 2 cores)
    python bench/run.py --quick      # smaller logs, fewer repetitions
    python bench/run.py --big        # adds a 4 GiB log (memory must not grow with size)

For every case it generates a log with a planted root cause (bench/genlog.py; cached in
--dir), then runs, alternating, `slurmdoc diagnose --format json` and `grep -E -c` with
every trigger literal of the rule pack, `--reps` times each; it prints medians, the ratio
grep_time / slurmdoc_time (above 1: slurmdoc is faster), throughput, and peak RSS of the
slurmdoc process. Every diagnosis is checked against the log's truth: a wrong one aborts.
It also times start-up on a 100 KiB log against `python -c "import typer, rich, pydantic,
yaml, regex"`. Nothing here is a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import genlog  # noqa: E402

MiB = 1 << 20


def run(cmd: list[str], stdout=subprocess.PIPE) -> tuple[float, float, int, bytes, int]:
    """(wall seconds, cpu seconds, peak RSS KiB, stdout, exit code) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    out = b""
    if p.stdout is not None:
        out = p.stdout.read()
    p.stderr.read()  # type: ignore[union-attr]
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, out, p.returncode


def keywords() -> tuple[list[str], list[str]]:
    from slurmdoc.engine.loader import load_rulebook
    from slurmdoc.engine.matcher import Matcher

    return Matcher(load_rulebook(None)).keywords


def grep_cmd(path: Path, cs: list[str]) -> list[str]:
    # basic -E alternation of the literals, escaped for ERE
    pat = "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", w) for w in cs)
    return ["grep", "-E", "-c", "-r" if path.is_dir() else "-s", pat, str(path)]


def slurmdoc_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "slurmdoc", "diagnose", "--format", "json", str(path)]


def check(out: bytes, truth: dict, name: str) -> None:
    d = json.loads(out)
    rc = d.get("root_cause") or {}
    want = (truth["category"], truth["root_rank"], f"{truth['root_file']}:{truth['root_line']}")
    got = (rc.get("category"), rc.get("rank"), rc.get("source"))
    symptoms = sum(len(s["ranks"]) for s in d["symptoms"] if s["category"] == "nccl_timeout")
    if got != want or d["ranks_seen"] != truth["ranks"] or symptoms != truth["symptom_ranks"]:
        sys.exit(f"WRONG diagnosis on {name}: got {got}, ranks_seen {d['ranks_seen']}, {symptoms} timed-out ranks; want {want}, {truth['ranks']}, {truth['symptom_ranks']}")


def make(dirpath: Path, size: int, ranks: int, layout: str) -> tuple[Path, dict]:
    name = f"{layout}-{ranks}r-{size}m"
    out = dirpath / (name if layout == "files" else name + ".log")
    tfile = dirpath / (name + ".truth.json")
    if not tfile.exists():
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        root = (ranks * 137 // 512) % ranks
        truth = genlog.generate(str(out), size, ranks, layout, root)
        tfile.write_text(json.dumps(truth))
    return out, json.loads(tfile.read_text())


def disk_size(p: Path) -> int:
    if p.is_dir():
        return sum(f.stat().st_size for f in p.iterdir())
    return p.stat().st_size


def bench_case(dirpath: Path, size: int, ranks: int, layout: str, reps: int, cs: list[str]) -> dict:
    path, truth = make(dirpath, size, ranks, layout)
    nbytes = disk_size(path)
    sd, gr, rss, cpu = [], [], [], []
    run(slurmdoc_cmd(path))  # warm the page cache
    for _ in range(reps):
        w, c, m, out, code = run(slurmdoc_cmd(path))
        if code != 1:
            sys.exit(f"slurmdoc exited {code} on {path}")
        check(out, truth, path.name)
        sd.append(w)
        cpu.append(c)
        rss.append(m)
        w, _, _, _, code = run(grep_cmd(path, cs))
        if code not in (0, 1):
            sys.exit(f"grep exited {code} on {path}")
        gr.append(w)
    s, g = statistics.median(sd), statistics.median(gr)
    return {
        "case": f"{layout}, {ranks} ranks",
        "bytes": nbytes,
        "slurmdoc_s": s,
        "slurmdoc_cpu_s": statistics.median(cpu),
        "grep_s": g,
        "ratio": g / s,
        "mib_per_s": nbytes / MiB / s,
        "rss_mib": max(rss) / 1024,
    }


def startup(dirpath: Path, reps: int) -> dict:
    small = dirpath / "small-100k.log"
    if not small.exists():
        path, _ = make(dirpath, 10, 64, "srun")
        with open(path, "rb") as f:
            small.write_bytes(f.read(100 * 1024).rsplit(b"\n", 1)[0] + b"\n")
    base, ours = [], []
    for _ in range(reps):
        base.append(run([sys.executable, "-c", "import typer, rich, pydantic, yaml, regex"])[0])
        ours.append(run([sys.executable, "-m", "slurmdoc", "diagnose", str(small)])[0])
    b, o = statistics.median(base), statistics.median(ours)
    return {"imports_s": b, "slurmdoc_s": o, "factor": o / b}


def fmt_size(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / MiB:.0f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description="slurmdoc vs grep -E on generated multi-rank logs")
    ap.add_argument("--dir", default=os.environ.get("SLURMDOC_BENCH_DIR", "/tmp/slurmdoc-bench"), help="where generated logs are cached")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="logs up to 100 MiB, 2 repetitions")
    ap.add_argument("--big", action="store_true", help="add a 4 GiB log")
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    from slurmdoc.ingest.scan import Prefilter

    cs, ci = keywords()
    engine = os.environ.get("SLURMDOC_PREFILTER", "auto")
    engine = Prefilter(cs, ci, engine=engine).engine
    reps = 2 if a.quick else a.reps
    g = 100 if a.quick else 1024
    cases = [(10, 8, "srun"), (100, 4096, "srun")] + ([] if a.quick else [(100, 512, "srun")]) + [
        (g, 512, "srun"),
        (g, 512, "rank"),
        (g, 512, "files"),
    ]
    if a.big:
        cases.append((4096, 512, "srun"))
    print(f"# slurmdoc bench: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, prefilter {engine}, "
          f"{len(cs) + len(ci)} trigger literals, LANG={os.environ.get('LANG', '')!r} LC_ALL={os.environ.get('LC_ALL', '')!r}, median of {reps}")
    print()
    print("| log | size | slurmdoc | (its CPU time) | grep -E | ratio grep/slurmdoc | throughput | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for size, ranks, layout in cases:
        r = bench_case(d, size, ranks, layout, reps, cs)
        results.append(r)
        print(f"| {r['case']}{' (per-rank files)' if layout == 'files' else ''} | {fmt_size(r['bytes'])} | {r['slurmdoc_s']:.2f} s | {r['slurmdoc_cpu_s']:.2f} s | {r['grep_s']:.2f} s | "
              f"{r['ratio']:.2f} | {r['mib_per_s']:.0f} MiB/s | {r['rss_mib']:.0f} MiB |", flush=True)
    s = startup(d, max(reps, 5))
    print()
    print(f"start-up on a 100 KiB log: {s['slurmdoc_s']:.2f} s; `python -c \"import typer, rich, pydantic, yaml, regex\"`: "
          f"{s['imports_s']:.2f} s; factor {s['factor']:.1f}")
    single = results[cases.index((g, 512, "srun"))]
    files = results[cases.index((g, 512, "files"))]
    print(f"512 per-rank files vs one file of the same size: {files['slurmdoc_s'] / single['slurmdoc_s']:.2f}x the time")
    print("every diagnosis above named the planted root cause, its rank, file and line, and every timed-out rank")


if __name__ == "__main__":
    main()
