"""The default report: rich text for a terminal, plain text (no colour) otherwise.

No boxes: a pasted report keeps its traceback lines intact and greppable.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from slurmdoc.diagnosis.ranks import describe
from slurmdoc.models import Diagnosis
from slurmdoc.report.wording import evidence_in_words

TB_HEAD = 4
TB_TAIL = 14


def _trim(tb: list[str]) -> list[str]:
    if len(tb) <= TB_HEAD + TB_TAIL + 1:
        return tb
    return tb[:TB_HEAD] + [f"    ... {len(tb) - TB_HEAD - TB_TAIL} lines ..."] + tb[-TB_TAIL:]


def _who(d: Diagnosis) -> str:
    rc = d.root_cause
    assert rc is not None
    if len(rc.ranks) > 1:
        return describe(rc.ranks, d.ranks_seen)
    if rc.rank is not None:
        return f"rank {rc.rank}"
    return "the whole job" if rc.job_level else "unknown rank"


def render(d: Diagnosis, console: Console) -> None:
    p = console.print
    rc = d.root_cause
    if rc is None:
        p(Text(f"No failure found: {d.ranks_seen} ranks seen in {d.lines_read} lines.", style="bold green"))
    else:
        head = Text()
        head.append("ROOT CAUSE  ", style="bold red")
        head.append(rc.title, style="bold")
        head.append(f"  [{rc.category}]", style="magenta")
        p(head)
        where = Text("  ")
        where.append(_who(d), style="bold cyan")
        if rc.node:
            where.append(f" on {rc.node}", style="cyan")
        where.append(f" · {rc.source}")
        if rc.frame:
            where.append(f" · raised at {rc.frame}")
        if rc.timestamp:
            where.append(f" · {rc.timestamp}", style="dim")
        p(where)
        if rc.promoted:
            p(Text("  No error that starts a failure was found; this is the earliest failure evidence.", style="yellow"))
        p(Text("  " + rc.message, style="bold yellow"))
        p(Text("  " + evidence_in_words(rc), style="italic"))
        for e in rc.evidence_lines:
            p(Text(f"  evidence: {e}", style="dim"))
        tb = list(rc.traceback)
        if len(tb) > 1:
            p()
            for line in _trim(tb):
                p(Text("    " + line, style="dim" if line.startswith("  ") else None))
        rem = rc.remediation_parts
        p()
        p(Text("WHAT TO DO", style="bold green"))
        p(Text("  " + rem.summary))
        if rem.why:
            p(Text("  " + rem.why, style="italic"))
        for f in rem.fix:
            p(Text(f"  • {f}"))

    if d.symptoms:
        p()
        t = Table(title="OTHER FAILURES AND SYMPTOMS", title_justify="left", title_style="bold", box=None, header_style="bold", pad_edge=False)
        t.add_column("category")
        t.add_column("ranks", overflow="fold")
        t.add_column("count", justify="right")
        t.add_column("first seen", overflow="fold")
        t.add_column("what", overflow="fold")
        for s in d.symptoms:
            style = "red" if s.role == "cause" else None
            t.add_row(*(Text(x) for x in (s.category, s.rank_ranges or "-", str(s.count), s.first_source, s.title)), style=style)
        p(t)
    if d.launcher_verdicts:
        p()
        for v in d.launcher_verdicts:
            mark = "✗" if v.agrees is False else ("✓" if v.agrees else "•")
            p(Text(f"{mark} launcher summary at {v.source}: {v.note}", style="yellow" if v.agrees is False else "dim"))
    if d.attempts:
        p()
        p(Text(f"ATTEMPTS  {d.history}", style="bold"))
        for a in d.attempts:
            where = f" at {a.source}" if a.source else ""
            start = f"  (from {a.starts_at})" if a.starts_at else ""
            what = f"{a.category} on " + (f"rank {a.rank}" if a.rank is not None else describe(a.ranks) if a.ranks else "an unknown rank") if a.category else "no failure"
            p(Text(f"  {a.index}  {what}{where}{start}", style="dim" if a is not d.attempts[-1] else None))
    p()
    p(Text("VERDICT  ", style="bold") + Text(d.verdict))
