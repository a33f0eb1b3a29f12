"""Explanation (diagnosis.explain): evidence lines of the root cause, its label, the verdict line."""

from __future__ import annotations

import pytest

from slurmdoc.api import diagnose


def test_context_that_explains_a_timeout_joins_its_evidence_and_remediation(write):
    lines = ["gpu-1:11:12 [0] NCCL INFO Using network Socket"]
    lines += [f"[rank{r}]:[E1121 10:10:00.0 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600081 milliseconds before timing out." for r in range(4)]
    rc = diagnose([write("j.log", "\n".join(lines))]).root_cause
    assert rc.category == "nccl_timeout"
    assert any("Using network Socket" in e for e in rc.evidence_lines)
    assert any("TCP sockets" in f for f in rc.remediation_parts.fix)
    # without a timeout or NCCL error, the same line is no failure at all
    assert diagnose([write("k.log", lines[0])]).status == "no_failure"


# ---- labels: the verdict's words for how a process ended (rule `label`, explain.named)


@pytest.mark.parametrize(
    "line, words",
    [
        ("srun: error: n2: task 1: Bus error", "segfault (SIGBUS, bus error) on rank 1"),
        ("srun: error: n2: task 1: Illegal instruction", "segfault (SIGILL, illegal instruction) on rank 1"),
        ("srun: error: n2: task 1: Floating point exception", "segfault (SIGFPE, floating-point exception) on rank 1"),
        ("srun: error: n2: task 1: Exited with exit code 134", "segfault (SIGABRT, abort) on rank 1"),
        ("srun: error: n2: task 1: Exited with exit code 3", "unknown (exited with code 3, no error text in the log) on rank 1"),
    ],
)
def test_a_signal_or_a_bare_exit_reads_in_its_own_words(write, line, words):
    lines = [f"{r}: step 1 loss 2.0" for r in range(4)] + [line]
    d = diagnose([write("j.log", "\n".join(lines))])
    assert words in d.verdict, d.verdict
    assert d.root_cause.label and d.root_cause.label in words


def test_a_manual_requeue_is_not_preemption(write):
    line = "slurmstepd: error: *** JOB 91 ON n1 CANCELLED AT 2025-03-01T10:00:00 DUE TO JOB REQUEUE ***"
    rc = diagnose([write("j.log", "0: step 1\n" + line)]).root_cause
    assert rc.category == "cancelled" and rc.rule_id == "requeued" and "requeue" in rc.label
    line = line.replace("JOB REQUEUE", "PREEMPTION")
    assert diagnose([write("k.log", "0: step 1\n" + line)]).root_cause.category == "preemption"


def test_no_failure_says_what_it_saw(write):
    steps = [f"step {s} loss 1.0" for s in range(5)]
    # four ranks told apart by their srun labels
    d = diagnose([write("a.log", "\n".join(f"{r}: {s}" for s in steps for r in range(4)))])
    assert d.verdict == "No failure found: 4 ranks seen in 20 lines; progress reached step 4."
    # the same run without labels: no rank can be counted, and the report says why instead of "0 ranks"
    d = diagnose([write("b.log", "\n".join(s for s in steps for _ in range(4)))])
    assert d.ranks_seen == 0 and "0 ranks" not in d.verdict
    assert d.verdict.startswith("No failure found in 20 lines: no line names its rank") and "step 4" in d.verdict
