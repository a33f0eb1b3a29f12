"""`scan --ledger FILE`: the epilog's JSON-lines ledger (one line per finished job) as scan records,
so a cluster's failures are summarised without reading a log again."""

from __future__ import annotations

import json
from typing import Iterator

from slurmdoc.errors import InputError
from slurmdoc.fleet.record import MAX_MESSAGE, JobRecord
from slurmdoc.fleet.signature import signature

MAX_LINE = 1 << 20


def ledger_records(path: str, warnings: list[str]) -> Iterator[JobRecord]:
    """One record per ledger line, in the ledger's order; a damaged line is a warning (counted).
    An unreadable ledger raises here, before any record is asked for."""
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read the ledger ({e.strerror})")
    return _records(fh, path, warnings)


def _records(fh, path: str, warnings: list[str]) -> Iterator[JobRecord]:
    bad = 0
    first_bad = 0
    index = 0
    with fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE), b""), 1):
            if not raw.strip():
                continue
            try:
                d = json.loads(raw)
                if not isinstance(d, dict) or d.get("status") not in ("failed", "no_failure"):
                    raise ValueError("not an epilog ledger line")
            except ValueError:
                bad += 1
                first_bad = first_bad or n
                continue
            cat = d.get("category") if d["status"] == "failed" else None
            verdict = str(d.get("verdict") or "")
            rank = d.get("rank")
            yield JobRecord(
                index=index,
                job_id=str(d["job_id"]) if d.get("job_id") is not None else None,
                where=str(d.get("log") or path),
                files=1 if d.get("log") else 0,
                status=d["status"],
                category=cat or ("unknown" if d["status"] == "failed" else None),
                rank=rank if isinstance(rank, int) else None,
                signature=signature(cat or "unknown", verdict) if d["status"] == "failed" else None,
                message=verdict[:MAX_MESSAGE] or None,
                source=d.get("report"),
                time=str(d["time"])[:19] if d.get("time") else None,
                user=d.get("user"),
                state=d.get("state"),
                exit_code=d.get("exit_code"),
            )
            index += 1
    if bad:
        warnings.append(f"{path}: {bad} line(s) are not epilog ledger lines (first: line {first_bad}); skipped")
