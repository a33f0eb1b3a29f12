"""`scan --shard` as a real Slurm job array (the README recipe): 3 array tasks each scan a shard of
fixture jobs, then `scan merge` of their parts must equal one unsharded scan, byte for byte.

Skipped when no Slurm is reachable, unless SLURMDOC_REQUIRE_SLURM=1 (CI), which makes that a
failure (as tests/test_slurm_live.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIRE = os.environ.get("SLURMDOC_REQUIRE_SLURM") == "1"
CASES = ["documented/xid_ecc", "documented/cuda_oom_allocator", "documented/illegal_memory_access",
         "slurm/srun_oom_per_task", "slurm/srun_assert_per_node", "slurm/srun_sigkill", "torchrun/multinode"]
ARRAY = """#!/bin/bash
#SBATCH --job-name=slurmdoc-scan --array=0-2 --output={parts}/scan-%A_%a.log
"{bin}" scan "{logs}" --shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" > "{parts}/part-$SLURM_ARRAY_TASK_ID.jsonl"
test $? -le 1
"""


def _unreachable() -> str | None:
    for tool in ("sbatch", "sinfo", "sacct"):
        if shutil.which(tool) is None:
            return f"no Slurm here: {tool} is not on PATH"
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%a"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError) as e:
        return f"Slurm not reachable: {e}"
    return None if p.returncode == 0 else f"Slurm not reachable: sinfo: {p.stderr.strip()[:200]}"


def _slurmdoc_bin() -> str:
    exe = Path(sys.executable).parent / "slurmdoc"
    return str(exe) if exe.exists() else shutil.which("slurmdoc") or "slurmdoc"


def test_scan_as_a_job_array_then_merge(tmp_path):
    why = _unreachable()
    if why:
        if REQUIRE:
            pytest.fail(f"SLURMDOC_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    logs, parts = tmp_path / "logs", tmp_path / "parts"
    parts.mkdir()
    for case in CASES:
        shutil.copytree(ROOT / "fixtures" / case, logs / case.replace("/", "-"),
                        ignore=shutil.ignore_patterns("truth.yaml", "*.sbatch", "sacct.*", "scontrol-*"))
    script = tmp_path / "scan-array.sbatch"
    script.write_text(ARRAY.format(bin=_slurmdoc_bin(), logs=logs, parts=parts))
    p = subprocess.run(["sbatch", "--parsable", "--wait", str(script)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    assert p.returncode == 0, f"sbatch: {p.stderr}"
    job = p.stdout.strip().split(";")[0]
    names = sorted(x.name for x in parts.glob("part-*.jsonl"))
    assert names == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"], (job, sorted(os.listdir(parts)))
    sd = [_slurmdoc_bin(), "scan"]
    merged = subprocess.run(sd + ["merge", *sorted(map(str, parts.glob("part-*.jsonl"))), "-f", "json"],
                            capture_output=True, text=True)
    whole = subprocess.run(sd + [str(logs), "-f", "json"], capture_output=True, text=True)
    assert whole.returncode == 1 and merged.returncode == 1, merged.stderr
    assert merged.stdout == whole.stdout
    assert f'"jobs": {len(CASES)},' in whole.stdout  # every fixture job, each on its own
