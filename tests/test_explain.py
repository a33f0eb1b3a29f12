"""Explanation (diagnosis.explain): evidence lines and remediation of the root cause."""

from __future__ import annotations

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
