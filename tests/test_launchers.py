"""Launcher reconciliation (diagnosis.launchers): a launcher's named failure against the log."""

from __future__ import annotations

from slurmdoc.api import diagnose


def test_launcher_summary_naming_a_symptom_says_why_and_who_failed_first():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    d = diagnose([str(root / "tests" / "forms" / "30_gloo_peer_closed_summary_disagrees.log")])
    (v,) = d.launcher_verdicts
    assert v.agrees is False and v.rank == 1 and v.first_failure == 0
    assert "it only printed nccl_error" in v.note and "rank 0 failed first (python_exception" in v.note
    d = diagnose([str(root / "fixtures" / "torchrun" / "hang")])
    (v,) = d.launcher_verdicts
    assert v.agrees is False and v.first_failure == 2 and "rank 2 stalled first" in v.note


def _banner(code: str) -> list[str]:
    rule = "=" * 83
    return [rule, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "=   PID 5120 RUNNING AT cn-04",
            f"=   EXIT CODE: {code}", "=   CLEANING UP REMAINING PROCESSES", "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES", rule]


def test_a_process_managers_exit_status_names_a_signal_above_128_and_signal_0_is_none(tmp_path):
    """A process manager's banner that gives a process's exit status alone (MPICH's `EXIT
    CODE: N`) is read as the shells' statuses are: above 128 it is the signal N-128 (134 is
    SIGABRT, 139 SIGSEGV, 137 SIGKILL), the finding of the rule that claims it; below, an
    ordinary non-zero exit. A report of a process ended by `signal 0`, in any reporter's words,
    reports no signal: 0 is the null signal, which ends nothing."""
    cases = (("134", "segfault", "SIGABRT"), ("139", "segfault", "SIGSEGV"), ("137", "killed", None), ("2", "unknown", "code 2"))
    for code, category, words in cases:
        path = tmp_path / f"m{code}.log"
        path.write_text("\n".join(["iteration 12 finished"] + _banner(code)) + "\n")
        d = diagnose([str(path)])
        assert d.status == "failed" and d.root_cause.category == category, code
        assert d.root_cause.source.endswith(":5"), code
        assert words is None or words in (d.root_cause.label or ""), (code, d.root_cause.label)
    for line in ("YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Unknown signal 0 (signal 0)",
                 "the prefetch helper terminated with signal 0", "worker 3 was killed by signal 0"):
        path = tmp_path / "s0.log"
        path.write_text("\n".join(["iteration 12 finished", line, "iteration 13 finished"]) + "\n")
        d = diagnose([str(path)])
        assert d.status == "no_failure", line
        # beside a status that says the process failed, the status is the report
        path.write_text("\n".join(["iteration 12 finished"] + _banner("1") + ["", line]) + "\n")
        d = diagnose([str(path)])
        assert d.root_cause.category == "unknown" and d.root_cause.rule_id == "worker-exit-nonzero", line
