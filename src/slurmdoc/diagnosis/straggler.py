"""Stage 4 of the diagnosis: hangs. When the job ended without an error of its own (a
time limit, a cancellation, a collective timeout that leads because nothing else failed),
name the rank that stopped first, from collective sequence numbers, progress marks and
silence (the detectors live in diagnosis.hang).
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from slurmdoc.diagnosis.findings import Collector, Finding
from slurmdoc.diagnosis.hang import Stall, by_sequence, find_stall
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.order import Choice, stragglers_of
from slurmdoc.diagnosis.ranks import describe
from slurmdoc.models import RankActivity, RankProgress

HANG_ENDINGS = ("time_limit", "cancelled")  # job-level endings that may hide a hung rank


def look_for_stall(c: Collector, lay: Layout, choice: Choice, all_ranks: list[int], activity: Optional[list[RankActivity]]) -> tuple[Optional[Stall], dict[int, RankActivity]]:
    """The stall behind a hang-like root (None otherwise), and each rank's activity; the
    choice's stragglers become the stalled ranks when the stall names them."""
    root = choice.root
    if root is None or not hang_like(root, choice.promoted):
        return None, {}
    acts = activity_by_rank(lay, activity or [])
    stall = _stall(c, lay, root, choice.stragglers, all_ranks, acts)
    if stall is not None and stall.kind != "known":
        choice.stragglers = stall.ranks
    return stall, acts

def hang_like(root: Finding, promoted: bool) -> bool:
    """A job that ended without an error of its own: time limit, cancellation, or a
    collective timeout that leads because nothing else failed."""
    if root.rule.category in HANG_ENDINGS and root.rule.role == "cause":
        return True
    return promoted and root.rule.spec.missing_rank_is_root


def activity_by_rank(lay: Layout, activity: list[RankActivity]) -> dict[int, RankActivity]:
    out: dict[int, RankActivity] = {}
    for a in activity:
        r = lay.resolve(a.who)
        if r is None:
            continue
        have = out.get(r)
        if have is None:
            out[r] = a
            continue
        # one rank seen in several streams (a prefix and a per-rank file): keep the
        # busier record, and the later mark of each progress marker
        keep, other = (have, a) if have.lines >= a.lines else (a, have)
        merged = RankActivity(keep.who, keep.source, keep.lineno, keep.text, keep.line_ts, max((t for t in (keep.last_ts, other.last_ts) if t is not None), default=None), keep.lines + other.lines, dict(other.progress))
        for mid, m in keep.progress.items():
            o = merged.progress.get(mid)
            if o is None or (m.ts or datetime.min, m.source, m.lineno) >= (o.ts or datetime.min, o.source, o.lineno):
                merged.progress[mid] = m
        out[r] = merged
    return out


def _stall(c: Collector, lay: Layout, root: Finding, stragglers: list[int], all_ranks: list[int], acts: dict[int, RankActivity]) -> Optional[Stall]:
    def where(src: int, lineno: int) -> str:
        return f"{c.sources[src].path}:{lineno}"

    if not stragglers and root.rule.category in HANG_ENDINGS:
        # a collective timeout the others reported before the job was stopped
        for g in c.symptoms.values():
            missing = stragglers_of(g, lay, all_ranks)
            if missing and g.first.rule.spec.root_if_alone:
                reporters = lay.ranks(g.refs.values())
                st = find_stall(acts, where, only=missing) or Stall(missing, reporters, "known")
                st.kind = "collective"
                st.others = reporters
                st.evidence.insert(0, f"{describe(reporters)} reported {g.first.rule.spec.title.lower()} (first at {c.src(g.first)}); {describe(missing)} never did")
                st.values.setdefault("progress", st.evidence[0])
                return st
    if stragglers:
        return find_stall(acts, where, only=stragglers)
    positions: dict[int, int] = {}
    for ref, pos in c.seqs.values():
        r = lay.resolve(ref)
        if r is not None:
            positions[r] = min(pos, positions.get(r, pos))
    st = by_sequence(positions, {})
    if st is not None:
        known = find_stall(acts, where, only=st.ranks)
        if known is not None:
            st.evidence.extend(known.evidence)
            st.values.update({k: v for k, v in known.values.items() if k != "progress"})
        return st
    return find_stall(acts, where)


def progress_of(c: Collector, acts: dict[int, RankActivity]) -> tuple[RankProgress, ...]:
    out = []
    for r in sorted(acts)[:4096]:
        a = acts[r]
        mark = max(a.progress.values(), key=lambda m: (m.ts or datetime.min, m.source, m.lineno), default=None)
        out.append(
            RankProgress(
                rank=r,
                last_source=f"{c.sources[a.source].path}:{a.lineno}",
                last_time=a.last_ts.isoformat() if a.last_ts else None,
                last_line=a.text.strip(),
                step=mark.step if mark else None,
                epoch=mark.epoch if mark else None,
                unit=mark.label if mark else None,
                step_source=f"{c.sources[mark.source].path}:{mark.lineno}" if mark else None,
                step_time=mark.ts.isoformat() if mark and mark.ts else None,
            )
        )
    return tuple(out)
