"""Turn a job's accounting rows into a verdict: the first failing step, what its State and
exit codes mean, memory and time against what was requested, the contract category."""

from __future__ import annotations

import re
from typing import Optional

from slurmdoc.slurm.exitcodes import (
    ACTIVE_STATES,
    FAILED_STATES,
    exit_category,
    exit_words,
    implied_signal,
    short_exit,
    short_state,
    state_category,
    state_words,
)
from slurmdoc.slurm.models import JobTriage, StepInfo
from slurmdoc.slurm.sacct import SacctRow

# peak RSS at or above this share of the request counts as "at the memory limit"
MEM_NEAR = 0.9
# scheduler states that explain a job's end by themselves, most telling first
DECISIVE = ("OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "TIMEOUT", "DEADLINE")


def human_bytes(n: Optional[int]) -> str:
    if n is None:
        return "?"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit in ("B", "KiB") or v >= 100 else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"  # pragma: no cover


def hms(sec: Optional[int]) -> str:
    if sec is None:
        return "?"
    d, rem = divmod(int(sec), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def group_rows(rows: list[SacctRow]) -> dict[str, list[SacctRow]]:
    """Rows by job (array tasks separately, het components together), in sacct's order."""
    groups: dict[str, list[SacctRow]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    return groups


def _state_text(r: SacctRow) -> str:
    return f"{r.state} by {r.state_by}" if r.state_by else r.state


def _failed(r: SacctRow) -> bool:
    if r.state in FAILED_STATES:
        return True
    return r.exit_code is not None and not r.exit_code.ok


def task_row(r: SacctRow) -> bool:
    """Does the row's ExitCode come from a task (srun steps) rather than the batch script?"""
    return not r.is_job and r.step != "batch"


NO_CODE = ("exit code not recorded (Slurm 22.05's `sacct --json` leaves non-zero exit statuses out; "
           "`sacct -P` has them)")


def step_meaning(r: SacctRow, job_state: str) -> str:
    """A row's State and ExitCode in words, read in the light of the job's own state."""
    ec = r.exit_code
    sig = implied_signal(ec, step_row=task_row(r))
    if r.state == "COMPLETED" and (ec is None or ec.ok):
        return "completed, exit 0"
    if r.state == "CANCELLED" and sig == 15 or (r.state == "CANCELLED" and ec is not None and ec.ok):
        why = {
            "TIMEOUT": "at the job's time limit",
            "DEADLINE": "at the job's deadline",
            "CANCELLED": "by the job's cancellation",
            "PREEMPTED": "by preemption",
            "NODE_FAIL": "after a node failed",
            "OUT_OF_MEMORY": "after the memory limit was hit",
        }.get(job_state)
        if why:
            return f"terminated (SIGTERM) {why}"
        return ("terminated by SIGTERM while the job was neither cancelled nor out of time: usually srun "
                "(--kill-on-bad-exit) or a launcher ending the other tasks after one task failed")
    words = exit_words(ec, step_row=task_row(r))
    if ec is None:
        words = NO_CODE if r.state == "FAILED" else "exit code not recorded"
    if r.state and r.state not in ("FAILED", "COMPLETED", "CANCELLED"):
        return f"{state_words(r.state)}; {words}"
    return words


def _step_info(r: SacctRow, job_state: str) -> StepInfo:
    return StepInfo(
        id=r.job_id,
        name=r.name,
        state=_state_text(r),
        exit_code=str(r.exit_code) if r.exit_code is not None else None,
        meaning=step_meaning(r, job_state),
        nodes=r.nodelist,
        elapsed_s=r.elapsed_s,
        max_rss_bytes=r.max_rss_bytes,
        max_rss_node=r.max_rss_node,
        max_rss_task=r.max_rss_task,
    )


def first_failed_step(steps: list[SacctRow]) -> Optional[SacctRow]:
    """The step that failed first: srun steps before batch/extern (the batch step ends last and
    only repeats srun's status), earliest end first, a real failure before a SIGTERM echo."""

    def key(r: SacctRow):
        echo = r.state == "CANCELLED" or implied_signal(r.exit_code, True) == 15
        return (0 if r.numbered else 1 if r.step == "batch" else 2, r.end or "~", 1 if echo else 0)

    failed = [r for r in steps if _failed(r)]
    return min(failed, key=key) if failed else None


def _mem_per_node(job: SacctRow) -> Optional[int]:
    if job.req_mem_bytes is None or job.req_mem_bytes == 0:
        return None
    if job.req_mem_per == "node":
        return job.req_mem_bytes
    if job.req_mem_per == "cpu":
        if job.alloc_cpus and job.nnodes:
            return job.req_mem_bytes * job.alloc_cpus // job.nnodes
        return None
    return job.req_mem_bytes // (job.nnodes or 1)


def cpu_use(jobs: list[SacctRow], steps: list[SacctRow]) -> tuple[Optional[float], Optional[int], Optional[float], Optional[str]]:
    """(TotalCPU, AllocCPUS, CPU efficiency, a note): the CPU time the job used against what it
    held, TotalCPU / (Elapsed x AllocCPUS) as seff computes it. TotalCPU is the steps' sum
    (`sacct --json` leaves the job's own at 0), else the job row's; a het job's components add
    up. None where a figure is missing or Elapsed is 0."""
    step_cpu = [r.total_cpu_s for r in steps if r.total_cpu_s is not None]
    job_cpu = [r.total_cpu_s for r in jobs if r.total_cpu_s is not None]
    total = sum(step_cpu) if step_cpu else (sum(job_cpu) if job_cpu else None)
    held = [(r.elapsed_s, r.alloc_cpus) for r in jobs]
    alloc = sum(a for _, a in held if a) or None
    if total is None:
        return None, alloc, None, None
    total = round(total, 3)
    if not all(e is not None and a for e, a in held) or not any(e for e, _ in held):
        return total, alloc, None, f"used {hms(round(total))} of CPU time; no allocation to compare it with"
    core_s = sum(e * a for e, a in held)  # type: ignore[operator]
    eff = round(total / core_s, 4)
    note = (f"CPU efficiency {eff:.0%}: {hms(round(total))} of CPU time in {hms(core_s)} of core-walltime "
            f"({alloc} CPUs)")
    if eff > 1.01:
        note += ": more than the allocation, the accounting is inconsistent"
    return total, alloc, eff, note


def triage_job(rows: list[SacctRow]) -> JobTriage:
    """The verdict on one job from its rows; a requeued job's attempts (`sacct -D`) are kept
    apart: the last attempt is judged, the others become its history."""
    from slurmdoc.slurm.requeue import history_note, record, split_attempts

    attempts = split_attempts(rows)
    if len(attempts) < 2:
        return _triage_attempt(rows)
    runs = [_triage_attempt(a) for a in attempts]
    records = [record(i, a, t.category, t.summary) for i, (a, t) in enumerate(zip(attempts, runs))]
    last = runs[-1]
    return last.model_copy(update={"attempts": tuple(records), "notes": last.notes + (history_note(records),)})


def _triage_attempt(rows: list[SacctRow]) -> JobTriage:
    """The verdict on one attempt of a job from its rows (job row(s) first, then steps, in any order)."""
    jobs = [r for r in rows if r.is_job]
    steps = [r for r in rows if not r.is_job]
    job = jobs[0] if jobs else rows[0]
    het = len({r.job for r in rows}) > 1 or "+" in job.job
    job_id = job.group if het else job.job
    notes: list[str] = []

    # the job's state: the most telling over het components
    states = [r.state for r in jobs] or [job.state]
    job_state = next((s for s in DECISIVE if s in states), None)
    if job_state is None:
        job_state = "CANCELLED" if "CANCELLED" in states else ("FAILED" if "FAILED" in states else job.state)
    lead = next((r for r in jobs if r.state == job_state), job)

    # step-level scheduler states (OUT_OF_MEMORY on a step while the job says FAILED)
    step_states = [r.state for r in steps]
    step_decisive = next((s for s in DECISIVE if s in step_states), None)

    first = first_failed_step(steps)
    active = job_state in ACTIVE_STATES
    failed = (
        any(_failed(r) for r in jobs)
        or first is not None
        or any(r.derived is not None and not r.derived.ok for r in jobs)
    )
    category: Optional[str] = None
    why = ""
    head = ""
    if job_state in DECISIVE:
        category = state_category(job_state)
        why = state_words(job_state)
        head = short_state(job_state)
    elif step_decisive:
        category = state_category(step_decisive)
        srow = next(r for r in steps if r.state == step_decisive)
        why = f"step {srow.job_id} {state_words(step_decisive)}"
        head = f"step {srow.job_id}: {short_state(step_decisive)}"
        first = srow
    elif job_state == "CANCELLED":
        category = "cancelled"
        why = state_words("CANCELLED", lead.state_by)
        head = short_state("CANCELLED", lead.state_by)
        if first is not None and first.state == "FAILED":
            notes.append(f"step {first.job_id} had already failed ({step_meaning(first, 'FAILED')}) "
                         "before the job was cancelled")
            category = exit_category(first.exit_code, True) or "cancelled"
            head = f"step {first.job_id}: {short_exit(first.exit_code, True)}, then {head}"
    elif failed:
        src = first
        if src is not None and src.exit_code is not None and not src.exit_code.ok:
            category = exit_category(src.exit_code, step_row=task_row(src))
            why = f"step {src.job_id} {_state_text(src)} {src.exit_code}: {step_meaning(src, job_state)}"
            head = f"step {src.job_id}: {short_exit(src.exit_code, task_row(src))}"
        else:
            # no step shows the failure: the job row's own codes
            ec = next((r.exit_code for r in jobs if r.exit_code is not None and not r.exit_code.ok), None)
            dec = next((r.derived for r in jobs if r.derived is not None and not r.derived.ok), None)
            if ec is not None:
                category = exit_category(ec, step_row=False)
                why = exit_words(ec, step_row=False)
                head = f"batch script: {short_exit(ec, False)}"
            elif dec is not None:
                category = exit_category(dec, step_row=True)
                why = f"a step {exit_words(dec, step_row=True)}"
                head = f"a step: {short_exit(dec, True)}"
            else:
                category = "unknown"
                why = f"{state_words(job_state)}; {NO_CODE}"
                head = "failed, exit code not recorded"
        srun_steps = [r for r in steps if r.numbered]
        if srun_steps and not any(_failed(r) for r in srun_steps):
            notes.append(
                "every srun step is recorded COMPLETED 0:0, yet the job failed: a task's failure was not "
                "recorded on its step, or a command outside srun failed; the log tells which task failed"
            )

    # memory: peak task RSS against the per-node request
    per_node = _mem_per_node(lead)
    rss_rows = [r for r in steps if r.max_rss_bytes]
    peak = max(rss_rows, key=lambda r: r.max_rss_bytes or 0) if rss_rows else None
    memory_note = None
    if peak is not None and per_node and (peak.max_rss_bytes or 0) >= per_node // 2:
        share = (peak.max_rss_bytes or 0) / per_node
        where = f"step {peak.job_id}" + (f", task {peak.max_rss_task}" if peak.max_rss_task is not None else "") + (
            f" on {peak.max_rss_node}" if peak.max_rss_node else "")
        memory_note = (f"peak task RSS {human_bytes(peak.max_rss_bytes)} ({where}) of "
                       f"{human_bytes(per_node)} requested per node ({share:.0%})")
        if share >= MEM_NEAR:
            memory_note += ": at or over the request (MaxRSS is sampled; a spike between samples is missed)"
            sig = implied_signal(first.exit_code, task_row(first)) if first is not None else None
            if category == "killed" and sig == 9:
                category = "host_oom"
                notes.append("SIGKILL with the peak RSS at the memory request: most likely the OOM killer")
    elif peak is not None and not per_node:
        memory_note = f"peak task RSS {human_bytes(peak.max_rss_bytes)} (step {peak.job_id}); no memory request recorded"

    # time: elapsed against the limit
    time_note = None
    if lead.elapsed_s is not None:
        if lead.timelimit_s:
            share = lead.elapsed_s / lead.timelimit_s
            time_note = f"ran {hms(lead.elapsed_s)} of a {hms(lead.timelimit_s)} limit ({share:.0%})"
            if share >= 1 and job_state != "TIMEOUT":
                time_note += ": at the limit"
        else:
            time_note = f"ran {hms(lead.elapsed_s)}, no time limit"

    total_cpu, alloc, cpu_eff, cpu_note = cpu_use(jobs or [job], steps)

    if category == "killed":
        notes.append("SIGKILL with no other evidence: check MaxRSS against the request, `dmesg` for the OOM "
                     "killer on the node, or who killed it")
    if job_state == "COMPLETED" and failed:
        notes.append("Slurm records the job as COMPLETED 0:0, but a step failed: the batch script ignored "
                     "the failing srun's exit status")
    if category == "sigterm_cascade":
        notes.append("a SIGTERM is usually an echo: the task that failed first is named in the log "
                     "(run `slurmdoc diagnose --job` on it)")

    if active and not failed:
        status = "pending" if job_state == "PENDING" else "running"
    else:
        status = "failed" if failed or category is not None else "ok"
    if status == "failed" and category is None:
        category = "unknown"
    if status == "failed":
        summary = head or why or str(category)
        if category == "host_oom" and "OOM" not in summary and "memory" not in summary:
            summary += ", peak RSS at the memory request"
    elif status == "ok":
        summary = "completed, no step failed"
    else:
        summary = state_words(job_state)

    arr = re.fullmatch(r"(\d+)_(\S+)", job.job)
    return JobTriage(
        job_id=job_id,
        name=lead.name,
        status=status,
        state=_state_text(lead),
        state_meaning=state_words(lead.state, lead.state_by),
        exit_code=str(lead.exit_code) if lead.exit_code is not None else None,
        exit_meaning=exit_words(lead.exit_code, step_row=False) if lead.exit_code is not None else "not recorded",
        derived_exit_code=str(lead.derived) if lead.derived is not None else None,
        derived_meaning=(exit_words(lead.derived, step_row=True) + " (the worst srun step)")
        if lead.derived is not None else "not recorded",
        category=category if status == "failed" else None,
        summary=summary,
        first_failed_step=_step_info(first, job_state) if first is not None and status == "failed" else None,
        steps=tuple(_step_info(r, job_state) for r in rows),
        notes=tuple(notes),
        elapsed_s=lead.elapsed_s,
        timelimit_s=lead.timelimit_s,
        time_note=time_note,
        req_mem_per_node_bytes=per_node,
        max_rss_bytes=peak.max_rss_bytes if peak is not None else None,
        memory_note=memory_note,
        total_cpu_s=total_cpu,
        alloc_cpus=alloc,
        cpu_efficiency=cpu_eff,
        cpu_note=cpu_note,
        user=lead.user,
        partition=lead.partition,
        nodes=",".join(r.nodelist for r in jobs if r.nodelist) if het else lead.nodelist,
        work_dir=lead.work_dir,
        start=lead.start,
        end=lead.end,
        components=tuple(r.job for r in jobs) if het else (),
        array_job_id=arr.group(1) if arr else None,
        array_task_id=arr.group(2) if arr else None,
        raw_id=(lead.raw_id or None),
        stdout=next((r.stdout for r in jobs if r.stdout), None),
    )


def triage_rows(rows: list[SacctRow]) -> list[JobTriage]:
    return [triage_job(g) for g in group_rows(rows).values()]


def job_facts(job_id: Optional[str], acct: Optional[JobTriage]) -> dict[str, object]:
    """What a job's accounting says, as facts for the remediation (diagnose(facts=...)):
    its id, the peak task RSS, the memory request, whether the peak reached the request."""
    out: dict[str, object] = {}
    if job_id:
        out["job"] = job_id
    if acct is None:
        return out
    rss, req = acct.max_rss_bytes, acct.req_mem_per_node_bytes
    if rss:
        out["peak_rss"] = human_bytes(rss)
        out["peak_rss_from"] = "sacct's MaxRSS"
    if req:
        out["mem_request"] = f"{human_bytes(req)} per node"
    if rss and req:
        out["rss_at_limit"] = rss >= MEM_NEAR * req
    return out
