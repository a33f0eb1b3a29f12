"""Renderers of `slurmdoc triage`: a terminal report (one job in detail, many as a table),
markdown, and JSON (schema_version 1, kind "triage")."""

from __future__ import annotations

import json

from typing import TYPE_CHECKING, Optional, Union

from slurmdoc.report.layout import columns, wrap
from slurmdoc.report.styled import Line, Lines, Styled, as_lines
from slurmdoc.slurm.models import JobTriage, JobVerdict, TriageReport

if TYPE_CHECKING:
    from rich.console import Console

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
    if j.cpu_note:
        out.append(("cpu", j.cpu_note))
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


def _p(console: Lines, text: Line, style: Optional[str] = None) -> None:
    console.line(text, style or "")


def render_text(r: TriageReport, console: "Union[Lines, Console]", width: Optional[int] = None) -> None:
    """`width`: fit the report in this many columns (None: off a terminal, never wrap). Many
    jobs are a table while it fits, else one plain row each, wrapped at spaces only."""
    console = as_lines(console)
    by_job = {v.job_id: v for v in r.verdicts}
    if len(r.jobs) > 1:
        cols = ["job", "name", "state", "derived", "first failing step", "category", "why"]
        if r.verdicts:
            cols.append("the log says")
        rows = []
        for j in r.jobs:
            s = j.first_failed_step
            row = [j.job_id, j.name, _codes(j), j.derived_exit_code or "",
                   f"{s.id} {s.state} {s.exit_code or ''}".strip() if s else "-", j.category or "-", j.summary]
            if r.verdicts:
                row.append(_log_cell(by_job.get(j.job_id)))
            rows.append([" ".join(c.split()) for c in row])  # one line per cell, whatever sacct held
        table = columns([cols] + rows, width)
        if table is not None:
            _p(console, table[0], "bold")
            at = sum(max(len(x[i]) for x in [cols] + rows) + 2 for i in range(2))  # where the state cell starts
            for j, line in zip(r.jobs, table[1:]):
                t = Styled(line)
                t.stylize(STATUS_STYLE[j.status], at, at + len(_codes(j)))
                _p(console, t)
        else:
            for j, row in zip(r.jobs, rows):
                text = (f"{row[0]}" + (f" ({row[1]})" if row[1] else "") + f"  {row[2]}"
                        + (f"  [{row[5]}]" if row[5] != "-" else "") + f": {row[6]}; derived {row[3] or '?'}"
                        + (f", first failing step {row[4]}" if row[4] != "-" else "")
                        + (f"; the log says: {row[7]}" if r.verdicts and row[7] else ""))
                first, *rest = wrap(text, width, "", "    ")
                t = Styled(first)
                t.stylize(STATUS_STYLE[j.status], text.find(row[2]), text.find(row[2]) + len(row[2]))
                _p(console, t)
                for ln in rest:
                    _p(console, ln)
        failed = [j for j in r.jobs if j.status == "failed"]
        if failed or r.verdicts:
            _p(console, "")
        for j in failed:
            for n in j.notes:
                for ln in wrap(f"{j.job_id}: {n}", width, "", "    "):
                    _p(console, ln)
        for v in r.verdicts:
            for c in v.contradictions:
                for ln in wrap(f"{v.job_id}: CONTRADICTION: {c}", width, "", "    ", v.logs):
                    _p(console, ln, "bold yellow")
    else:
        for j in r.jobs:
            head = Styled(f"JOB {j.job_id}", style="bold")
            head.append(f" ({j.name})" if j.name else "")
            head.append("  ")
            head.append(_codes(j), style=STATUS_STYLE[j.status])
            if j.category:
                head.append(f"  [{j.category}]", style="bold")
            _p(console, head)
            for ln in wrap(j.summary, width, "  ", "    "):
                _p(console, ln)
            for label, text in detail_lines(j):
                for ln in wrap(f"{label}: {text}", width, "  ", "    "):
                    _p(console, ln)
            if j.components:
                _p(console, f"  heterogeneous job: components {', '.join(j.components)}")
            v = by_job.get(j.job_id)
            if v is not None:
                from slurmdoc.report.job import render_text as render_job

                _p(console, "")
                render_job(v, console, width)
    for m in r.not_found:
        _p(console, f"{m}: not in the accounting records", "yellow")


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
