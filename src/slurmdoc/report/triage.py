"""Renderers of `slurmdoc triage`: a terminal report (one job in detail, many as a table),
markdown, and JSON (schema_version 1, kind "triage")."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from slurmdoc.slurm.models import JobTriage, TriageReport

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


def render_text(r: TriageReport, console: Console) -> None:
    p = console.print
    if len(r.jobs) > 1:
        t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for col in ("job", "name", "state", "derived", "first failing step", "category", "why"):
            t.add_column(col, overflow="fold")
        for j in r.jobs:
            s = j.first_failed_step
            t.add_row(
                j.job_id,
                j.name,
                Text(_codes(j), style=STATUS_STYLE[j.status]),
                j.derived_exit_code or "",
                f"{s.id} {s.state} {s.exit_code or ''}".strip() if s else "-",
                j.category or "-",
                j.summary,
            )
        p(t)
        failed = [j for j in r.jobs if j.status == "failed"]
        if failed:
            p("")
        for j in failed:
            for n in j.notes:
                p(f"{j.job_id}: {n}")
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
    for m in r.not_found:
        p(Text(f"{m}: not in the accounting records", style="yellow"))


def render_markdown(r: TriageReport) -> str:
    out = ["# slurmdoc triage", ""]
    out += ["| job | name | state | derived | first failing step | category | why |",
            "|---|---|---|---|---|---|---|"]

    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    for j in r.jobs:
        s = j.first_failed_step
        out.append("| " + " | ".join(cell(c) for c in (
            j.job_id, j.name, _codes(j), j.derived_exit_code or "",
            f"{s.id} {s.state} {s.exit_code or ''}".strip() if s else "-",
            f"`{j.category}`" if j.category else "-",
            j.summary)) + " |")
    for j in r.jobs:
        if j.status != "failed":
            continue
        out += ["", f"## Job {j.job_id} ({j.name}): `{j.category}`", ""]
        out += [f"- **{label}:** {cell(text)}" for label, text in detail_lines(j)]
    if r.not_found:
        out += ["", "Not in the accounting records: " + ", ".join(r.not_found)]
    return "\n".join(out) + "\n"
