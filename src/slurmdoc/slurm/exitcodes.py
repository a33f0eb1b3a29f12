"""What Slurm's State, ExitCode and DerivedExitCode mean, in words, and which contract
category they point to.

`ExitCode` is `status:signal`: the exit status of the batch script (job and batch rows) or of
the step's first failing task (step rows), and the signal that ended it. A signal also shows up
folded into a status: a shell reports a child killed by signal N as 128+N (137 = SIGKILL; srun
returned 137 to the batch script when a task was SIGKILLed), and the job and batch rows then read
`9:0` next to the step's `0:9`: the same SIGKILL seen from the batch script (Slurm 22.05, see
tests/data/sacct/).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# Linux signal numbers (the cluster's, not necessarily this host's) and what they usually mean.
SIGNALS: dict[int, tuple[str, str]] = {
    1: ("SIGHUP", "hang-up: the controlling terminal or parent went away"),
    2: ("SIGINT", "interrupt (Ctrl-C)"),
    3: ("SIGQUIT", "quit"),
    4: ("SIGILL", "illegal instruction: a binary built for another CPU"),
    6: ("SIGABRT", "abort: an assertion or fatal error in native code (C++ exception, glibc check)"),
    7: ("SIGBUS", "bus error: often a file mapped with mmap shrank, or /dev/shm is full"),
    8: ("SIGFPE", "floating-point exception in native code (integer division by zero)"),
    9: ("SIGKILL", "killed: most often the kernel OOM killer, else Slurm after a cancellation's grace period or an admin"),
    10: ("SIGUSR1", "user signal 1 (often a requeue/checkpoint warning sent with --signal)"),
    11: ("SIGSEGV", "segmentation fault in native code"),
    12: ("SIGUSR2", "user signal 2"),
    13: ("SIGPIPE", "broken pipe: the reader of its output went away"),
    14: ("SIGALRM", "alarm clock"),
    15: ("SIGTERM", "terminated: a cancellation, a time limit, preemption, or the launcher ending the other tasks after one failed"),
    24: ("SIGXCPU", "CPU time limit exceeded"),
    25: ("SIGXFSZ", "file size limit exceeded"),
    # Not a kernel signal in practice: Slurm 22.05 records 0:53 on the batch step when slurmstepd
    # cannot set up the job's I/O ("Could not open stdout file ...": a missing --output directory)
    53: ("signal 53", "Slurm could not start the batch script's I/O: most often its --output/--error file "
                      "could not be opened (missing directory, permissions)"),
}

# A signal's short words, for a verdict line ("segfault (SIGBUS, bus error) on rank 3")
SIGNAL_WORDS: dict[int, str] = {
    1: "hang-up", 2: "interrupt", 3: "quit", 4: "illegal instruction", 6: "abort", 7: "bus error",
    8: "floating-point exception", 9: "killed", 10: "user signal 1", 11: "segmentation fault",
    12: "user signal 2", 13: "broken pipe", 14: "alarm clock", 15: "terminated", 24: "CPU time limit",
    25: "file size limit",
}

# A job or batch row shows a task killed by one of these as `N:0` (the step row: `0:N`).
SRUN_SIGNALS = frozenset({6, 7, 9, 11, 15})

# Category of a failure that shows only as a signal.
SIGNAL_CATEGORY: dict[int, str] = {
    9: "killed",
    11: "segfault",
    6: "segfault",
    7: "segfault",
    4: "segfault",
    8: "segfault",
    15: "sigterm_cascade",
    2: "cancelled",
    1: "cancelled",
    53: "io_error",
}

# Slurm job/step states: words, category (None: not a failure), terminal?
STATES: dict[str, tuple[str, Optional[str]]] = {
    "COMPLETED": ("completed: every process exited 0", None),
    "FAILED": ("failed: non-zero exit code or other failure", "unknown"),
    "CANCELLED": ("cancelled by a user or an administrator (scancel)", "cancelled"),
    "TIMEOUT": ("reached its time limit; Slurm sent SIGTERM, then SIGKILL after KillWait", "time_limit"),
    "OUT_OF_MEMORY": ("exceeded its memory limit; the cgroup OOM killer ended it", "host_oom"),
    "NODE_FAIL": ("a node of the allocation failed (slurmd stopped responding)", "node_failure"),
    "BOOT_FAIL": ("a node failed to boot; the job never started", "node_failure"),
    "PREEMPTED": ("preempted by a higher-priority job", "preemption"),
    "DEADLINE": ("reached its --deadline before it could finish", "time_limit"),
    "REVOKED": ("revoked: a sibling of a federated job started elsewhere", None),
    "SPECIAL_EXIT": ("ended with a special exit value (requeued and held)", "unknown"),
    # `scontrol requeue` (a user, an administrator, a script); preemption records PREEMPTED
    "REQUEUED": ("requeued (scontrol requeue: by a user, an administrator or a script), not preempted", "cancelled"),
    "RESIZING": ("changing size", None),
    "SUSPENDED": ("suspended", None),
    "PENDING": ("pending: waiting for resources or a dependency", None),
    "RUNNING": ("running", None),
    "COMPLETING": ("completing: processes are being cleaned up", None),
    "CONFIGURING": ("configuring nodes", None),
    "REQUEUE_FED": ("requeued (federation)", None),
    "REQUEUE_HOLD": ("requeued and held", None),
    "STAGE_OUT": ("staging out", None),
    "STOPPED": ("stopped", None),
    "SIGNALING": ("being signalled", None),
    "RESV_DEL_HOLD": ("held: its reservation was deleted", None),
}

ACTIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "RESIZING", "SUSPENDED", "REQUEUED",
     "REQUEUE_FED", "REQUEUE_HOLD", "STAGE_OUT", "STOPPED", "SIGNALING", "RESV_DEL_HOLD"}
)
FAILED_STATES = frozenset(
    {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED",
     "DEADLINE", "SPECIAL_EXIT"}
)
# States that say by themselves why the job ended, whatever the exit codes show.
SCHEDULER_STATES = ("OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "DEADLINE", "CANCELLED")


@dataclass(frozen=True, slots=True)
class ExitCode:
    """Slurm's `status:signal` pair."""

    status: int
    signal: int

    @classmethod
    def parse(cls, text: str | None) -> Optional["ExitCode"]:
        if not text:
            return None
        head, _, tail = text.strip().partition(":")
        try:
            return cls(int(head), int(tail or 0))
        except ValueError:
            return None

    @property
    def ok(self) -> bool:
        return self.status == 0 and self.signal == 0

    def __str__(self) -> str:
        return f"{self.status}:{self.signal}"


