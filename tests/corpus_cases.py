"""The fixture corpus and what counts as a right diagnosis of one case (shared by
tests/test_corpus.py and scripts/corpus-report).

A case is a directory holding a truth.yaml and the logs it names:
  fixtures/torchrun/<case>/    real torchrun runs (scripts/make-torchrun-fixtures)
  fixtures/slurm/<case>/       real runs on a real Slurm (scripts/make-fixtures), with sacct output
  fixtures/documented/<case>/  hand-written in the formats GPU software documents (real: false)
  fixtures/launchers/<case>/   real runs under DeepSpeed, accelerate, Lightning, Ray Train,
                               torch.multiprocessing.spawn and mpirun (fixtures/launchers/make.py)
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml

from slurmdoc.models import Diagnosis

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GROUPS = ("torchrun", "slurm", "documented", "launchers")


def case_dirs(*groups: str) -> list[Path]:
    out: list[Path] = []
    for g in groups or GROUPS:
        out.extend(sorted(p.parent for p in (FIXTURES / g).glob("*/truth.yaml")))
    return out


def load_truth(case: Path) -> dict:
    return yaml.safe_load((case / "truth.yaml").read_text())


def inputs(case: Path, truth: dict) -> list[str]:
    """The paths a user would hand to `slurmdoc diagnose`: the logs the truth names, else the
    case directory (torchrun cases, whose --log-dir trees are read as a whole)."""
    logs = truth.get("logs")
    return [str(case / name) for name in logs] if logs else [str(case)]


def problems(case: Path, truth: dict, d: Diagnosis) -> list[str]:
    """Every way the diagnosis `d` differs from the truth (empty: right)."""
    out: list[str] = []
    rc = d.root_cause
    want_status = truth.get("expect_status", "failed")
    if d.status != want_status:
        out.append(f"status {d.status}, truth {want_status}")
    if want_status == "no_failure":
        if rc is not None:
            out.append(f"root cause {rc.category} on rank {rc.rank} although nothing failed")
        return out
    if rc is None:
        return out + ["no root cause"]
    if rc.category != truth["category"]:
        out.append(f"category {rc.category}, truth {truth['category']}")
    out.extend(rank_problems(truth, rc.rank, rc.all_ranks))
    node = truth.get("root_node")
    # checked where a reader of the log can know it (srun names the task's node, torchrun's
    # summary names the host); on this one-host cluster torchrun's summary says 'localhost'
    if node is not None and truth.get("root_node_evident", True) and rc.node != node:
        out.append(f"node {rc.node}, truth {node}")
    line = truth.get("root_source_line")
    if line is not None:
        want = {f"{truth['root_file']}:{line}"} | set(truth.get("root_line_also_at") or ())
        path, _, lineno = rc.source.rpartition(":")
        got = f"{Path(path).relative_to(case) if Path(path).is_relative_to(case) else path}:{lineno}"
        if got not in want:
            out.append(f"source {got}, truth {sorted(want)[0]}")
    return out


def rank_problems(truth: dict, rank: Optional[int], all_ranks: bool) -> list[str]:
    want = truth.get("root_rank")
    if want == "all":
        return [] if all_ranks else [f"rank {rank}, truth: all ranks failed alike"]
    if rank != want:
        return [f"rank {rank}, truth {want}"]
    return []


def rank_right(truth: dict, d: Diagnosis) -> bool:
    rc = d.root_cause
    if rc is None:
        return truth.get("expect_status") == "no_failure"
    return not rank_problems(truth, rc.rank, rc.all_ranks)


def category_right(truth: dict, d: Diagnosis) -> bool:
    rc = d.root_cause
    if truth.get("expect_status") == "no_failure":
        return rc is None and d.status == "no_failure"
    return rc is not None and rc.category == truth["category"]


# ---- saved accounting (no Slurm needed) ------------------------------------------------------


def sacct_rows(text: str) -> list[dict[str, str]]:
    """`sacct -P` output (header line, '|'-separated) as one dict per row."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    rows = []
    for ln in lines[1:]:
        cells = ln.split("|")
        if len(cells) != len(head):
            raise ValueError(f"row with {len(cells)} fields, header has {len(head)}: {ln[:80]}")
        rows.append(dict(zip(head, cells)))
    return rows


def job_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The job-level rows (no '.step' suffix): one per attempt with sacct -D."""
    return [r for r in rows if "." not in r["JobID"]]
