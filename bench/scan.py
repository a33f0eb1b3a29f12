"""Benchmark `slurmdoc scan` over a fleet of job logs made from the fixture corpus, checking
every verdict against the truth of the fixture each job was made from.

    python bench/scan.py --dir /tmp/fleet                      # 5,000 jobs up to 20 MiB: generate once, measure
    python bench/scan.py --dir /tmp/fleet --counts 1000 --workers 1 --no-shards      # a quick look

The fleet comes from bench/fleetgen.py (deterministic; written under --dir, never committed).
Scans, each `slurmdoc scan --format json`, in a fresh process:
  - for each N of --counts (the first N jobs, named by their directories; the whole fleet by
    its directory) and each K of --workers: `--jobs K`;
  - unless --no-shards, the whole fleet as 3 shards (`--shard I/3`, the three at once, as a job
    array's tasks would run on one node) then `scan merge` of the parts, whose output must be
    byte for byte that of the single-process scan.
For each it prints wall time, jobs/s, CPU time, peak RSS (the largest single process, from
wait4, and the most the whole process tree held at once, sampled every 0.1 s from /proc), the
load average before and after (the machine may be shared), and the verdicts: every job must be
one row (never merged with another, never split), with the fixture's status, category and root
rank. Jobs made from a fixture the diagnosis already gets wrong at its own size (a known miss,
found by scanning fixtures/ itself first) are counted apart from jobs that are wrong only here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleetgen  # noqa: E402

JOB_DIR = re.compile(r"[/\\]job_(\d+)(?:[/\\]|$)")


def tree_sample(pid: int) -> tuple[int, int]:
    """(sum of VmRSS, largest VmHWM) over a process and its descendants, in bytes."""
    total = hwm = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                    elif line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]) * 1024)
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return total, hwm


def run(cmds: list[list[str]], outs: list[Path]) -> dict:
    """Run the commands at once, each with stdout to its file; wall time, CPU, peak RSS."""
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    procs = []
    for cmd, out in zip(cmds, outs):
        fh = open(out, "wb")
        procs.append((subprocess.Popen(cmd, stdout=fh, stderr=subprocess.PIPE), fh))
    tree = largest = 0
    usage = {}
    while len(usage) < len(procs):
        now = 0
        for p, _ in procs:
            if p.pid in usage:
                continue
            rss, hwm = tree_sample(p.pid)
            now += rss
            largest = max(largest, hwm)
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                p.returncode = os.waitstatus_to_exitcode(status)
                usage[p.pid] = ru
        tree = max(tree, now)
        time.sleep(0.1)
    took = time.monotonic() - t0
    for p, fh in procs:
        fh.close()
        err = p.stderr.read().decode(errors="replace")
        if p.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(p.args[:6])} ... failed ({p.returncode}): {err.strip()[:500]}")
    return {"seconds": took, "cpu": sum(ru.ru_utime + ru.ru_stime for ru in usage.values()),
            "largest": max([largest] + [ru.ru_maxrss * 1024 for ru in usage.values()]), "tree": tree,
            "load": (load0, os.getloadavg()[0])}


def scan_cmd(paths: list[str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "slurmdoc", "scan", "--format", "json", *extra, *paths]


def right(row: dict, t: dict) -> bool:
    if row["status"] != t["status"]:
        return False
    if t["status"] != "failed":
        return True
    return row["category"] in t["categories"] and (t["rank"] == "all" or row["rank"] == t["rank"])


def known_misses(d: Path) -> set[str]:
    """The fixture cases whose own scan (fixtures/, unpadded) disagrees with their truth."""
    out = d / "fixtures-scan.json"
    if not out.exists():
        run([scan_cmd([str(fleetgen.FIXTURES / g) for g in fleetgen.GROUPS])], [out])
    rows = json.loads(out.read_text())["jobs"]
    by_dir = {}
    for r in rows:
        w = Path(r["where"])
        by_dir[str(w if w.is_dir() else w.parent)] = r
    misses = set()
    for name, case, truth in fleetgen.cases():
        t = {"status": truth.get("expect_status", "failed"), "categories": [truth.get("category"), "unknown"]
             if truth.get("root_source_line") is None else [truth.get("category")], "rank": truth.get("root_rank")}
        r = by_dir.get(str(case))
        if r is None or not right(r, t):
            misses.add(name)
    return misses


def check(out: Path, truths: list[dict], misses: set[str]) -> dict:
    by_job = {t["job"]: t for t in truths}
    seen: dict[str, int] = {}
    wrong, known, problems = 0, 0, []
    with open(out) as fh:
        doc = json.load(fh)
    for row in doc["jobs"]:
        m = JOB_DIR.search(row["where"])
        t = by_job.get(m.group(1)) if m else None
        if t is None:
            problems.append(f"row for {row['where']}: not one generated job (merged with another?)")
            continue
        seen[t["job"]] = seen.get(t["job"], 0) + 1
        if row["job_id"] not in (None, t["job"]):
            problems.append(f"job_{t['job']}: read as job {row['job_id']}")
        if not right(row, t):
            if t["case"] in misses:
                known += 1
            else:
                wrong += 1
                problems.append(f"job_{t['job']} ({t['case']}): got {row['status']} {row['category']} rank {row['rank']}, "
                                f"truth {t['status']} {t['categories']} rank {t['rank']}")
    problems += [f"job_{j}: {n} rows" for j, n in seen.items() if n != 1]
    problems += [f"job_{t['job']} ({t['case']}): no row" for t in truths if t["job"] not in seen]
    return {"rows": len(doc["jobs"]), "wrong": wrong, "known": known, "problems": problems}


def report(label: str, n: int, size: int, m: dict, c: dict) -> None:
    print(f"{label}: {c['rows']} rows for {n} jobs ({size / 2**30:.2f} GiB) in {m['seconds']:.1f} s = "
          f"{n / m['seconds']:.1f} jobs/s, {size / 2**20 / m['seconds']:.0f} MiB/s; CPU {m['cpu']:.1f} s "
          f"({m['cpu'] / n * 1000:.0f} ms/job); peak RSS largest process {m['largest'] / 2**20:.0f} MiB, "
          f"process tree {m['tree'] / 2**20:.0f} MiB; load average {m['load'][0]:.1f} -> {m['load'][1]:.1f}; "
          f"verdicts wrong {c['wrong']} (+{c['known']} from known misses of the fixtures)", flush=True)
    for p in c["problems"][:10]:
        print("  " + p, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/slurmdoc-fleet")
    ap.add_argument("--count", type=int, default=5000, help="jobs in the fleet")
    ap.add_argument("--counts", type=int, nargs="+", default=[1000, 5000], help="scan the first N jobs (several: RSS growth)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-shards", action="store_true")
    ap.add_argument("--max-mib", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=13)
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    want = {"count": a.count, "max_mib": a.max_mib, "seed": a.seed}
    gen = d / "generated.json"
    if not gen.exists() or json.loads(gen.read_text()) != want:
        t = time.monotonic()
        fleetgen.generate(d, a.count, a.max_mib, a.seed)
        print(f"generated {a.count} jobs in {time.monotonic() - t:.0f} s", flush=True)
    truths = [json.loads(x) for x in open(d / "truth.jsonl")]
    size_all = sum(t["bytes"] for t in truths)
    print(f"fleet: {len(truths)} jobs from {len({t['case'] for t in truths})} fixture cases, {size_all / 2**30:.2f} GiB, "
          f"{sum(t['files'] for t in truths)} files, largest job {max(t['bytes'] for t in truths) / 2**20:.1f} MiB; "
          f"{os.cpu_count()} CPUs", flush=True)
    misses = known_misses(d)
    print(f"fixture cases wrong at their own size (known misses): {len(misses)}: {', '.join(sorted(misses))}", flush=True)
    single = None
    peaks: dict[int, list[tuple[int, int]]] = {}
    failures = 0
    for n in a.counts:
        part = truths[:n]
        size = sum(t["bytes"] for t in part)
        paths = [str(d / "logs")] if n >= len(truths) else [str(d / "logs" / f"job_{t['job']}") for t in part]
        for w in a.workers:
            out = d / f"scan-{n}-{w}.json"
            m = run([scan_cmd(paths, "--jobs", str(w))], [out])
            c = check(out, part, misses)
            report(f"jobs={n} --jobs {w}", n, size, m, c)
            failures += c["wrong"] + len(c["problems"])
            peaks.setdefault(w, []).append((n, m["largest"]))
            first = d / f"scan-{n}-{a.workers[0]}.json"
            if w != a.workers[0]:
                same = out.read_bytes() == first.read_bytes()
                failures += not same
                print(f"  --jobs {w} vs --jobs {a.workers[0]}: {'byte-identical' if same else 'DIFFERENT'}", flush=True)
            if n >= len(truths) and w == 1:
                single = out
    if not a.no_shards:
        outs = [d / f"part-{i}.jsonl" for i in range(3)]
        paths = [str(d / "logs")]
        m = run([[sys.executable, "-m", "slurmdoc", "scan", "--shard", f"{i}/3", *paths] for i in range(3)], outs)
        merged = d / "merged.json"
        m2 = run([[sys.executable, "-m", "slurmdoc", "scan", "merge", "--format", "json", *map(str, outs)]], [merged])
        m["seconds"] += m2["seconds"]
        m["cpu"] += m2["cpu"]
        m["largest"] = max(m["largest"], m2["largest"])
        c = check(merged, truths, misses)
        report(f"jobs={len(truths)} 3 shards at once + merge ({m2['seconds']:.1f} s of it)", len(truths), size_all, m, c)
        failures += c["wrong"] + len(c["problems"])
        if single is not None:
            same = merged.read_bytes() == single.read_bytes()
            failures += not same
            print(f"merged parts vs one scan: {'byte-identical' if same else 'DIFFERENT'}", flush=True)
    for w, ps in peaks.items():
        print(f"--jobs {w}: peak RSS of the largest process by jobs scanned: "
              + ", ".join(f"{n}: {rss / 2**20:.0f} MiB" for n, rss in ps), flush=True)
    if failures:
        raise SystemExit(f"{failures} wrong verdict(s) or problem(s)")


if __name__ == "__main__":
    main()