def signal_name(n: int) -> str:
    return SIGNALS.get(n, (f"signal {n}", ""))[0]


def signal_words(n: int) -> str:
    name, words = SIGNALS.get(n, (f"signal {n}", "a signal"))
    return f"{name} ({words})" if words else name


def status_words(status: int) -> str:
    """What an exit status alone says (no signal field)."""
    if status == 0:
        return "exited 0"
    if status == 127:
        return "exited 127: command not found (a missing program or a PATH/module problem)"
    if status == 126:
        return "exited 126: the command was found but could not be executed (permissions, wrong binary format)"
    if 128 < status <= 128 + 64:
        sig = status - 128
        return f"exited {status} = 128+{sig}: a shell reporting a process killed by {signal_words(sig)}"
    return f"the program exited {status}"


def exit_words(ec: Optional[ExitCode], step_row: bool) -> str:
    """`1:0` -> 'the program exited 1'; `0:9` -> 'killed by SIGKILL (...)'."""
    if ec is None:
        return "no exit code recorded"
    if ec.ok:
        return "exited 0"
    if ec.signal:
        text = f"killed by {signal_words(ec.signal)}"
        if ec.status:
            text += f", exit status {ec.status}"
        return text
    if not step_row and ec.status in SRUN_SIGNALS:
        # the batch script ended with srun's status: the signal number of a killed task
        return (f"status {ec.status} on the job row: how Slurm records a task of the batch script killed by "
                f"signal {ec.status}, {signal_words(ec.status)}")
    return status_words(ec.status)


def implied_signal(ec: Optional[ExitCode], step_row: bool) -> Optional[int]:
    """The signal an exit code points to: `0:9`, `137` (128+9), or a job row's `9:0` (srun)."""
    if ec is None or ec.ok:
        return None
    if ec.signal:
        return ec.signal
    if 128 < ec.status <= 128 + 64:
        return ec.status - 128
    if not step_row and ec.status in SRUN_SIGNALS:
        return ec.status
    return None


def exit_category(ec: Optional[ExitCode], step_row: bool) -> Optional[str]:
    """The contract category an exit code alone points to (None for success)."""
    if ec is None or ec.ok:
        return None
    sig = implied_signal(ec, step_row)
    if sig is not None:
        return SIGNAL_CATEGORY.get(sig, "unknown")
    if ec.status in (126, 127):
        return "config_error"
    return "unknown"


def state_words(state: str, by: Optional[str] = None) -> str:
    words = STATES.get(state, (state.lower(), None))[0]
    if state == "CANCELLED" and by is not None:
        who = "root" if by in ("0", "root") else (f"UID {by}" if by.isdigit() else by)
        words = f"cancelled by {who} (scancel or an administrator)"
    return words


def state_category(state: str) -> Optional[str]:
    return STATES.get(state, ("", "unknown" if state not in ACTIVE_STATES else None))[1]


SHORT_SIGNAL = {
    9: "SIGKILL (often the OOM killer)",
    15: "SIGTERM (an echo of another event)",
    11: "SIGSEGV (segfault)",
    6: "SIGABRT (native abort)",
    7: "SIGBUS",
    53: "I/O setup failed (0:53: output file not writable?)",
}
SHORT_STATE = {
    "TIMEOUT": "hit its time limit",
    "OUT_OF_MEMORY": "out of memory (Slurm's memory limit)",
    "NODE_FAIL": "a node failed",
    "BOOT_FAIL": "a node failed to boot",
    "PREEMPTED": "preempted",
    "DEADLINE": "hit its deadline",
    "CANCELLED": "cancelled",
}


def short_exit(ec: Optional[ExitCode], step_row: bool) -> str:
    """A few words for a table cell: 'exited 1', 'SIGKILL (often the OOM killer)'."""
    if ec is None:
        return "exit code not recorded"
    sig = implied_signal(ec, step_row)
    if sig is not None:
        return SHORT_SIGNAL.get(sig, signal_name(sig))
    if ec.status == 127:
        return "command not found (127)"
    if ec.status == 126:
        return "command not executable (126)"
    return f"exited {ec.status}"


def short_state(state: str, by: Optional[str] = None) -> str:
    if state == "CANCELLED" and by is not None:
        return "cancelled by " + ("root" if by in ("0", "root") else (f"UID {by}" if by.isdigit() else by))
    return SHORT_STATE.get(state, state.lower())
