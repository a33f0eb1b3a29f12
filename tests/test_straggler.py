"""Hang-like endings (diagnosis.straggler): the rank the others waited for."""

from __future__ import annotations

from slurmdoc.api import diagnose


def test_a_hung_rank_killed_at_the_end_is_reported_as_the_straggler(write):
    lines = [f"{r}: step 1" for r in range(16)]
    lines += [f"{r}: [E1121 09:10:00.0 1 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)" for r in range(16) if r != 9]
    lines += ["srun: error: n3: task 9: Killed"]
    d = diagnose([write("j.log", "\n".join(lines))])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.stragglers == (9,)
    assert any("task 9: Killed" in e for e in d.root_cause.evidence_lines)
    # a SIGKILL with no hang before it stays a kill
    d = diagnose([write("k.log", "\n".join([f"{r}: step 1" for r in range(4)] + ["srun: error: n3: task 2: Killed"]))])
    assert d.root_cause.category == "killed" and d.root_cause.rank == 2


def test_the_rank_others_waited_for_is_named_when_the_text_says(write):
    lines = [f"[rank{r}]: [rank{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms" for r in range(1, 4)]
    d = diagnose([write("u.log", "\n".join(lines))])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.rank == 0 and d.root_cause.stragglers == (0,)


def test_a_lone_reporter_of_a_timeout_is_not_called_its_cause(write):
    line = "[rank3]:[E1121 10:00:00.0 1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"
    d = diagnose([write("w.log", line)])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.rank is None
    assert any("reported by rank 3" in e for e in d.root_cause.evidence_lines)
