"""One job's row in a scan: what the per-job diagnosis (or the epilog's ledger) says, reduced to
plain values that go to JSON lines and back unchanged (parts, cache, merge)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Optional

from slurmdoc.fleet.signature import signature

# root causes that point at a machine rather than at the program: their nodes become suspects
HARDWARE = ("cuda_error", "nccl_error", "node_failure", "segfault", "killed")
UNCLASSIFIED = ("unknown", "python_exception")
MAX_MESSAGE = 300


@dataclass
class JobRecord:
    index: int  # position in the scan's deterministic listing
    job_id: Optional[str]  # None: logs naming no job (grouped by directory)
    where: str  # the job's directory, or its one file
    files: int
    status: str  # failed | no_failure | error (the logs could not be diagnosed)
    category: Optional[str] = None
    rule_id: Optional[str] = None
    rank: Optional[int] = None
    node: Optional[str] = None
    signature: Optional[str] = None
    message: Optional[str] = None
    source: Optional[str] = None
    time: Optional[str] = None  # the root cause's timestamp, else the newest log's mtime (UTC)
    evidence: Optional[str] = None  # the evidence level of the root cause, when the diagnosis gives one
    rank_source: Optional[str] = None
    user: Optional[str] = None
    partition: Optional[str] = None
    state: Optional[str] = None  # Slurm's State / ExitCode when the accounting is known
    exit_code: Optional[str] = None
    elapsed_s: Optional[int] = None  # efficiency, from the accounting
    time_use: Optional[float] = None  # elapsed / time limit
    max_rss_bytes: Optional[int] = None
    mem_use: Optional[float] = None  # peak task RSS / memory requested per node
    cpu_use: Optional[float] = None  # TotalCPU / (Elapsed x AllocCPUS): CPU efficiency, as seff computes it
    log_found_by: Optional[str] = None
    error: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "JobRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @property
    def day(self) -> Optional[str]:
        return self.time[:10] if self.time else None

    @property
    def hardware(self) -> bool:
        return self.status == "failed" and self.category in HARDWARE


def _where(paths: tuple[str, ...]) -> str:
    if len(paths) == 1:
        return paths[0]
    return os.path.commonpath([os.path.abspath(p) for p in paths])


def _mtime(paths: tuple[str, ...]) -> Optional[str]:
    newest = None
    for p in paths:
        try:
            m = os.stat(p).st_mtime
        except OSError:
            continue
        newest = m if newest is None else max(newest, m)
    if newest is None:
        return None
    return datetime.fromtimestamp(newest, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _text_field(obj, name: str) -> Optional[str]:
    v = getattr(obj, name, None)
    if v is None:
        return None
    v = getattr(v, "value", v)  # an enum
    return v if isinstance(v, str) else None


def from_diagnosis(index: int, job_id: Optional[str], paths: tuple[str, ...], d) -> JobRecord:
    rc = d.root_cause
    rec = JobRecord(index=index, job_id=job_id, where=_where(paths), files=len(paths), status=d.status,
                    time=_mtime(paths))
    if rc is not None:
        msg = (rc.message or "").strip()
        rec.category = rc.category
        rec.rule_id = rc.rule_id
        rec.rank = rc.rank
        rec.node = rc.node
        rec.signature = signature(rc.category, msg)
        rec.message = msg[:MAX_MESSAGE]
        rec.source = rc.source
        rec.time = rc.timestamp[:19] if rc.timestamp else rec.time
        rec.evidence = _text_field(rc, "evidence")
        rec.rank_source = _text_field(rc, "rank_source")
    return rec


def from_error(index: int, job_id: Optional[str], paths: tuple[str, ...], message: str) -> JobRecord:
    return JobRecord(index=index, job_id=job_id, where=_where(paths), files=len(paths), status="error",
                     error=message[:MAX_MESSAGE], time=_mtime(paths))


def from_accounting(index: int, paths: tuple[str, ...], d, acct, found_by: Optional[str], note: Optional[str]) -> JobRecord:
    """A job from the accounting: its log's diagnosis (when found) joined with its record, as
    `diagnose --job` joins them, plus the accounting's own columns (user, partition, state,
    exit code, time and memory used against the request)."""
    from slurmdoc.slurm.fuse import fuse

    jv = fuse(acct.job_id, d, acct, logs=paths if d is not None else (), log_found_by=found_by if d is not None else None,
              log_note=None if d is not None else note)
    if d is not None:
        rec = from_diagnosis(index, acct.job_id, paths, d)
    else:
        rec = JobRecord(index=index, job_id=acct.job_id, where=acct.work_dir or "-", files=0, status="no_failure")
    log_cat = rec.category
    rec.status = jv.status
    rec.category = jv.category
    if jv.rank is not None:
        rec.rank = jv.rank
    if rec.category is None:
        rec.signature = None
    elif rec.category != log_cat or rec.signature is None:
        rec.signature = signature(rec.category, acct.summary)
        rec.message = rec.message or acct.summary
    rec.user, rec.partition = acct.user, acct.partition
    rec.state, rec.exit_code = acct.state, acct.exit_code
    rec.time = (acct.end or acct.start or rec.time or "")[:19] or None
    rec.elapsed_s, rec.max_rss_bytes = acct.elapsed_s, acct.max_rss_bytes
    if acct.elapsed_s is not None and acct.timelimit_s:
        rec.time_use = round(acct.elapsed_s / acct.timelimit_s, 3)
    if acct.max_rss_bytes and acct.req_mem_per_node_bytes:
        rec.mem_use = round(acct.max_rss_bytes / acct.req_mem_per_node_bytes, 3)
    rec.cpu_use = acct.cpu_efficiency
    rec.log_found_by = found_by if d is not None else None
    if d is None:
        rec.error = note
    return rec
