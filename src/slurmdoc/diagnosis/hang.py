"""Naming the rank that stopped first when a job ends without an error (a hang).

Three kinds of evidence, strongest first:
  * collective sequence numbers: every rank reports a watchdog timeout, but one reports
    an earlier collective (`SeqNum=41` while the others are at 57, or a lower "last
    enqueued NCCL work"): that rank is behind;
  * progress: the last iteration/step each rank printed (ingest.activity); one rank stopped
    at iteration 41 while the others reached 57;
  * silence: one rank's last line is much older than every other rank's.
In each case only a few ranks clearly behind all the others are named; a spread-out
picture names nobody.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Optional

from slurmdoc.diagnosis.ranks import describe, ranges
from slurmdoc.models import ProgressMark, RankActivity

MIN_SILENCE_S = 120.0  # a rank must have been silent this long longer than the others


@dataclass
class Stall:
    ranks: list[int]  # the rank(s) that stopped first
    others: list[int]  # the ranks that went on
    kind: str  # "sequence" | "progress" | "silence"
    evidence: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # remediation placeholders


def laggards(values: dict[int, float], min_gap: float) -> Optional[tuple[list[int], list[int]]]:
    """(behind, ahead): the few ranks clearly behind all the others, or None.

    The split is at the largest gap between sorted values; the group below it must be
    small (at most an eighth of the ranks, or one), the gap at least `min_gap` and more than
    twice the spread of the ranks above it (ranks that went on agree with each other).
    """
    if len(values) < 2:
        return None
    items = sorted(values.items(), key=lambda kv: (kv[1], kv[0]))
    vals = [v for _, v in items]
    cut, gap = max(((i, vals[i + 1] - vals[i]) for i in range(len(vals) - 1)), key=lambda t: (t[1], -t[0]))
    behind = [r for r, _ in items[: cut + 1]]
    ahead = [r for r, _ in items[cut + 1 :]]
    spread = vals[-1] - vals[cut + 1]
    if len(behind) > max(1, len(vals) // 8):
        return None
    if gap < min_gap or gap <= 2 * spread:
        return None
    return sorted(behind), sorted(ahead)


def _when(ts: Optional[datetime]) -> str:
    return ts.isoformat(sep=" ") if ts is not None else ""


def _at(mark: ProgressMark) -> str:
    return f"epoch {mark.epoch} {mark.label} {mark.step}" if mark.epoch is not None else f"{mark.label} {mark.step}"


def _span(marks: list[ProgressMark]) -> str:
    lo = min(marks, key=lambda m: (m.epoch or 0, m.step))
    hi = max(marks, key=lambda m: (m.epoch or 0, m.step))
    return _at(lo) if (lo.epoch, lo.step) == (hi.epoch, hi.step) else f"{_at(lo)}-{hi.step}"


def last_line(rank: int, act: RankActivity, where: Callable[[int, int], str]) -> str:
    when = f", {_when(act.line_ts)}" if act.line_ts is not None else ""
    return f"rank {rank}'s last line ({where(act.source, act.lineno)}{when}): {act.text.strip()}"


def by_sequence(positions: dict[int, int], ops: dict[int, str]) -> Optional[Stall]:
    """Ranks that report a collective timeout at an earlier collective than the rest."""
    split = laggards({r: float(p) for r, p in positions.items()}, 1.0)
    if split is None:
        return None
    behind, ahead = split
    lo = sorted({positions[r] for r in behind})
    hi = sorted({positions[r] for r in ahead})
    at_lo = f"#{lo[0]}" if len(lo) == 1 else f"#{lo[0]}-{lo[-1]}"
    at_hi = f"#{hi[0]}" if len(hi) == 1 else f"#{hi[0]}-{hi[-1]}"
    text = f"{describe(behind)} reported collective {at_lo}; {describe(ahead)} had reached collective {at_hi} (sequence numbers of the timed-out work)"
    return Stall(behind, ahead, "sequence", [text], {"progress": text})


def by_progress(acts: dict[int, RankActivity], where: Callable[[int, int], str]) -> Optional[Stall]:
    """Ranks whose last progress marker is behind every other rank's."""
    counts = Counter(mid for a in acts.values() for mid in a.progress)
    if not counts:
        return None
    mid, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    if n < 2:
        return None
    marks = {r: a.progress[mid] for r, a in acts.items() if mid in a.progress}
    scale = max(max((m.total or 0) for m in marks.values()), max(m.step for m in marks.values())) + 1
    split = laggards({r: float((m.epoch or 0) * scale + m.step) for r, m in marks.items()}, 1.0)
    if split is None:
        return None
    behind, ahead = split
    b = [marks[r] for r in behind]
    a = [marks[r] for r in ahead]
    when_b = max((m.ts for m in b if m.ts is not None), default=None)
    when_a = max((m.ts for m in a if m.ts is not None), default=None)
    first = b[0]
    text = (
        f"{describe(behind)} stopped at {_span(b)}"
        + (f" at {_when(when_b)}" if when_b else "")
        + (f" ({where(first.source, first.lineno)})" if len(b) == 1 else "")
        + f"; {describe(ahead)} reached {_span(a)}"
        + (f" (last at {_when(when_a)})" if when_a else "")
    )
    st = Stall(behind, ahead, "progress", [text], {"progress": text})
    return st


def by_silence(acts: dict[int, RankActivity]) -> Optional[Stall]:
    """Ranks whose last timestamped line is much older than every other rank's."""
    times = {r: a.last_ts for r, a in acts.items() if a.last_ts is not None}
    if len(times) < 2:
        return None
    base = min(times.values())
    split = laggards({r: (t - base).total_seconds() for r, t in times.items()}, MIN_SILENCE_S)  # type: ignore[operator]
    if split is None:
        return None
    behind, ahead = split
    last_b = max(times[r] for r in behind)
    first_a = min(times[r] for r in ahead)
    gap = first_a - last_b
    text = f"{describe(behind)} printed nothing after {_when(last_b)}; {describe(ahead)} went on printing for at least {gap} longer"
    return Stall(behind, ahead, "silence", [text], {"progress": text})


def find_stall(acts: dict[int, RankActivity], where: Callable[[int, int], str], only: Optional[list[int]] = None) -> Optional[Stall]:
    """The stall the activity shows (progress first, then silence), with each stalled rank's
    last line as evidence. `only`: ranks already known to be stragglers, just describe them."""
    st = by_progress(acts, where) or by_silence(acts)
    if only:
        if st is None or set(st.ranks) != set(only):
            st = Stall(list(only), [], "known")
    if st is None:
        return None
    for r in st.ranks[:4]:
        a = acts.get(r)
        if a is not None:
            line = last_line(r, a, where)
            st.evidence.append(line)
            st.values.setdefault("last_line", line)
    if st.kind == "known" and not st.evidence:
        return None
    st.values.setdefault("stalled", ranges(st.ranks))
    return st
