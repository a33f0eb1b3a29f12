"""Generate a fleet of job logs from the real fixture corpus, each job with the truth of the
fixture it was made from.

    python bench/fleetgen.py --count 5000 --out /tmp/fleet        # logs under /tmp/fleet/logs, truth.jsonl

Job k is a copy of fixture case k mod C (the cases of fixtures/{torchrun,slurm,documented,
launchers}, in a fixed shuffled order), so every case and its layout (srun --label, torchrun
prefixes, per-node and per-task files, torchrun --log-dir trees, the six launchers) recurs
about count/C times. Each copy lives in its own directory `logs/job_<id>/`, as `--output=%j/...`
would put it; the fixture's own job id is replaced by the new one wherever Slurm writes it (file
names, `job N on`, `*** JOB N ON`, `*** STEP N.0`, `StepId=N.0`, `SLURM_JOB_ID=N`,
`srun: job N queued`, the rendezvous id), so no two copies name the same job.

Sizes are a mix from 50 KiB to --max-mib (70% 50-200 KiB, 25% 200 KiB-2 MiB, 5% 2 MiB up to
the largest): the job's main log (the first the truth names) is grown to its size by output
that comes before the fixture's own, as a batch script's prologue prints it (environment,
package list, data preparation lines with varying numbers); none of it is an error, a warning
or a progress line, so the truth of the fixture stays the truth of the copy.

Deterministic: the same --seed and --count give the same bytes. Nothing here is committed;
write it to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GROUPS = ("torchrun", "slurm", "documented", "launchers")
LOG_SUFFIXES = (".out", ".err", ".log", ".txt", ".stdout", ".stderr")
FIRST_ID = 300000

PROLOGUE = [
    "prep: tokenized shard {a:06d} of 40960: {b} documents, {c} tokens in {d}.{e} s",
    "prep: index /datasets/corpus-v{e}/part-{a:05d}.idx mapped ({b} MiB, {c} sequences)",
    "env: MODULEPATH entry /opt/modules/{e}/linux-x86_64 added",
    "pip: package-{a} version {e}.{d}.{c} from /opt/wheels/package_{a}-{e}.{d}.{c}-py3-none-any.whl",
    "prep: sample {b} of shard {a}: length {c} tokens, {d} pad tokens",
    "copy: /scratch/staging/{a:05d}/data-{b}.bin -> /local/cache/data-{b}.bin ({c} bytes)",
]


def cases() -> list[tuple[str, Path, dict]]:
    out = []
    for g in GROUPS:
        for t in sorted((FIXTURES / g).glob("*/truth.yaml")):
            out.append((f"{g}/{t.parent.name}", t.parent, yaml.safe_load(t.read_text())))
    return out


def case_files(case: Path, truth: dict) -> list[Path]:
    """The case's logs: those its truth names, else every log-named file under it (torchrun trees)."""
    if truth.get("logs"):
        return [case / n for n in truth["logs"]]
    return sorted(p for p in case.rglob("*") if p.is_file() and p.name.lower().removesuffix(".gz").endswith(LOG_SUFFIXES))


def fixture_job_id(truth: dict, files: list[Path]) -> str | None:
    if truth.get("job_id") is not None:
        return str(truth["job_id"])
    for p in files:
        m = re.fullmatch(r"slurm-(\d+)\.out", p.name)
        if m:
            return m.group(1)
    return None


def renamer(fid: str | None, new: str):
    if fid is None:
        return lambda s: s
    rx = re.compile(r"(?:(?<=job )|(?<=JOB )|(?<=STEP )|(?<=StepId=)|(?<=SLURM_JOB_ID=)|(?<=allocation )|(?<=rendezvous '))"
                    + re.escape(fid) + r"(?!\d)")
    return lambda s: rx.sub(new, s)


def size_for(rnd: random.Random, max_mib: float) -> int:
    x = rnd.random()
    if x < 0.70:
        kib = rnd.uniform(50, 200)
    elif x < 0.95:
        kib = rnd.uniform(200, 2048)
    else:
        kib = rnd.uniform(2048, max_mib * 1024)
    return int(kib * 1024)


def prologue_block(seed: int) -> bytes:
    """About 1 MiB of prologue lines (no two alike), reused for every job."""
    rnd = random.Random(seed)
    lines = []
    size = 0
    while size < 1 << 20:
        t = PROLOGUE[rnd.randrange(len(PROLOGUE))]
        s = t.format(a=rnd.randrange(100000), b=rnd.randrange(10, 10 ** rnd.randint(3, 9)), c=rnd.randrange(10 ** rnd.randint(2, 10)),
                     d=rnd.randrange(100), e=rnd.randrange(1, 10)) + "\n"
        lines.append(s)
        size += len(s)
    return "".join(lines).encode()


def write_job(root: Path, k: int, case: tuple[str, Path, dict], target: int, block: bytes) -> dict:
    name, cdir, truth = case
    new = str(FIRST_ID + k)
    jdir = root / f"job_{new}"
    files = case_files(cdir, truth)
    fid = fixture_job_id(truth, files)
    fix = renamer(fid, new)
    name_rx = re.compile(r"(?<!\d)" + re.escape(fid) + r"(?!\d)") if fid else None
    total = 0
    for i, src in enumerate(files):
        rel = src.relative_to(cdir)
        rel = Path(*[name_rx.sub(new, part) if name_rx else part for part in rel.parts])
        dst = jdir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        text = fix(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape") if fid else data
        with open(dst, "wb") as fh:
            if i == 0:
                pad = target - len(text)
                while pad > 0:
                    chunk = block[:pad]
                    cut = chunk.rfind(b"\n") + 1
                    if cut == 0:
                        break
                    fh.write(chunk[:cut])
                    pad -= cut
            fh.write(text)
            total += fh.tell()
    failed = truth.get("expect_status", "failed") == "failed"
    return {"job": new, "case": name, "status": "failed" if failed else "no_failure",
            "category": truth.get("category") if failed else None,
            "categories": ([truth["category"]] + ([] if truth.get("root_source_line") is not None else ["unknown"])) if failed else [],
            "rank": truth.get("root_rank") if failed else None, "bytes": total, "files": len(files)}


def generate(out: Path, count: int, max_mib: float, seed: int) -> list[dict]:
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cs = cases()
    rnd = random.Random(seed)
    rnd.shuffle(cs)
    block = prologue_block(seed)
    truths = []
    with open(out / "truth.jsonl", "w") as fh:
        for k in range(count):
            t = write_job(logs, k, cs[k % len(cs)], size_for(rnd, max_mib), block)
            fh.write(json.dumps(t) + "\n")
            truths.append(t)
    (out / "generated.json").write_text(json.dumps({"count": count, "max_mib": max_mib, "seed": seed}) + "\n")
    return truths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--max-mib", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    truths = generate(Path(a.out), a.count, a.max_mib, a.seed)
    size = sum(t["bytes"] for t in truths)
    print(f"{len(truths)} jobs from {len({t['case'] for t in truths})} fixture cases, {size / 2**30:.2f} GiB, "
          f"largest {max(t['bytes'] for t in truths) / 2**20:.1f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
