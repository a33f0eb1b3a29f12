"""Several attempts in one log (diagnosis.replay): the findings are replayed into one
diagnosis per attempt, and the last attempt's is the job's."""

from __future__ import annotations

from slurmdoc.api import diagnose


def test_each_attempt_is_diagnosed_and_the_last_one_decides(write):
    text = "\n".join([
        "SLURM_RESTART_COUNT=0",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "t.py", line 1, in <module>',
        "[rank1]: FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-0007.bin'",
        "slurmstepd: error: *** JOB 91 ON n1 CANCELLED AT 2025-03-01T10:00:00 DUE TO JOB REQUEUE ***",
        "SLURM_RESTART_COUNT=1",
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "t.py", line 9, in step',
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.",
    ])
    d = diagnose([write("job.log", text)])
    assert [a.category for a in d.attempts] == ["io_error", "cuda_oom"]
    assert d.root_cause.rank == 3 and d.root_cause.evidence == "traceback"
    assert d.verdict.startswith("2 attempts:")
