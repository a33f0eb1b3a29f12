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
