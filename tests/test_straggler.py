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


def test_a_timeout_message_that_names_the_rank_it_waited_for_names_the_root_rank(write):
    # the rank the others waited for is named inside another rank's error message, in the
    # words of a barrier that monitors its members: the waiting rank's own, or the message of
    # the rank that found which members never arrived; with or without the printer's prefix
    tb = ["Traceback (most recent call last):", '  File "/w/fsdp_init.py", line 40, in sync_params', "    dist._broadcast_coalesced(module_states)"]
    msgs = ["RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 5. Please check rank 5 logs for faulty rank.",
            "RuntimeError: Ranks 5, 6 failed to pass monitoredBarrier in 60000 ms"]
    for msg in msgs:
        for prefix in ("", "[rank2]: ", "(Actor pid=812) "):
            d = diagnose([write("j.log", "\n".join(prefix + line for line in ["step 3 loss 1.0"] + tb + [msg]))])
            assert d.root_cause.category == "nccl_timeout" and d.root_cause.rank == 5 and 5 in d.root_cause.stragglers, (msg, prefix)
    # a message that names several ranks reports them all, the first as the root
    for msg, named in (("RuntimeError: Ranks 5, 6 failed to pass monitoredBarrier in 60000 ms", [5, 6]),
                       ("RuntimeError: Ranks 3, 9, 4 failed to pass monitoredBarrier in 60000 ms", [3, 4, 9]),
                       ("RuntimeError: Rank 7 failed to pass monitoredBarrier in 60000 ms", [7])):
        d = diagnose([write("j.log", "\n".join(["[rank0]: " + line for line in ["step 3 loss 1.0"] + tb + [msg]]))])
        assert d.root_cause.rank == named[0] and sorted(d.root_cause.stragglers) == named and sorted(d.root_cause.ranks) == named, msg
    # a rank's own crash still leads over the echo that names it
    crash = ["[rank5]: Traceback (most recent call last):", '[rank5]:   File "/w/train.py", line 9, in step', "[rank5]: ValueError: empty batch"]
    d = diagnose([write("j.log", "\n".join(crash + ["[rank2]: " + line for line in tb + [msgs[0]]]))])
    assert d.root_cause.category == "python_exception" and d.root_cause.rank == 5
