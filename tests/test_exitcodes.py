"""Slurm State / ExitCode / DerivedExitCode in words, and the categories they point to."""

from __future__ import annotations

import pytest

from slurmdoc.slurm.exitcodes import (
    STATES,
    ExitCode,
    exit_category,
    exit_words,
    implied_signal,
    short_exit,
    short_state,
    state_category,
    state_words,
)

CATEGORIES = {
    "cuda_oom", "host_oom", "shape_divisibility", "import_error", "nccl_timeout", "sigterm_cascade",
    "killed", "cancelled", "time_limit", "preemption", "node_failure", "nccl_error", "cuda_error",
    "segfault", "rendezvous_error", "io_error", "numerical", "config_error", "python_exception", "unknown",
}


@pytest.mark.parametrize("code,step_row,words,category", [
    ("1:0", True, "exited 1", "unknown"),
    ("0:9", True, "SIGKILL", "killed"),
    ("9:0", False, "killed by signal 9, SIGKILL", "killed"),  # the job row of a SIGKILLed task
    ("137:0", True, "128+9", "killed"),
    ("0:15", True, "SIGTERM", "sigterm_cascade"),
    ("143:0", True, "128+15", "sigterm_cascade"),
    ("15:0", False, "signal 15, SIGTERM", "sigterm_cascade"),
    ("0:11", True, "SIGSEGV", "segfault"),
    ("139:0", True, "128+11", "segfault"),
    ("134:0", True, "SIGABRT", "segfault"),
    ("127:0", True, "command not found", "config_error"),
    ("0:0", True, "exited 0", None),
])
def test_exit_code_meanings(code, step_row, words, category):
    ec = ExitCode.parse(code)
    assert words in exit_words(ec, step_row)
    assert exit_category(ec, step_row) == category


def test_status_9_on_a_step_is_just_a_status():
    # a task that itself exits 9 is not a signal; only job and batch rows are read that way
    ec = ExitCode(9, 0)
    assert implied_signal(ec, step_row=True) is None
    assert implied_signal(ec, step_row=False) == 9
    assert exit_category(ec, True) == "unknown"


@pytest.mark.parametrize("state,category", [
    ("OUT_OF_MEMORY", "host_oom"), ("TIMEOUT", "time_limit"), ("NODE_FAIL", "node_failure"),
    ("PREEMPTED", "preemption"), ("CANCELLED", "cancelled"), ("BOOT_FAIL", "node_failure"),
    ("DEADLINE", "time_limit"), ("COMPLETED", None), ("RUNNING", None), ("PENDING", None),
    ("REQUEUED", "cancelled"),  # scontrol requeue; a preempted run is recorded PREEMPTED
])
def test_state_categories(state, category):
    assert state_category(state) == category
    assert state_words(state)


def test_every_state_category_is_a_contract_category():
    for state, (words, cat) in STATES.items():
        assert words
        assert cat is None or cat in CATEGORIES, state


def test_cancelled_by_uid():
    assert state_words("CANCELLED", "0").startswith("cancelled by root")
    assert "UID 1000" in state_words("CANCELLED", "1000")
    assert short_state("CANCELLED", "alice") == "cancelled by alice"


def test_parse():
    assert ExitCode.parse("0:15") == ExitCode(0, 15)
    assert ExitCode.parse("") is None and ExitCode.parse("x:y") is None
    assert str(ExitCode(1, 0)) == "1:0"
    assert short_exit(None, True) == "exit code not recorded"
    assert short_exit(ExitCode(0, 9), True).startswith("SIGKILL")
