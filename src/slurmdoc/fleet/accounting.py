"""`scan --since/--until [--user U] [--partition P] [--state S,...]`: the jobs come from Slurm's
accounting (sacct -P -D over a time window, or saved output with --sacct-file), each job is
triaged (the last attempt of a requeued job), its log is located as `diagnose --job` locates it,
and the log's diagnosis is joined with the record (the same fusion as `diagnose --job`)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Optional

from slurmdoc.errors import InputError
from slurmdoc.fleet.jobs import job_order
from slurmdoc.slurm.models import JobTriage
from slurmdoc.slurm.sacct import CORE_FIELDS, FIELDS, SACCT_TIMEOUT, SacctRow, SlurmError, fresh_delimiter, parse_own_psv, \
    read_sacct_file, with_job_defaults

_TIME = re.compile(r"(?:\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?|now(?:[-+]\d+(?:minutes|hours|days|weeks)?)?|"
                   r"\d{2}/\d{2}(?:/\d{2})?|\d{2}:\d{2}(?::\d{2})?)", re.I)


@dataclass
class Window:
    since: Optional[str] = None
    until: Optional[str] = None
    users: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    sacct_file: Optional[str] = None

    def check(self) -> None:
        for name, v in (("--since", self.since), ("--until", self.until)):
            if v is not None and not _TIME.fullmatch(v):
                raise InputError(f"{name} {v}: not a time sacct understands",
                                 "e.g. 2026-11-01, 2026-11-01T08:00, now-7days")
        if self.sacct_file is None and self.since is None:
            raise InputError("--until/--user/--partition/--state choose jobs from sacct: give --since too",
                             "e.g. --since now-1days")


def _split(values: list[str]) -> list[str]:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def run_window(w: Window, timeout: float = SACCT_TIMEOUT) -> list[SacctRow]:
    """`sacct -P -D` over the window (every attempt of every job, all their steps)."""
    base = ["sacct", "-P", "-D", "-S", w.since or "now-1days", "-E", w.until or "now"]
    base += ["-u", ",".join(w.users)] if w.users else ["-a"]
    if w.partitions:
        base += ["-r", ",".join(w.partitions)]
    if w.states:
        base += ["-s", ",".join(w.states)]
    for fields in (FIELDS, CORE_FIELDS):
        try:
            delim = fresh_delimiter()
            p = subprocess.run(base + [f"--delimiter={delim}", "-o", ",".join(fields)], capture_output=True, text=True,
                               timeout=timeout, errors="replace")
        except FileNotFoundError:
            raise SlurmError("sacct not found", "off the cluster, pass saved `sacct -P -D` output with --sacct-file")
        except subprocess.TimeoutExpired:
            raise SlurmError(f"sacct did not answer within {timeout:.0f} s", "is slurmdbd up? a shorter window helps")
        if p.returncode == 0:
            return parse_own_psv(p.stdout, delim, "sacct")
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()[0]
        if "invalid field" in msg.lower() and fields is FIELDS:
            continue
        raise SlurmError(f"sacct failed: {msg}")
    raise SlurmError("sacct rejected slurmdoc's field list")  # pragma: no cover


def _keep(j: JobTriage, w: Window) -> bool:
    """The window's filters, applied to saved output too (sacct applies them itself)."""
    if j.status in ("running", "pending"):
        return False
    if w.users and (j.user or "") not in w.users:
        return False
    if w.partitions and (j.partition or "") not in set(w.partitions):
        return False
    if w.states and j.state.split()[0] not in {s.upper() for s in w.states}:
        return False
    if w.sacct_file is not None:
        when = j.end or j.start
        if w.since and _TIME.fullmatch(w.since) and w.since[:1].isdigit() and when and when < w.since:
            return False
        if w.until and w.until[:1].isdigit() and when and when > w.until:
            return False
    return True


def accounting_jobs(w: Window) -> list[JobTriage]:
    """The finished jobs of the window, triaged, in job-id order."""
    from slurmdoc.slurm.triage import triage_rows

    w.users, w.partitions, w.states = _split(w.users), _split(w.partitions), _split(w.states)
    w.check()
    rows = read_sacct_file(w.sacct_file) if w.sacct_file else run_window(w)
    jobs = [j for j in triage_rows(with_job_defaults(rows)) if _keep(j, w)]
    return sorted(jobs, key=lambda j: job_order(j.job_id))


def locate_logs(j: JobTriage) -> tuple[tuple[str, ...], Optional[str], Optional[str]]:
    """(log paths, how they were found, why none was) as `diagnose --job` finds them."""
    from slurmdoc.slurm.locate import JobContext, locate

    where = j.raw_id if j.array_task_id is not None and j.raw_id else j.job_id
    ctx = JobContext(job_id=where, array_job_id=j.array_job_id, array_task_id=j.array_task_id, user=j.user,
                     name=j.name, work_dir=j.work_dir)
    loc = locate(where, sacct_stdout=j.stdout, work_dir=j.work_dir, ctx=ctx)
    note = loc.note or (None if loc.paths else "no log found")
    return tuple(loc.paths), (loc.how or None), note
