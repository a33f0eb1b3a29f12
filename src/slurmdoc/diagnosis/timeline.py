"""The job's timeline, rank by rank, for the reports' pictures: when each rank first showed
failure evidence (the root cause, another cause, a symptom), its last progress mark and its
last timestamped output. Built once the layout is known; empty when no line carried a time.

Memory: one small record per rank seen (bounded like the rank sets of the symptoms).
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from slurmdoc.diagnosis.findings import Collector
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.straggler import activity_by_rank
from slurmdoc.models import RankActivity, RankTime, RootCause

MAX_RANKS = 500_000


def timeline(c: Collector, lay: Layout, root: Optional[RootCause], activity: Optional[list[RankActivity]], rank_host: dict[int, str]) -> tuple[RankTime, ...]:
    first: dict[int, tuple[datetime, str, str]] = {}  # rank -> (time, category, role)

    def note(rank: int, ts: Optional[datetime], category: str, role: str) -> None:
        if ts is None or len(first) >= MAX_RANKS:
            return
        have = first.get(rank)
        if have is None or ts < have[0]:
            first[rank] = (ts, category, role)

    for f in c.causes:
        for r in lay.ranks(f.refs):
            note(r, f.ts, f.rule.category, "cause")
    for g in c.symptoms.values():
        for key, ts in g.times.items():
            ref = g.refs.get(key)
            if ref is not None:
                for r in lay.ranks([ref]):
                    note(r, ts, g.first.rule.category, "symptom")
    if root is not None and root.timestamp and not root.stragglers:
        # (a straggler's root line is a reporter's: its time is not the straggler's)
        ts = datetime.fromisoformat(root.timestamp)
        for r in root.ranks or ((root.rank,) if root.rank is not None else ()):
            first[r] = (ts, root.category, "root")  # its own evidence, even if a symptom came earlier
    acts = activity_by_rank(lay, activity or [])
    if not first and not any(a.last_ts for a in acts.values()):
        return ()
    named = set(root.ranks) | set(root.stragglers) | ({root.rank} if root.rank is not None else set()) if root else set()
    out = []
    for r in sorted(set(first) | set(acts) | named)[:MAX_RANKS]:
        f = first.get(r)
        a = acts.get(r)
        mark = max((m for m in a.progress.values() if m.ts), key=lambda m: m.ts, default=None) if a else None
        out.append(RankTime(
            rank=r,
            node=rank_host.get(r),
            failed_at=f[0].isoformat() if f else None,
            category=f[1] if f else None,
            role=f[2] if f else None,
            progress_at=mark.ts.isoformat() if mark else None,
            step=mark.step if mark else None,
            last_output=a.last_ts.isoformat() if a and a.last_ts else None,
        ))
    return tuple(out)
