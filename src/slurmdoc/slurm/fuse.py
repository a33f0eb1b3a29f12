"""Join the log's diagnosis with the job's accounting record into one verdict, and say where
the two halves disagree."""

from __future__ import annotations

from typing import Optional

from slurmdoc.models import Diagnosis
from slurmdoc.slurm.models import JobTriage, JobVerdict

# log categories that are echoes of something else, never a better explanation than Slurm's
ECHOES = frozenset({"sigterm_cascade", "killed", "cancelled", "unknown", "nccl_timeout", "nccl_error"})
# accounting categories that only say "a task died" without saying why
GENERIC = frozenset({"unknown", "sigterm_cascade", "killed"})
# what each scheduler category is called in words
SCHED_WORDS = {
    "time_limit": "hit its time limit",
    "host_oom": "ran out of memory (Slurm's limit)",
    "node_failure": "lost a node",
    "preemption": "was preempted",
    "cancelled": "was cancelled",
}


def _who(d: Diagnosis) -> str:
    rc = d.root_cause
    if rc is None:
        return ""
    bits = []
    if rc.rank is not None:
        bits.append(f"rank {rc.rank}")
    if rc.node:
        bits.append(f"on {rc.node}")
    bits.append(f"at {rc.source}")
    return " ".join(bits)


def fuse(job_id: str, diag: Optional[Diagnosis], acct: Optional[JobTriage], *, logs: tuple[str, ...] = (),
         log_found_by: Optional[str] = None, log_note: Optional[str] = None, partial: bool = False,
         extra_notes: tuple[str, ...] = ()) -> JobVerdict:
    contradictions: list[str] = []
    notes: list[str] = list(extra_notes)
    log_failed = diag is not None and diag.status == "failed" and diag.root_cause is not None
    acct_failed = acct is not None and acct.status == "failed"
    rc = diag.root_cause if diag is not None else None
    log_cat = rc.category if rc is not None and log_failed else None
    acc_cat = acct.category if acct_failed else None
    rank = rc.rank if rc is not None else None
    agrees: Optional[bool] = None
    category: Optional[str] = None
    verdict = ""
    codes = f"{acct.state} {acct.exit_code or '?'}" if acct is not None else ""

    if diag is None and acct is None:
        return JobVerdict(job_id=job_id, status="no_failure", category=None,
                          verdict=f"job {job_id}: neither a log nor an accounting record was found",
                          logs=logs, log_found_by=log_found_by, log_note=log_note, partial=partial)
    if diag is None:
        assert acct is not None
        category = acc_cat
        verdict = f"job {job_id}: {acct.summary} (accounting only: {log_note or 'no log diagnosed'})"
    elif acct is None:
        category = log_cat
        verdict = diag.verdict + " (log only: no accounting record)"
    elif log_failed and acct_failed:
        assert rc is not None and acct is not None
        if acc_cat in SCHED_WORDS and acc_cat != log_cat:
            # Slurm's state explains the end of the job; the log may hold an earlier failure
            if log_cat in ECHOES or log_cat in ("time_limit", "preemption", "node_failure"):
                category, agrees = acc_cat, log_cat in (acc_cat, "sigterm_cascade", "killed", "cancelled")
                verdict = f"job {job_id} {SCHED_WORDS[acc_cat]} ({codes}); the log's last word: {rc.title} {_who(diag)}"
                if log_cat == "nccl_timeout":
                    notes.append("ranks were waiting in a collective: the job hung before Slurm ended it")
            else:
                category, agrees = log_cat, False
                contradictions.append(
                    f"Slurm records {codes} ({acct.summary}), but the log shows {log_cat} {_who(diag)} first: "
                    f"the job failed, then {SCHED_WORDS[acc_cat]}"
                    + (" (hung after the failure until the limit)" if acc_cat == "time_limit" else ""))
                verdict = f"job {job_id}: {rc.title} [{log_cat}] {_who(diag)}; Slurm then records {codes}"
        else:
            category = log_cat if (log_cat not in ECHOES or acc_cat in GENERIC) else acc_cat
            agrees = log_cat == acc_cat or acc_cat in GENERIC
            step = acct.first_failed_step
            if acc_cat == "sigterm_cascade" and log_cat not in ("sigterm_cascade", "cancelled", "time_limit"):
                contradictions.append(
                    f"sacct shows step {step.id if step else '?'} ended by SIGTERM ({step.exit_code if step else '0:15'}), "
                    f"but the log shows {log_cat} {_who(diag)} first: srun --kill-on-bad-exit or the launcher "
                    f"turned that failure into a SIGTERM for the other tasks")
            elif step is not None and step.id.endswith(".batch") and any(
                    s.state == "COMPLETED" and s.id.rsplit(".", 1)[-1].isdigit() for s in acct.steps):
                contradictions.append(
                    f"sacct records every srun step COMPLETED 0:0 and only the batch script failing "
                    f"({step.exit_code}), but the log shows {log_cat} {_who(diag)}: the task's failure was not "
                    "recorded on its step")
            elif acc_cat == "killed" and log_cat not in ("killed", "host_oom", "sigterm_cascade"):
                notes.append(f"sacct shows a SIGKILL; the log's first failure is {log_cat} {_who(diag)}")
            verdict = f"job {job_id}: {rc.title} [{category}] {_who(diag)}; Slurm: {codes}, {acct.summary}"
            if acc_cat == "host_oom" and log_cat != "host_oom":
                category = "host_oom"
                verdict = f"job {job_id} ran out of memory ({acct.summary}); the log's first failure: {rc.title} {_who(diag)}"
    elif log_failed and acct is not None and not acct_failed:
        assert rc is not None
        category, agrees = log_cat, False
        if acct.status in ("running", "pending"):
            notes.append(f"the job is still {acct.status}; the log already shows a failure")
            agrees = None
        else:
            contradictions.append(
                f"Slurm records the job as {codes}, but the log shows {log_cat} {_who(diag)}: the batch script "
                "ignored the failure (e.g. `srun ... || true`, a pipe, or no `set -e`), so Slurm never saw it")
        verdict = f"job {job_id}: {rc.title} [{log_cat}] {_who(diag)}; Slurm records {codes}"
    elif acct_failed and not log_failed:
        assert acct is not None
        category = acc_cat
        agrees = acc_cat in SCHED_WORDS or acc_cat in ("killed",)
        if not agrees:
            contradictions.append(
                f"Slurm records {codes} ({acct.summary}), but the log shows no failure: the error went "
                "elsewhere (a separate --error file, a per-rank log) or was never printed")
        elif acc_cat == "killed":
            notes.append("a SIGKILL that left nothing in the log: most often the kernel OOM killer (check dmesg "
                         "and MaxRSS)")
        verdict = f"job {job_id}: {acct.summary} ({codes}); the log shows no failure"
    else:
        agrees = True
        verdict = f"job {job_id}: no failure in the log" + (f", Slurm records {codes}" if acct is not None else "")
    status = "failed" if (log_failed or acct_failed) else "no_failure"
    if status == "failed" and category is None:
        category = "unknown"
    if contradictions:
        agrees = False
    if partial:
        notes.append("the time budget ran out: the diagnosis covers only part of the log")
    return JobVerdict(
        job_id=job_id, status=status, category=category if status == "failed" else None, rank=rank,
        verdict=verdict, agrees=agrees, contradictions=tuple(contradictions), notes=tuple(notes),
        accounting=acct, logs=logs, log_found_by=log_found_by, log_note=log_note, partial=partial,
    )
