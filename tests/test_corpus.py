"""Golden test over the corpus made on a real Slurm (fixtures/slurm/, scripts/make-fixtures), the
documented-format GPU fixtures (fixtures/documented/) and the real runs under other launchers
(fixtures/launchers/, scripts/make-fixtures --launchers): each case is diagnosed through the
library API and compared with its truth.yaml (status, category, root rank, root node, root
source line). The saved sacct/scontrol output of each Slurm case is checked against the
accounting state its truth claims, without needing Slurm.

Known misses (slurmdoc is wrong today) are strict xfails naming what is wrong: when slurmdoc
learns the case, the xfail fails and must be removed. Truths are never edited to pass.
(fixtures/torchrun/ is covered by tests/test_fixtures.py.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corpus_cases import FIXTURES, case_dirs, inputs, job_rows, load_truth, problems, sacct_rows
from slurmdoc.api import diagnose

CASES = case_dirs("slurm", "documented", "launchers")
SLURM_CASES = case_dirs("slurm")
LAUNCHER_CASES = case_dirs("launchers")

# case (relative to fixtures/) -> what slurmdoc gets wrong today
KNOWN_MISSES: dict[str, str] = {
    # fixtures/launchers/: the general form of each miss, for the builders to fix
    "launchers/pl_sigkill": (
        'a rank SIGKILLed under a launcher that reports nothing (Lightning ddp): the rank that '
        "stops printing while its peer reports gloo 'Connection reset by peer' is the root "
        "(killed, rank 1); the peer's error is taken instead (nccl_error on rank 0)"
    ),
    "launchers/ray_sigkill": (
        "Ray Train: a worker killed by SIGKILL leaves only the driver's '[Rank 1 Error Snippet]: A "
        "worker health check failed ... its worker process has died'; the peer's gloo 'Connection "
        "reset by peer' (rank 0) is taken instead of killed on rank 1"
    ),
    "launchers/spawn_straggler": (
        "torch.multiprocessing.spawn, collective timeout: the embedded gloo 'Timed out waiting "
        "... for send operation' of process 0 is taken as python_exception with no rank; the root"
        ' is the silent process (2) that stopped stepping before the collective'
    ),
}


def _param(case: Path):
    rel = str(case.relative_to(FIXTURES))
    if rel in KNOWN_MISSES:
        return pytest.param(case, id=rel, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[rel]))
    return pytest.param(case, id=rel)


def test_corpus_size_and_spread():
    """At least 30 real runs overall, every launcher and way of submitting present."""
    real = [c for c in case_dirs() if load_truth(c).get("real", True)]
    assert len(real) >= 30, len(real)
    launchers = {load_truth(c)["launcher"] for c in SLURM_CASES}
    assert {"srun-native", "srun-torchrun", "torchrun"} <= launchers, launchers
    submits = {load_truth(c)["submit"] for c in SLURM_CASES}
    assert {"sbatch", "srun"} <= submits, submits
    documented = [load_truth(c) for c in case_dirs("documented")]
    assert documented and not any(t["real"] for t in documented)


def test_known_misses_name_existing_cases():
    names = {str(c.relative_to(FIXTURES)) for c in CASES}
    assert set(KNOWN_MISSES) <= names, set(KNOWN_MISSES) - names


def test_launcher_runs_spread():
    """At least 40 real runs under the six launchers, at least 15 of them healthy runs with
    noise, every launcher with failing and healthy runs."""
    truths = [load_truth(c) for c in LAUNCHER_CASES]
    assert len(truths) >= 40 and all(t["real"] for t in truths), len(truths)
    healthy = [t for t in truths if t["expect_status"] == "no_failure"]
    assert len(healthy) >= 15, len(healthy)
    for launcher in ("deepspeed", "accelerate", "lightning", "ray", "spawn", "mpirun"):
        statuses = {t["expect_status"] for t in truths if t["launcher"] == launcher}
        assert statuses == {"failed", "no_failure"}, (launcher, statuses)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case_matches_truth(case: Path):
    truth = load_truth(case)
    for name in truth.get("logs") or ():
        assert (case / name).is_file(), name
    d = diagnose(inputs(case, truth))
    assert problems(case, truth, d) == [], d.verdict


@pytest.mark.parametrize("case", SLURM_CASES + LAUNCHER_CASES,
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_truth_root_line_is_in_the_log(case: Path):
    """The truth's root line really is at the place it names (catches stale truths)."""
    truth = load_truth(case)
    if truth["root_source_line"] is None:
        assert truth["root_file"] is None
        return
    lines = (case / truth["root_file"]).read_text(errors="replace").split("\n")
    text = lines[truth["root_source_line"] - 1]
    assert text == truth["root_line_text"]
    assert truth["root_line_contains"] in text
    for place in truth["root_line_also_at"]:
        name, _, n = place.rpartition(":")
        assert (case / name).is_file() and 0 < int(n) <= len(lines), place


@pytest.mark.parametrize("case", SLURM_CASES, ids=lambda p: p.name)
def test_saved_accounting_matches_truth(case: Path):
    truth = load_truth(case)
    acct = truth["accounting"]
    assert acct["job_state"] == acct["expected_job_state"], "the run did not end as planned"
    rows = sacct_rows((case / "sacct.psv").read_text())
    jobs = job_rows(rows)
    assert jobs, "no job row in sacct.psv"
    last = jobs[-1]
    assert last["JobID"] == str(truth["job_id"])
    assert last["State"].split()[0] == acct["job_state"]
    assert last["ExitCode"] == acct["job_exit_code"]
    assert len(jobs) == acct["attempt_rows"]
    for step, state in acct["steps"].items():  # the last attempt's row of each step
        row = [r for r in rows if r["JobID"] == step][-1]
        assert f"{row['State']} {row['ExitCode']}" == state
    data = json.loads((case / "sacct.json").read_text())
    job = [j for j in data["jobs"] if j["job_id"] == truth["job_id"]][-1]
    assert job["state"]["current"] == acct["job_state"]
    scontrol = (case / "scontrol-show-job").read_text()
    m = re.search(r"\bJobState=(\S+)", scontrol)
    assert m and m.group(1) == acct["job_state"], scontrol[:300]
    assert re.search(rf"^JobId={truth['job_id']}\b", scontrol, re.M)


def test_sacct_rows_rejects_a_ragged_row():
    with pytest.raises(ValueError):
        sacct_rows("JobID|State\n1|FAILED|extra\n")
