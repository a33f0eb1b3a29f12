"""Benchmark `slurmdoc scan` over many generated job logs with known truth.

    python bench/scan.py --jobs-count 5000 --dir /tmp/scanbench            # generate (once) and measure
    python bench/scan.py --jobs-count 1000 --dir /tmp/scanbench --workers 1 2

Each job is a Slurm job with one planted failure (or none), in one of three layouts: one
`slurm-%j.out` with srun --label prefixes, one file with torchrun's `[rankN]:` prefixes, or
per-node files `train-%j-node%n.out` beside `slurm-%j.out`. Sizes are a mix from 50 KiB to
20 MiB (most small, a few large), padded with iteration lines. The truth of every job goes to
truth.jsonl; after each scan every verdict (status, category, rank, node) is checked against it.
For each worker count it prints jobs/s and the peak RSS: of the largest process, and of the
whole process tree (sampled every 0.1 s from /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

FAILURES = [
    # (category, the failing rank's lines, node named in the root cause?)
    ("cuda_oom", ["Traceback (most recent call last):", '  File "train.py", line 88, in step',
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gib}.00 GiB. GPU {gpu} has a total "
                  "capacity of 79.15 GiB of which 1.2 GiB is free."]),
    ("import_error", ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
                      "ModuleNotFoundError: No module named 'apex'"]),
    ("cuda_error", ["Traceback (most recent call last):", '  File "train.py", line 120, in step',
                    "RuntimeError: CUDA error: uncorrectable ECC error encountered"]),
    ("python_exception", ["Traceback (most recent call last):", '  File "train.py", line 51, in get_batch',
                          "ValueError: bad batch at step {step}"]),
    ("shape_divisibility", ["Traceback (most recent call last):", '  File "train.py", line 12, in validate',
                            "AssertionError: num_attention_heads (28) must be divisible by tensor_model_parallel_size (8)"]),
    (None, []),
]
ITER = "iteration {it:>8}/ 500000 | consumed samples: {s:>12} | elapsed time per iteration (ms): 1012.4 | lm loss: 2.4123E+00 | grad norm: 0.311\n"


def size_for(rnd: random.Random, max_mib: float) -> int:
    x = rnd.random()
    if x < 0.70:
        kib = rnd.uniform(50, 200)
    elif x < 0.95:
        kib = rnd.uniform(200, 2048)
    else:
        kib = rnd.uniform(2048, max_mib * 1024)
    return int(kib * 1024)


def pad(fh, prefix: str, target: int, start_it: int = 1) -> int:
    """Iteration lines until the file reaches `target` bytes; returns the next iteration."""
    it = start_it
    block = "".join(prefix + ITER.format(it=i, s=i * 1024) for i in range(it, it + 256))
    while fh.tell() < target:
        fh.write(block)
        it += 256
    return it


def make_job(root: Path, job: int, rnd: random.Random, max_mib: float) -> dict:
    cat, lines = FAILURES[rnd.randrange(len(FAILURES))]
    layout = rnd.choice(["srun", "rank", "pernode"])
    ranks, nodes = 8, 2
    rank = rnd.randrange(ranks)
    node = f"gpu-{rnd.randrange(40):03d}"
    target = size_for(rnd, max_mib)
    text = [t.format(gib=rnd.randrange(1, 9), gpu=rank % 4, step=rnd.randrange(10000)) for t in lines]
    truth = {"job_id": str(job), "status": "failed" if cat else "no_failure", "category": cat,
             "rank": rank if cat else None, "layout": layout, "bytes": 0}
    if layout == "pernode":
        n = rank // (ranks // nodes)
        for k in range(nodes):
            p = root / f"train-{job}-node{k}.out"
            with open(p, "w") as fh:
                pad(fh, "", target // nodes)
                if cat and k == n:
                    fh.write("\n".join(text) + "\n")
            truth["bytes"] += p.stat().st_size
        with open(root / f"slurm-{job}.out", "w") as fh:
            if cat:
                fh.write(f"srun: error: {node}: task {rank}: Exited with exit code 1\n")
        return truth
    p = root / f"slurm-{job}.out"
    with open(p, "w") as fh:
        pre = (lambda r: f"{r}: ") if layout == "srun" else (lambda r: f"[rank{r}]:")
        fh.write(f"{pre(0)}SLURMD_NODENAME={node}\n")
        pad(fh, pre(0), target)
        if cat:
            for t in text:
                fh.write(pre(rank) + t + "\n")
            fh.write(f"srun: error: {node}: task {rank}: Exited with exit code 1\n")
    truth["bytes"] = p.stat().st_size
    return truth


def generate(d: Path, count: int, max_mib: float, seed: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    logs = d / "logs"
    logs.mkdir(exist_ok=True)
    rnd = random.Random(seed)
    with open(d / "truth.jsonl", "w") as out:
        for j in range(count):
            out.write(json.dumps(make_job(logs, 100000 + j, rnd, max_mib)) + "\n")


def peak_tree_rss(pid: int) -> int:
    """RSS (bytes) of a process and its descendants, now."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(d: Path, logs: list[str], workers: int) -> dict:
    out = d / f"scan-{workers}.jsonl"
    cmd = [sys.executable, "-m", "slurmdoc", "scan", "--format", "jsonl", "--jobs", str(workers), *logs]
    t0 = time.monotonic()
    with open(out, "w") as fh:
        p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.PIPE, text=True)
        tree = 0
        while p.poll() is None:
            tree = max(tree, peak_tree_rss(p.pid))
            time.sleep(0.1)
        err = p.stderr.read()
    took = time.monotonic() - t0
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    largest = ru.ru_maxrss * 1024  # the largest process so far (the runs before this one included)
    cpu = ru.ru_utime + ru.ru_stime - measure.cpu_before
    measure.cpu_before = ru.ru_utime + ru.ru_stime
    if p.returncode not in (0, 1):
        raise SystemExit(f"scan failed ({p.returncode}): {err.strip()[:500]}")
    return {"seconds": took, "out": out, "tree_rss": tree, "largest_rss": largest, "cpu": cpu}


