"""Renderers of `slurmdoc triage`: a terminal report (one job in detail, many as a table),
markdown, and JSON (schema_version 1, kind "triage")."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from typing import Optional

from slurmdoc.slurm.models import JobTriage, JobVerdict, TriageReport

STATUS_STYLE = {"failed": "bold red", "ok": "bold green", "running": "yellow", "pending": "yellow"}


def render_json(r: TriageReport) -> str:
    return json.dumps(r.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def _codes(j: JobTriage) -> str:
    return f"{j.state} {j.exit_code or '?'}"


def detail_lines(j: JobTriage) -> list[tuple[str, str]]:
    """(label, text) pairs describing one job; shared by the terminal and markdown renderers."""
    out: list[tuple[str, str]] = []
    if j.first_failed_step is not None:
        s = j.first_failed_step
        out.append(("first failing step",
                    f"{s.id} ({s.name}) {s.state} {s.exit_code or '?'} on {s.nodes or '?'}: {s.meaning}"))
    out.append(("State", f"{j.state}: {j.state_meaning}"))
    out.append(("ExitCode", f"{j.exit_code or '?'}: {j.exit_meaning}"))
    out.append(("DerivedExitCode", f"{j.derived_exit_code or '?'}: {j.derived_meaning}"))
    if j.time_note:
        out.append(("time", j.time_note))
    if j.memory_note:
        out.append(("memory", j.memory_note))
    for n in j.notes:
        out.append(("note", n))
    return out


def _log_cell(v: Optional[JobVerdict]) -> str:
    if v is None:
        return ""
    if not v.logs:
        return "no log" if not v.log_note or "does not exist" in v.log_note or "no log" in v.log_note else "unreadable log"
    rc = f"{v.category or 'no failure'}" + (f" rank {v.rank}" if v.rank is not None else "")
    return rc + (" (!)" if v.contradictions else "")


def render_text(r: TriageReport, console: Console) -> None:
    p = console.print
    by_job = {v.job_id: v for v in r.verdicts}
    if len(r.jobs) > 1:
        t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        cols = ["job", "name", "state", "derived", "first failing step", "category", "why"]
        if r.verdicts:
            cols.append("the log says")
        for col in cols:
            t.add_column(col, overflow="fold")
        for j in r.jobs:
            s = j.first_failed_step
            row = [
                j.job_id,
                j.name,
                Text(_codes(j), style=STATUS_STYLE[j.status]),
                j.derived_exit_code or "",
                f"{s.id} {s.state} {s.exit_code or ''}".strip() if s else "-",
                j.category or "-",
                j.summary,
            ]
            if r.verdicts:
                row.append(_log_cell(by_job.get(j.job_id)))
            t.add_row(*row)
        p(t)
        failed = [j for j in r.jobs if j.status == "failed"]
        if failed or r.verdicts:
            p("")
        for j in failed:
            for n in j.notes:
                p(f"{j.job_id}: {n}")
        for v in r.verdicts:
            for c in v.contradictions:
                p(Text(f"{v.job_id}: CONTRADICTION: {c}", style="bold yellow"))
    else:
        for j in r.jobs:
            head = Text(f"JOB {j.job_id}", style="bold")
            head.append(f" ({j.name})" if j.name else "")
            head.append("  ")
            head.append(_codes(j), style=STATUS_STYLE[j.status])
            if j.category:
                head.append(f"  [{j.category}]", style="bold")
            p(head)
            p(f"  {j.summary}")
            for label, text in detail_lines(j):
                p(f"  {label}: {text}")
            if j.components:
                p(f"  heterogeneous job: components {', '.join(j.components)}")
            v = by_job.get(j.job_id)
            if v is not None:
                from slurmdoc.report.job import render_text as render_job

                p("")
                render_job(v, console)
    for m in r.not_found:
        p(Text(f"{m}: not in the accounting records", style="yellow"))


def render_markdown(r: TriageReport) -> str:
    out = ["# slurmdoc triage", ""]
    out += ["| job | name | state | derived | first failing step | category | why |",
            "|---|---|---|---|---|---|---|"]

    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    by_job = {v.job_id: v for v in r.verdicts}
    if r.verdicts:
        out[-2] = out[-2] + " the log says |"
        out[-1] = out[-1] + "---|"
    for j in r.jobs:
        s = j.first_failed_step
        cells = [
            j.job_id, j.name, _codes(j), j.derived_exit_code or "",
            f"{s.id} {s.state} {s.exit_code or ''}".strip() if s else "-",
            f"`{j.category}`" if j.category else "-",
            j.summary]
        if r.verdicts:
            cells.append(_log_cell(by_job.get(j.job_id)))
        out.append("| " + " | ".join(cell(c) for c in cells) + " |")
    for j in r.jobs:
        if j.status != "failed":
            continue
        out += ["", f"## Job {j.job_id} ({j.name}): `{j.category}`", ""]
        out += [f"- **{label}:** {cell(text)}" for label, text in detail_lines(j)]
    for v in r.verdicts:
        if v.contradictions:
            out += ["", f"**Job {v.job_id}:** {cell(v.verdict)}", ""]
            out += [f"- **Contradiction:** {cell(c)}" for c in v.contradictions]
    if r.not_found:
        out += ["", "Not in the accounting records: " + ", ".join(r.not_found)]
    return "\n".join(out) + "\n"
