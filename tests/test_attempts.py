"""Several attempts in one log (diagnosis.attempts): real torchrun --max-restarts runs and
requeues under fixtures/attempts/, and the boundary rules on small crafted logs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmdoc.api import diagnose
from slurmdoc.diagnosis.attempts import Mark, attempt_of, boundaries, history

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted(p.parent for p in (ROOT / "fixtures" / "attempts").glob("*/truth.yaml"))


def test_there_are_real_multi_attempt_cases():
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_each_attempt_matches_what_was_planted(case: Path):
    truth = yaml.safe_load((case / "truth.yaml").read_text())
    d = diagnose([str(case)])
    got = [(a.category, a.rank) for a in d.attempts]
    want = [(a["category"], a["rank"]) for a in truth["attempts"]]
    assert got == want, d.verdict
    assert d.history == truth["history"]
    assert d.verdict.startswith(truth["history"])
    assert d.status == truth["expect_status"]


def test_history_wording():
    assert history([("cuda_oom", "rank 12")] * 3) == "3 attempts: cuda_oom on rank 12 each time"
    assert history([("import_error", "rank 0"), ("cuda_oom", "rank 3")]) == "2 attempts: import_error on rank 0, then cuda_oom on rank 3"
    assert history([("python_exception", "rank 1"), (None, "")]) == "2 attempts: python_exception on rank 1, then no failure"


def test_boundaries_take_the_last_agents_end_and_drop_empty_ones():
    # two agents (srun labels 0 and 1) end attempt 0 at lines 50 and 55; attempt 1 fails at 80
    marks = [Mark(0, 50, "end", (0, "11")), Mark(0, 55, "end", (1, "12")), Mark(0, 90, "end", (0, "11")), Mark(0, 92, "end", (1, "12"))]
    b = boundaries(marks, {0: [10, 52, 80]}, {})
    assert b == {0: [56]}  # after the last pair of ends, nothing starts a new attempt
    # one agent ended its attempt; another node's failure after it is the same attempt
    assert boundaries([Mark(0, 17, "end", (0, "11"))], {0: [14, 138]}, {}) == {}
    assert attempt_of(b, 0, 53) == 0 and attempt_of(b, 0, 80) == 1
    # a start-up banner with nothing failed before it separates nothing
    assert boundaries([Mark(0, 3, "start", (), 0)], {0: [10]}, {}) == {}


def test_a_single_run_is_one_attempt(write):
    text = "\n".join([
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "t.py", line 1, in <module>',
        "[rank1]: ValueError: bad",
        "E1121 10:00:00.1 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 4411) of binary: /usr/bin/python",
        "[rank0]: step 7 loss 2.0",  # late output after the launcher's line is no new attempt
        "srun: error: n1: task 0: Exited with exit code 1",
    ])
    d = diagnose([write("job.log", text)])
    assert d.attempts == () and d.history is None and d.root_cause.rank == 1


def test_requeue_with_restart_count(write):
    text = "\n".join([
        "SLURM_RESTART_COUNT=0",
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "t.py", line 1, in <module>',
        "[rank2]: ModuleNotFoundError: No module named 'apex'",
        "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2025-03-01T10:00:00 DUE TO JOB REQUEUE ***",
        "SLURM_RESTART_COUNT=1",
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ])
    d = diagnose([write("job.log", text)])
    assert d.history == "2 attempts: import_error on rank 2, then cuda_oom on rank 5"
    assert d.root_cause.category == "cuda_oom" and d.root_cause.rank == 5
    assert d.attempts[1].starts_at is not None and d.attempts[1].starts_at.endswith("job.log:6")


def test_torchrun_attempt_directories(write):
    for k, exc in enumerate(["KeyError: 'x'", "torch.OutOfMemoryError: CUDA out of memory."]):
        write(f"logs/attempt_{k}/1/stderr.log", f"Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n{exc}\n")
        write(f"logs/attempt_{k}/0/stderr.log", "step 1\n")
    d = diagnose([str(Path(write("logs/x.txt", "")).parent)])
    assert d.history == "2 attempts: python_exception on rank 1, then cuda_oom on rank 1"
