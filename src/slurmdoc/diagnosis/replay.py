"""Several attempts in one log (restarts, requeues): the findings journal is replayed into
one analyzer per attempt (boundaries from diagnosis.attempts); the last attempt's diagnosis,
with the history of all, is the job's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from slurmdoc.diagnosis.attempts import attempt_of, boundaries, history, who
from slurmdoc.diagnosis.explain import named
from slurmdoc.diagnosis.findings import Collector
from slurmdoc.models import Attempt, Diagnosis, Event, RankActivity

if TYPE_CHECKING:
    from slurmdoc.diagnosis.analyze import Analyzer


def split_attempts(c: Collector, make_part: Callable[[], "Analyzer"], lines_read: int, inputs: tuple[str, ...], warnings: list[str], activity: Optional[list[RankActivity]]) -> Optional[Diagnosis]:
    """One diagnosis per attempt when the log holds several; the last one's, with the
    history of all, is the job's."""
    journal = c.journal or []
    hinted = {s.index: s.attempt for s in c.sources if s.attempt is not None}
    bounds: dict[int, list[int]] = {}
    if c.marks:
        failures: dict[int, list[int]] = {}
        closers: dict[int, list[int]] = {}
        for ev, m in journal:
            if m.rule.spec.launcher_verdict or m.rule.spec.exit_evidence:
                # a launcher's summary or a process's exit status: the job was failing
                closers.setdefault(ev.first.source, []).append(ev.first.lineno)
            # what makes an attempt: a failure a worker printed, or a cause that ends the
            # attempt itself (a requeue); a launcher's or Slurm's other lines about a
            # failure, such as an OOM-kill notice, belong to the attempt they end
            if (m.rule.role in ("cause", "symptom") and ev.first.origin in ("rank", "unknown")) or (m.rule.role == "cause" and "attempt_end" in m.captures):
                failures.setdefault(ev.first.source, []).append(ev.first.lineno)
        ran: dict[int, list[int]] = {}
        for a in activity or []:
            ran.setdefault(a.source, []).append(a.lineno)
        bounds = boundaries(c.marks, {k: sorted(v) for k, v in failures.items()}, {k: sorted(v) for k, v in ran.items()}, closers)
    if not bounds and len(set(hinted.values())) < 2:
        return None
    bounds = {k: v for k, v in bounds.items() if k not in hinted}

    def index(ev: Event) -> int:
        src = ev.first.source
        return hinted[src] if src in hinted else attempt_of(bounds, src, ev.first.lineno)

    n = max([index(ev) for ev, _ in journal] + [len(b) for b in bounds.values()] + list(hinted.values())) + 1
    parts = [make_part() for _ in range(n)]
    for p in parts:
        p.seen = c.seen
    for ev, m in journal:
        parts[index(ev)].add(ev, m)
    diags = [p.finish(lines_read, inputs, warnings if i == n - 1 else [], activity if i == n - 1 else None) for i, p in enumerate(parts)]
    starts: dict[int, list[str]] = {}
    for src, b in bounds.items():
        for k, line in enumerate(b, 1):
            starts.setdefault(k, []).append(f"{c.sources[src].path}:{line}")
    attempts = []
    items = []
    for k, d in enumerate(diags):
        rc = d.root_cause
        w = "" if rc is None or (rc.job_level and rc.rank is None) else who(rc.rank, rc.ranks, d.ranks_seen, rc.all_ranks)
        items.append((named(rc) if rc is not None else None, w))
        attempts.append(
            Attempt(
                index=k,
                status=d.status,
                category=rc.category if rc else None,
                rank=rc.rank if rc else None,
                ranks=rc.ranks if rc else (),
                source=rc.source if rc else None,
                message=rc.message[:300] if rc else None,
                starts_at=(starts.get(k) or [None])[0],
                verdict=d.verdict,
            )
        )
    hist = history(items)
    last = diags[-1]
    return last.model_copy(update={"attempts": tuple(attempts), "history": hist, "verdict": f"{hist}. Last attempt: {last.verdict}"})
