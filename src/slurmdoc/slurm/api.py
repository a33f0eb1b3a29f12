"""Library entry points of the Slurm integration (re-exported by slurmdoc.api)."""

from __future__ import annotations

from typing import IO, Optional

from slurmdoc.errors import InputError
from slurmdoc.slurm.models import TriageReport
from slurmdoc.slurm.sacct import read_sacct_file, run_sacct, select, with_job_defaults
from slurmdoc.slurm.triage import triage_rows

_JOB_ID = __import__("re").compile(r"\d+([_+](\d+|\[[\d,\-%]+\]))?(\.\w+)?")


def check_job_ids(job_ids: list[str]) -> list[str]:
    """Job ids as sacct accepts them (1234, 1234_7, 1234+1); anything else is a usage error."""
    out = []
    for j in job_ids:
        for part in j.split(","):
            part = part.strip()
            if not part:
                continue
            if not _JOB_ID.fullmatch(part):
                raise InputError(f"'{part}' is not a Slurm job id", "expected e.g. 1234, 1234_7 or 1234+1")
            out.append(part.split(".", 1)[0])
    return out


def triage(job_ids: list[str], sacct_file: Optional[str] = None, stdin: Optional[IO[str]] = None) -> TriageReport:
    """The accounting verdict on each job: runs `sacct -P`, or reads saved `sacct -P`/`--json`
    output (`sacct_file`, '-' for stdin). Raises InputError (bad id, unreadable file) or
    SlurmError (sacct missing or failing)."""
    ids = check_job_ids(job_ids)
    if sacct_file is None:
        if not ids:
            raise InputError("no job id given", "name one or more job ids, or pass saved output with --sacct-file")
        rows = run_sacct(ids)
        source = "sacct"
    else:
        rows = read_sacct_file(sacct_file, stdin)
        source = "<stdin>" if sacct_file == "-" else sacct_file
    rows = with_job_defaults(select(rows, ids))
    jobs = triage_rows(rows)
    found = {r.job for r in rows} | {r.group for r in rows} | {(r.raw_id or "").split(".")[0] for r in rows}
    found |= {r.job.split("_")[0] for r in rows}
    missing = tuple(j for j in ids if j not in found)
    status = "failed" if any(j.status == "failed" for j in jobs) else "ok"
    return TriageReport(status=status, jobs=tuple(jobs), not_found=missing, source=source)
