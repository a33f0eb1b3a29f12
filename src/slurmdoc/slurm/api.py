"""Library entry points of the Slurm integration (re-exported by slurmdoc.api)."""

from __future__ import annotations

from typing import IO, Optional

from slurmdoc.errors import InputError, SlurmdocError
from slurmdoc.slurm.models import TriageReport
from slurmdoc.slurm.sacct import read_sacct_file, run_sacct, select, with_job_defaults
from slurmdoc.slurm.triage import job_facts, triage_rows

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


def triage_window(since: Optional[str] = None, until: Optional[str] = None, users: Optional[list[str]] = None,
                  partitions: Optional[list[str]] = None, states: Optional[list[str]] = None,
                  sacct_file: Optional[str] = None) -> TriageReport:
    """The accounting verdict on every finished job of a time window (`sacct -P -D -S -E`, `-u`,
    `-r`, `-s`), or of saved output with the same filters applied, in job-id order: the listing
    `scan --since` diagnoses, without the logs."""
    from slurmdoc.fleet.accounting import Window, accounting_jobs

    w = Window(since, until, list(users or []), list(partitions or []), list(states or []), sacct_file)
    jobs = accounting_jobs(w)
    status = "failed" if any(j.status == "failed" for j in jobs) else "ok"
    source = "sacct" if sacct_file is None else ("<stdin>" if sacct_file == "-" else sacct_file)
    return TriageReport(status=status, jobs=tuple(jobs), source=source)


def diagnose_job(
    job_id: str,
    logs: Optional[list[str]] = None,
    sacct_file: Optional[str] = None,
    rule_dirs: Optional[list[str]] = None,
    skew: float = 1.0,
    rulebook=None,
    exact: bool = False,
    traces: Optional[str] = None,
):
    """One verdict for a job: its log (given, or located through scontrol/sacct/slurm-%j.out)
    diagnosed and joined with its accounting record (sacct, or saved output). Returns a
    Diagnosis whose `job` field holds the joined verdict. `traces`: the ranks' flight-recorder
    dumps, fused with the log's verdict before it is joined. Raises InputError when neither half
    can be had, or the dumps cannot be read."""
    from slurmdoc.models import Diagnosis

    ids = check_job_ids([job_id])
    if len(ids) != 1:
        raise InputError(f"--job takes one job id, got {len(ids)}")
    jid = ids[0]
    recorded = None
    if traces is not None:  # the user's own error: said before sacct or the log is asked
        from slurmdoc.diagnosis.recorder import read_verdict

        recorded = read_verdict(traces)
    warnings: list[str] = []
    acct = None
    try:
        rep = triage([jid], sacct_file=sacct_file)
        if rep.jobs:
            acct = rep.jobs[0]
        else:
            warnings.append(f"job {jid}: not in the accounting records")
    except SlurmdocError as e:
        warnings.append(f"no accounting record: {e.one_line()}")

    diag, jv, note = _join(jid, acct, logs, rulebook=rulebook, rule_dirs=rule_dirs, skew=skew, exact=exact,
                           recorded=recorded, traces=traces)
    if diag is not None:
        status = "failed" if jv.status == "failed" else diag.status
        return diag.model_copy(update={"job": jv, "status": status, "warnings": diag.warnings + tuple(warnings)})
    return Diagnosis(status="failed" if jv.status == "failed" else "no_failure", root_cause=None, symptoms=(),
                     ranks_seen=0, verdict=jv.verdict, warnings=tuple(warnings + ([note] if note else [])), job=jv)


def _join(jid: str, acct, logs: Optional[list[str]], *, rulebook=None, rule_dirs=None, skew: float = 1.0,
          exact: bool = False, recorded=None, traces: Optional[str] = None):
    """(Diagnosis | None, JobVerdict, note): locate the log unless given, diagnose it (with the
    flight-recorder verdict `recorded` read from `traces`, when given), fuse.
    Raises InputError when neither the accounting record nor a log is there."""
    from slurmdoc.api import diagnose
    from slurmdoc.slurm.fuse import fuse
    from slurmdoc.slurm.locate import JobContext, locate

    found_by: Optional[str] = None
    note: Optional[str] = None
    paths: list[str] = []
    if logs:
        paths, found_by = list(logs), "given"
    else:
        base = jid.split("+")[0]
        ctx = None
        where = base
        if acct is not None:
            # an array task is known by its own (raw) id; a het job by its leader's
            where = acct.raw_id if acct.array_task_id is not None and acct.raw_id else acct.job_id
            ctx = JobContext(
                job_id=where, array_job_id=acct.array_job_id, array_task_id=acct.array_task_id,
                user=acct.user, name=acct.name, work_dir=acct.work_dir)
        loc = locate(where, sacct_stdout=acct.stdout if acct else None, work_dir=acct.work_dir if acct else None,
                     ctx=ctx)
        paths, found_by, note = loc.paths, (loc.how or None), loc.note

    diag = None
    if paths:
        try:
            kw = {"budget": None} if exact else {}
            facts = job_facts(acct.job_id if acct is not None else jid, acct)
            diag = diagnose(paths, rulebook=rulebook, rule_dirs=rule_dirs, skew=skew, facts=facts, **kw)
            if recorded is not None:
                from slurmdoc.diagnosis.recorder import fuse_recorder

                diag = fuse_recorder(diag, recorded, traces or "")
        except InputError as e:
            note = e.one_line()
    elif note is None:
        note = "no log found"
    if diag is None and acct is None:
        raise InputError(f"job {jid}: no accounting record and no log to diagnose ({note})",
                         "pass the log with --log, or saved sacct output with --sacct-file")
    jv = fuse(acct.job_id if acct is not None else jid, diag, acct, logs=tuple(paths) if diag is not None else (),
              log_found_by=found_by if diag else None, log_note=None if diag is not None else note)
    return diag, jv, note


def triage_with_logs(report: TriageReport, rule_dirs: Optional[list[str]] = None, skew: float = 1.0,
                     traces: Optional[str] = None) -> TriageReport:
    """Add to a triage report the joined verdict of every finished job whose log can be found
    (`verdicts`, in the order of `jobs`); a job Slurm calls COMPLETED whose log shows a failure
    then counts as failed. `traces`: one job's flight-recorder dumps (the report must hold
    exactly one job)."""
    from slurmdoc.engine.loader import load_rulebook

    recorded = None
    if traces is not None:
        if len(report.jobs) != 1:
            raise InputError(f"--traces goes with one job, not {len(report.jobs)}", "name one JOBID")
        from slurmdoc.diagnosis.recorder import read_verdict

        recorded = read_verdict(traces)
    book = load_rulebook(rule_dirs)
    verdicts = []
    for j in report.jobs:
        if j.status in ("running", "pending"):
            continue
        _, jv, _ = _join(j.job_id, j, None, rulebook=book, skew=skew, recorded=recorded, traces=traces)
        verdicts.append(jv)
    status = "failed" if report.status == "failed" or any(v.status == "failed" for v in verdicts) else "ok"
    return report.model_copy(update={"verdicts": tuple(verdicts), "status": status})
