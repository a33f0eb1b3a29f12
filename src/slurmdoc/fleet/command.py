"""`slurmdoc scan` end to end, behind the thin CLI: pick the source of records (logs, parts to
merge, the epilog's ledger), stream them to the chosen output, summarise, say what the exit
code is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Callable, Iterator, Optional

from slurmdoc.errors import InputError
from slurmdoc.fleet.record import JobRecord
from slurmdoc.fleet.render import PartOut, make_output
from slurmdoc.fleet.run import ScanOptions, merge, parse_shard, scan
from slurmdoc.fleet.summary import FleetSummary

FORMATS = ("text", "json", "markdown", "jsonl")


@dataclass
class ScanRequest:
    paths: list[str] = field(default_factory=list)
    fmt: str = "text"
    rule_dirs: list[str] = field(default_factory=list)
    jobs: int = 1
    shard: Optional[str] = None
    cache: Optional[str] = None
    ledger: Optional[str] = None
    merge_parts: Optional[list[str]] = None  # `scan merge PART...`
    suspect_min: int = 2
    top: int = 20
    since: Optional[str] = None  # the jobs from sacct instead of PATHs
    until: Optional[str] = None
    users: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    sacct_file: Optional[str] = None
    color: str = "never"  # text on a terminal: auto, always, never (report.emit.wants_color)

    def window(self):
        if not (self.since or self.until or self.users or self.partitions or self.states or self.sacct_file):
            return None
        from slurmdoc.fleet.accounting import Window

        return Window(self.since, self.until, list(self.users), list(self.partitions), list(self.states), self.sacct_file)


def _records(req: ScanRequest, warnings: list[str]) -> tuple[int, Iterator[JobRecord]]:
    if req.merge_parts is not None:
        if req.shard or req.ledger or req.cache or req.window() is not None:
            raise InputError("scan merge takes parts only (no --shard, --ledger or --cache)")
        return merge(req.merge_parts)
    if req.ledger is not None:
        if req.paths or req.shard or req.cache or req.window() is not None:
            raise InputError("--ledger summarises the ledger alone (no PATH, --shard or --cache)")
        from slurmdoc.fleet.ledger import ledger_records

        return -1, ledger_records(req.ledger, warnings)
    window = req.window()
    if window is not None and req.paths:
        raise InputError("PATHs or jobs from sacct (--since/--until/--user/--partition/--state/--sacct-file), not both")
    if not req.paths and window is None:
        raise InputError("no log given", "name log files, directories or globs, --since TIME (jobs from sacct), or --ledger FILE")
    shard = parse_shard(req.shard) if req.shard else None
    return scan(ScanOptions(req.paths, req.rule_dirs, req.jobs, shard, req.cache, window), warnings)


def run_scan(req: ScanRequest, out: IO[str], warn: Callable[[str], None]) -> int:
    """Write the report to `out`, one job at a time; warnings go to `warn`.
    Returns the exit code: 1 when a job failed, else 0."""
    if req.fmt not in FORMATS:
        raise InputError(f"--format {req.fmt}: not a scan format", f"use one of {', '.join(FORMATS)}")
    warnings: list[str] = []
    total, records = _records(req, warnings)
    if req.shard:
        output = PartOut(out, parse_shard(req.shard), total)
    else:
        from slurmdoc.report.emit import wants_color

        output = make_output(req.fmt, out, color=req.fmt == "text" and wants_color(out, req.color))
    summary = FleetSummary(suspect_min=req.suspect_min, top=req.top)
    output.start()
    for rec in records:
        summary.add(rec)
        output.row(rec)
    output.finish(summary.to_dict())
    out.flush()
    for w in warnings:
        warn(w)
    return 1 if summary.status.get("failed", 0) else 0
