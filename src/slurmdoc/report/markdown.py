"""`--format markdown`: a report to paste into a ticket."""

from __future__ import annotations

from slurmdoc.diagnosis.ranks import describe
from slurmdoc.models import Diagnosis
from slurmdoc.report.wording import evidence_in_words, recorder_lines
from slurmdoc.report.layout import straggler_own, delay, ordered_symptoms, ranks_seen, supporting, trim_traceback


def _fence(lines: list[str]) -> str:
    body = "\n".join(lines).replace("```", "ʼʼʼ")
    return f"```\n{body}\n```"


def render(d: Diagnosis, full: bool = False) -> str:
    out = ["# slurmdoc diagnosis", "", f"**Verdict:** {d.verdict}", ""]
    rc = d.root_cause
    if rc is not None:
        who = describe(rc.ranks, d.ranks_seen) if len(rc.ranks) > 1 else (f"rank {rc.rank}" if rc.rank is not None else "unknown rank")
        out += [
            f"## Root cause: {rc.title} (`{rc.category}`{': ' + rc.label if rc.label else ''})",
            "",
            f"- **Where:** {who}" + (f" on `{rc.node}`" if rc.node else "") + f", `{rc.source}`",
            f"- **Error:** `{rc.message}`",
        ]
        own = straggler_own(d)
        if own is not None:
            out.append(f"- **Straggler:** {describe(rc.stragglers)}: {own}")
        raised_at, raised_in = getattr(rc, "raised_at", None), getattr(rc, "raised_in", None) or rc.frame
        if raised_at:
            out.append(f"- **Raised at:** `{raised_at}`" + (f" (inside `{raised_in}`)" if raised_in and raised_in != raised_at else ""))
        elif raised_in:
            out.append(f"- **Raised in:** `{raised_in}`")
        if rc.timestamp:
            out.append(f"- **Time:** {rc.timestamp}")
        out.append(f"- **Rule:** `{rc.rule_id}`")
        out.append(f"- **Evidence level:** `{rc.evidence}`. {evidence_in_words(rc)}")
        for e in supporting(rc):
            out.append(f"- **Evidence:** `{e}`")
        tb = list(rc.traceback)
        if len(tb) > 1:
            out += ["", _fence(trim_traceback(tb, rc.message, full))]
        rem = rc.remediation_parts
        out += ["", "### What to do", "", rem.summary]
        if rem.why:
            out += ["", rem.why]
        if rem.fix:
            out += [""] + [f"1. {f}" for f in rem.fix]
    fr = recorder_lines(d)
    if fr:
        out += ["", "## Flight recorder", ""] + [f"- {ln}" for ln in fr]
    if d.symptoms:
        out += ["", "## Other failures and symptoms", "", "| category | rule | ranks | count | first seen | after the root cause |", "|---|---|---|---|---|---|"]
        for s in ordered_symptoms(d):
            ranks = s.rank_ranges or "-"
            out.append(f"| `{s.category}` | `{s.rule_id}` | {ranks} | {s.count} | `{s.first_source}` | {delay(s, rc) or '-'} |")
    if d.attempts:
        out += ["", "## Attempts", "", d.history or "", "", "| attempt | outcome | where | starts at |", "|---|---|---|---|"]
        for a in d.attempts:
            what = f"`{a.category}` on " + (f"rank {a.rank}" if a.rank is not None else describe(a.ranks) if a.ranks else "an unknown rank") if a.category else "no failure"
            out.append(f"| {a.index} | {what} | `{a.source or '-'}` | `{a.starts_at or 'start'}` |")
    if d.launcher_verdicts:
        out += ["", "## Launcher summaries", ""]
        for v in d.launcher_verdicts:
            out.append(f"- `{v.source}` ({v.node or 'unknown host'}): {v.note}")
    if d.warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in d.warnings]
    out += ["", f"_{d.lines_read} lines from {len(d.inputs)} file(s), {ranks_seen(d)}._", ""]
    return "\n".join(out)
