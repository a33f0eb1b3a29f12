"""Attempts of a requeued job in `sacct -D` output, kept apart.

`sacct -D` (--duplicates) lists every run of a requeued job: the job row and its steps once per
attempt, all under the same job id (`43`, `43.batch`, `43.0` ... then `43`, `43.batch`, `43.0`
again). Mixed together, a step of an earlier attempt (`43.0 CANCELLED 0:15` when the job was
requeued) reads as the failure; the job's fate is that of its last attempt. Here the rows are cut
into attempts; triage judges the last one and keeps the others as its history.
"""

from __future__ import annotations

from slurmdoc.slurm.models import AttemptRecord
from slurmdoc.slurm.sacct import SacctRow


def split_attempts(rows: list[SacctRow]) -> list[list[SacctRow]]:
    """Rows of one job (het components together) cut into attempts, oldest first.

    An attempt starts where a job row repeats a job already seen in the current attempt (a het
    job's components are different jobs of one attempt). Step rows stay with the job row above
    them. Attempts are ordered by their start time when every attempt has one, else as listed.
    """
    attempts: list[list[SacctRow]] = []
    seen: set[str] = set()
    for r in rows:
        if r.is_job:
            if r.job in seen or not attempts:
                attempts.append([])
                seen = set()
            seen.add(r.job)
        elif not attempts:
            attempts.append([])
        attempts[-1].append(r)
    starts = [next((r.start for r in a if r.is_job), None) for a in attempts]
    if len(attempts) > 1 and all(starts):
        order = sorted(range(len(attempts)), key=lambda i: (starts[i], i))
        attempts = [attempts[i] for i in order]
    return attempts


def record(index: int, rows: list[SacctRow], category, summary: str) -> AttemptRecord:
    """One attempt in the history: the job row's state and codes, with its own triage summary."""
    job = next((r for r in rows if r.is_job), rows[0])
    state = f"{job.state} by {job.state_by}" if job.state_by else job.state
    return AttemptRecord(
        index=index,
        state=state,
        exit_code=str(job.exit_code) if job.exit_code is not None else None,
        start=job.start,
        end=job.end,
        elapsed_s=job.elapsed_s,
        nodes=job.nodelist,
        category=category,
        summary=summary,
        steps=tuple(f"{r.job_id} {r.state} {r.exit_code if r.exit_code is not None else '?'}" for r in rows if not r.is_job),
    )


def history_note(records: list[AttemptRecord]) -> str:
    earlier = "; ".join(f"attempt {a.index + 1}: {a.state} {a.exit_code or '?'}" + (f" ({a.summary})" if a.summary else "")
                        for a in records[:-1])
    return f"judged the last of {len(records)} attempts (sacct -D); earlier: {earlier}"