measure.cpu_before = 0.0  # type: ignore[attr-defined]


def check(d: Path, out: Path, count: int) -> tuple[int, int, list[str]]:
    truth = {}
    with open(d / "truth.jsonl") as fh:
        for i, line in enumerate(fh):
            if i >= count:
                break
            t = json.loads(line)
            truth[t["job_id"]] = t
    wrong = []
    seen = 0
    with open(out) as fh:
        for line in fh:
            r = json.loads(line)
            t = truth.get(r["job_id"])
            if t is None:
                wrong.append(f"{r['job_id']}: not a generated job")
                continue
            seen += 1
            got = (r["status"], r["category"], r["rank"])
            want = (t["status"], t["category"], t["rank"])
            if got != want:
                wrong.append(f"{r['job_id']} ({t['layout']}): got {got}, truth {want}")
    return seen, len(truth), wrong


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/slurmdoc-scanbench")
    ap.add_argument("--jobs-count", type=int, nargs="+", default=[1000, 5000], help="scan the first N jobs (several N: RSS growth)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--max-mib", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    d = Path(a.dir)
    need = max(a.jobs_count)
    have = sum(1 for _ in open(d / "truth.jsonl")) if (d / "truth.jsonl").exists() else 0
    if have < need:
        t = time.monotonic()
        generate(d, need, a.max_mib, a.seed)
        print(f"generated {need} jobs in {time.monotonic() - t:.0f} s", file=sys.stderr)
    truth = [json.loads(x) for x in open(d / "truth.jsonl")]
    for n in a.jobs_count:
        ids = [t["job_id"] for t in truth[:n]]
        logs = [str(d / "logs")]
        if n < len(truth):  # the first n jobs' files, named one by one
            keep = set(ids)
            logs = sorted(str(p) for p in (d / "logs").iterdir() if _job_of(p.name) in keep)
        size = sum(t["bytes"] for t in truth[:n])
        for w in a.workers:
            m = measure(d, logs, w)
            seen, total, wrong = check(d, m["out"], n)
            print(f"jobs={n} workers={w}: {seen}/{total} jobs in {m['seconds']:.1f} s = {n / m['seconds']:.1f} jobs/s "
                  f"({size / m['seconds'] / 2**20:.0f} MiB/s of {size / 2**30:.2f} GiB; CPU {m['cpu']:.1f} s, "
                  f"{m['cpu'] / n * 1000:.0f} ms/job); peak RSS largest process "
                  f"{m['largest_rss'] / 2**20:.0f} MiB, process tree {m['tree_rss'] / 2**20:.0f} MiB; "
                  f"verdicts wrong: {len(wrong)}")
            for x in wrong[:10]:
                print("  " + x)


def _job_of(name: str) -> str:
    base = name.split(".")[0]
    return base.split("-")[1] if base.startswith("train-") else base.split("-")[-1]


if __name__ == "__main__":
    main()
