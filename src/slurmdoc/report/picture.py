"""The picture in the terminal: a compact rank x time strip of the cascade.

One row per rank when there are few, else one per node (or per block of ranks when hosts are
unknown); time runs left to right from the first failure evidence to the last output. A
cell shows the most telling thing that happened in its slice of time on its row:

    X  the root cause        x  another cause        o  a symptom (timeout, SIGTERM, ...)
    |  last progress mark    ]  end of output        .  nothing

The root rank's row and a straggler's row are marked at the right. Only drawn when the lines
carried times and at least two of them differ; it fits the width it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

from slurmdoc.diagnosis.ranks import ranges
from slurmdoc.models import Diagnosis, RankTime
from slurmdoc.report.layout import human_seconds, wrap

PER_RANK_MAX = 4  # at most this many ranks: one row each
MAX_ROWS = 8
GLYPH_RANK = {"X": 5, "x": 4, "o": 3, "]": 2, "|": 1, ".": 0}
LEGEND = "X root  x other cause  o symptom  | last progress  ] end of output"


def _t(ts: Optional[str]) -> Optional[datetime]:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts).replace(tzinfo=None)
    except ValueError:
        return None


@dataclass
class Row:
    label: str
    ranks: list[int] = field(default_factory=list)
    marks: list[tuple[datetime, str]] = field(default_factory=list)
    note: str = ""


def _glyph(t: RankTime) -> str:
    return {"root": "X", "cause": "x"}.get(t.role or "", "o")


def rows_of(d: Diagnosis, max_rows: int = MAX_ROWS, per_rank_max: int = PER_RANK_MAX) -> list[Row]:
    """The rows of the picture: per rank when few, else per node or block of ranks."""
    tl = list(d.timeline)
    rc = d.root_cause
    roots = set(rc.ranks or ((rc.rank,) if rc.rank is not None else ())) if rc else set()
    strag = set(rc.stragglers) if rc else set()
    groups: list[tuple[str, list[RankTime]]]
    if len(tl) <= per_rank_max:
        groups = [(f"rank {t.rank}", [t]) for t in tl]
    else:
        by_node: dict[str, list[RankTime]] = {}
        for t in tl:
            by_node.setdefault(t.node or "", []).append(t)
        if "" not in by_node and len(by_node) <= max_rows:
            groups = [(f"{n} {ranges(x.rank for x in ts)}", ts) for n, ts in sorted(by_node.items(), key=lambda kv: kv[1][0].rank)]
        else:
            size = -(-len(tl) // max_rows)
            groups = [(f"ranks {ranges(x.rank for x in tl[i:i + size])}", tl[i:i + size]) for i in range(0, len(tl), size)]
    out = []
    for label, ts in groups:
        row = Row(label, [t.rank for t in ts])
        for t in ts:
            if (f := _t(t.failed_at)) is not None:
                row.marks.append((f, _glyph(t)))
            if (p := _t(t.progress_at)) is not None:
                row.marks.append((p, "|"))
            if (e := _t(t.last_output)) is not None:
                row.marks.append((e, "]"))
        here = set(row.ranks)
        what = " & ".join(w for w, s in (("root", roots & here), ("straggler", strag & here)) if s)
        marked = (roots | strag) & here
        if not what:
            row.note = ""
        elif len(row.ranks) == 1 or marked == here:
            row.note = f"<- {what}"
        else:
            row.note = f"<- {what}: rank{'s' if len(marked) > 1 else ''} {ranges(marked)}"
        out.append(row)
    return out


def span(d: Diagnosis) -> Optional[tuple[datetime, datetime]]:
    """From the first failure evidence (or a straggler's last progress before it) to the last
    time seen; None when fewer than two distinct times are known."""
    tl = d.timeline
    rc = d.root_cause
    strag = set(rc.stragglers) if rc else set()
    fails = [t for x in tl if (t := _t(x.failed_at))]
    if not fails:
        return None
    start = min(fails + [t for x in tl if x.rank in strag and (t := _t(x.progress_at))])
    every = fails + [t for x in tl if (t := _t(x.last_output))] + [t for x in tl if (t := _t(x.progress_at))]
    end = max(every)
    if end <= start:
        return None
    return start, end


def strip(d: Diagnosis, width: int = 80) -> list[str]:
    """The picture as plain lines at most `width` wide ([] when it cannot be drawn)."""
    if d.root_cause is None or not d.timeline:
        return []
    sp = span(d)
    if sp is None:
        return []
    t0, t1 = sp
    rows = rows_of(d)
    label_w = min(max(len(r.label) for r in rows), 24)
    note_w = max((len(r.note) for r in rows), default=0)
    cells = width - 2 - label_w - 1 - 1 - note_w
    if cells < 16:
        return []
    scale = (cells - 1) / (t1 - t0).total_seconds()
    untimed = "" if _t(d.root_cause.timestamp) else "  (the root cause's line has no time)"
    head = f"TIMELINE  {LEGEND}{untimed}"
    out = [head] if len(head) <= width else wrap(head, width, "", "  ")
    for r in rows:
        line = ["."] * cells
        for when, g in r.marks:
            if when < t0:
                col = 0
            else:
                col = min(cells - 1, round((when - t0).total_seconds() * scale))
            if GLYPH_RANK[g] > GLYPH_RANK[line[col]]:
                line[col] = g
        label = r.label if len(r.label) <= label_w else r.label[: label_w - 1] + "…"
        out.append(f"  {label:<{label_w}} {''.join(line)} {r.note}".rstrip())
    left = t0.strftime("%H:%M:%S")
    right = "+" + human_seconds((t1 - t0).total_seconds())
    out.append("  " + " " * label_w + " " + left + right.rjust(cells - len(left)))
    return out
