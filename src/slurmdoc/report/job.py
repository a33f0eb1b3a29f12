"""The joined verdict of `diagnose --job` (and the epilog): accounting and log side by side,
contradictions spelled out. Printed above the log's own diagnosis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from slurmdoc.report.layout import wrap
from slurmdoc.report.styled import Lines, as_lines
from slurmdoc.report.triage import detail_lines
from slurmdoc.slurm.models import JobVerdict

if TYPE_CHECKING:
    from rich.console import Console


def lines(v: JobVerdict) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    a = v.accounting
    if a is not None:
        out.append(("accounting", f"{a.state} {a.exit_code or '?'} (derived {a.derived_exit_code or '?'}): {a.summary}"))
        out += [(k, t) for k, t in detail_lines(a) if k in ("first failing step", "time", "memory")]
    else:
        out.append(("accounting", "no record"))
    if v.logs:
        out.append(("log", ", ".join(v.logs) + (f" (found by {v.log_found_by})" if v.log_found_by else "")))
    elif v.log_note:
        out.append(("log", f"not diagnosed: {v.log_note}"))
    for c in v.contradictions:
        out.append(("CONTRADICTION", c))
    for n in v.notes:
        out.append(("note", n))
    return out


def render_text(v: JobVerdict, console: "Union[Lines, Console]", width: Optional[int] = None) -> None:
    """`width`: wrap at this many columns, at spaces only (None: never wrap)."""
    p = as_lines(console).line
    keep = sorted(v.logs, key=len, reverse=True)
    first, *rest = wrap(f"JOB VERDICT  {v.verdict}" + (f"  [{v.category}]" if v.category else ""), width, "", "  ", keep)
    p(first, "bold red" if v.status == "failed" else "bold green")
    for ln in rest:
        p(ln, "bold")
    for label, text in lines(v):
        style = "bold yellow" if label == "CONTRADICTION" else ""
        for ln in wrap(f"{label}: {text}", width, "  ", "    ", keep):
            p(ln, style)


def render_markdown(v: JobVerdict) -> str:
    out = [f"# slurmdoc: job {v.job_id}", "", f"**Verdict:** {v.verdict}" + (f" (`{v.category}`)" if v.category else ""), ""]
    out += [f"- **{label}:** {text}" for label, text in lines(v)]
    return "\n".join(out) + "\n\n"
