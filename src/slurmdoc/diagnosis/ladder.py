"""The evidence ladder: how strong the evidence behind a candidate root cause is.

Strongest first:
  traceback   an assembled Python traceback with its exception line (headerless or not)
  exception   part of one: an exception line standing alone, a traceback cut before its
              exception; or a rank's own one-line error statement that a rule recognises
              (an NCCL `WARN`, a CUDA error line)
  launcher    a launcher's or the scheduler's report of a failed rank or job: torchrun's
              summary (its Root Cause block, exit code, signal), `failed (exitcode: N)`,
              DeepSpeed/accelerate/mpirun/srun exit lines, slurmstepd's messages
  exit        a non-zero exit or a signal with no words (`Killed`, `Segmentation fault
              (core dumped)`, an exit status)
  error_line  an error-like line in a rank's last output, from the generic lexicon
              (rules/fallback/error-line.yaml), with nothing more specific said

Above them all, for a hang's rank only:
  flight_recorder  the ranks' flight-recorder dumps (`--traces`) name the rank that never
              entered the collective the others waited in, or entered it differently
              (diagnosis.recorder). No rule stands on it: the dumps say where each rank was,
              not why, so they name the root rank of a hang (a timeout that leads because
              nothing else failed, a time limit, a cancellation) and never outrank a crash
              the log shows.

A rule may state its rung (`evidence:` in the rule file); otherwise the finding's form says
it. Root choice prefers a higher rung, then the earliest (diagnosis.order).
"""

from __future__ import annotations

from slurmdoc.diagnosis.findings import Finding
from slurmdoc.engine.schema import EVIDENCE_LEVELS

RECORDER = "flight_recorder"  # the rung above the rules' own (diagnosis.recorder)
LADDER = (RECORDER, *EVIDENCE_LEVELS)

# ended by a signal, whatever printed it: with no rank named and no launcher speaking, an exit
SIGNAL_CATEGORIES = ("killed", "segfault", "sigterm_cascade")
NAMES_A_RANK = ("rank", "local_rank", "tasks")
# modules of launchers: a traceback raised inside one is the launcher reporting that its
# child failed (accelerate's CalledProcessError, torchrun's ChildFailedError,
# torch.multiprocessing.spawn's join() re-raising a child's traceback as its message), not
# the child's own error
LAUNCHER_MODULES = (
    "torch/multiprocessing/spawn.py",
    "torch/distributed/run.py",
    "torch/distributed/launch.py",
    "torch/distributed/elastic/",
    "torch/distributed/launcher/",
    "accelerate/commands/launch.py",
    "deepspeed/launcher/",
)

def level_of(f: Finding) -> str:
    """The rung of the ladder a finding stands on."""
    spec = f.rule.spec
    if spec.evidence is not None:
        return spec.evidence
    ev = f.event
    if spec.launcher_verdict:
        return "launcher"
    if ev.kind == "traceback" and not spec.exit_evidence:
        frame = f.frame()
        if frame is not None and any(m in frame.replace("\\", "/") for m in LAUNCHER_MODULES):
            return "launcher"
        return "exception" if ev.partial() else "traceback"
    reported = ev.first.origin in ("launcher", "scheduler") or ev.form == "reported" or any(k in f.captures for k in NAMES_A_RANK)
    if spec.exit_evidence or spec.category in SIGNAL_CATEGORIES:
        return "launcher" if reported else "exit"
    return "launcher" if ev.first.origin in ("launcher", "scheduler") else "exception"


def strength(level: str) -> int:
    """0 for the strongest rung; a larger number is weaker evidence."""
    return LADDER.index(level)


def rank_in_choice(f: Finding) -> int:
    """How a finding ranks when the root is chosen (smaller leads; ties go to the earliest).

    A rank's own words lead: its traceback, or an error line it printed (as direct as a
    traceback, only shorter), then a traceback cut before its exception line (its kind is
    read from frames alone); then the reports of an end, a launcher's or an exit status
    (whichever came first: both say only that a process ended); then the generic lexicon.
    """
    level = level_of(f)
    if level in ("traceback", "exception"):
        return 1 if f.event.kind == "traceback" and f.event.form == "cut" else 0
    if level in ("launcher", "exit"):
        return 2
    return 3

