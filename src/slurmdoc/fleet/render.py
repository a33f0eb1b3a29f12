"""Scan outputs behind one interface: `start`, one `row` per job as it comes (streamed), `finish`
with the summary. text (terminal), json (schema_version 1, kind "scan"), markdown, jsonl (one
line per job), part (what `scan --shard` writes for `scan merge`)."""

from __future__ import annotations

import json
from typing import IO

from slurmdoc.fleet.record import JobRecord
from slurmdoc.fleet.run import SCHEMA_VERSION, part_header, record_line


def _job(r: JobRecord) -> str:
    """The job id, or for logs naming no job the last two parts of their path."""
    if r.job_id is not None:
        return r.job_id
    parts = r.where.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:])


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%" if x >= 0.01 or x == 0 else f"{x * 100:.1f}%"


class Output:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def start(self) -> None:
        pass

    def row(self, r: JobRecord) -> None:
        pass

    def finish(self, summary: dict) -> None:
        pass


class JsonOut(Output):
    """One JSON object; the jobs array is written as the jobs come, the summary last."""

    def start(self) -> None:
        self.first = True
        self.out.write(f'{{"schema_version": {SCHEMA_VERSION}, "kind": "scan", "jobs": [')

    def row(self, r: JobRecord) -> None:
        self.out.write(("\n  " if self.first else ",\n  ") + json.dumps(r.to_dict(), ensure_ascii=False))
        self.first = False

    def finish(self, summary: dict) -> None:
        body = json.dumps(summary, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        self.out.write(("\n" if not self.first else "") + f'], "summary": {body}}}\n')


class JsonlOut(Output):
    def row(self, r: JobRecord) -> None:
        self.out.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


class PartOut(Output):
    def __init__(self, out: IO[str], shard: tuple[int, int], total: int) -> None:
        super().__init__(out)
        self.shard = shard
        self.total = total

    def start(self) -> None:
        self.out.write(part_header(self.total, self.shard))

    def row(self, r: JobRecord) -> None:
        self.out.write(record_line(r))


def summary_lines(s: dict) -> list[str]:
    """The summary in plain lines (text and markdown share them)."""
    out = [f"{s['jobs']} jobs: {s['failed']} failed, {s['no_failure']} no failure"
           + (f", {s['errors']} unreadable" if s["errors"] else "")]
    if s["categories"]:
        out += ["", "By category:"]
        out += [f"  {c['category']:<20} {c['count']:>6}  {_pct(c['share'])}" for c in s["categories"]]
    if s["signatures"]:
        out += ["", f"Top signatures ({s['distinct_signatures']} distinct):"]
        for g in s["signatures"]:
            span = f"  {g['first']}..{g['last']}" if g["first"] else ""
            out.append(f"  {g['count']:>6}  {_pct(g['share']):>4}  {g['signature']}")
            out.append(f"          jobs {', '.join(g['jobs'])}{' ...' if g['count'] > len(g['jobs']) else ''}{span}")
    if s["per_day"]:
        out += ["", "Failed jobs per day:"]
        for d in s["per_day"]:
            cats = ", ".join(f"{c} {k}" for c, k in sorted(d["categories"].items(), key=lambda kv: (-kv[1], kv[0])))
            out.append(f"  {d['day']}  {d['failed']:>5}  {cats}")
    out += ["", "Node suspects (nodes named in 2 or more hardware-looking root causes):"]
    if s["node_suspects"]:
        for n in s["node_suspects"]:
            cats = ", ".join(f"{c} x{k}" for c, k in n["categories"].items())
            when = f", {n['first']}..{n['last']}" if n["first"] else ""
            out.append(f"  {n['node']}: {n['count']} ({cats}); jobs {', '.join(n['jobs'])}{when}")
            out.append(f"    {n['drain']}")
        out.append("  (printed, never run: check the node before draining it)")
    else:
        out.append("  none")
    if s["hardware_failures_without_node"]:
        out.append(f"  {s['hardware_failures_without_node']} hardware-looking failure(s) named no node")
    u = s["unclassified"]
    out += ["", f"Unclassified: {u['count']} of {s['failed']} failed jobs ({_pct(u['rate'])}): "
                f"unknown {u['unknown']}, python_exception {u['python_exception']}"]
    return out


COLS = (("job", 24), ("status", 10), ("category", 18), ("rank", 5), ("node", 10), ("evidence", 10))


# SGR colours of the status cell on a terminal (the same as triage's: failed red, healthy green)
STATUS_SGR = {"failed": "1;31", "no_failure": "32", "error": "33"}


class TextOut(Output):
    """Rows as they come, in fixed columns; with `color`, the status cell in colour (padding
    counted on the plain text, so the columns line up either way)."""

    def __init__(self, out: IO[str], color: bool = False) -> None:
        super().__init__(out)
        self.color = color

    def start(self) -> None:
        self.out.write("  ".join(f"{n.upper():<{w}}" for n, w in COLS) + "  SIGNATURE\n")

    def row(self, r: JobRecord) -> None:
        vals = (_short(_job(r), COLS[0][1]), r.status, r.category or "-",
                "-" if r.rank is None else str(r.rank), r.node or "-", r.evidence or "-")
        padded = [f"{v:<{w}}" for v, (_, w) in zip(vals, COLS)]
        if self.color and r.status in STATUS_SGR:
            padded[1] = f"\x1b[{STATUS_SGR[r.status]}m{r.status}\x1b[0m" + padded[1][len(r.status):]
        cells = "  ".join(padded)
        tail = r.signature or (r.error or "")
        self.out.write(f"{cells}  {tail}{_use(r)}\n")

    def finish(self, summary: dict) -> None:
        self.out.write("\n" + "\n".join(summary_lines(summary)) + "\n")


def _use(r: JobRecord) -> str:
    """Efficiency from the accounting: time and memory used against the request, CPU time against
    the CPUs held for the elapsed time."""
    bits = []
    if r.time_use is not None:
        bits.append(f"time {_pct(r.time_use)} of limit")
    if r.mem_use is not None:
        bits.append(f"mem {_pct(r.mem_use)} of request")
    if r.cpu_use is not None:
        bits.append(f"cpu {_pct(r.cpu_use)} of allocation")
    return f"  [{', '.join(bits)}]" if bits else ""


def _short(where: str, width: int) -> str:
    return where if len(where) <= width else "..." + where[-(width - 3):]


def _cell(x: str) -> str:
    return x.replace("|", "\\|").replace("\n", " ")


class MarkdownOut(Output):
    def start(self) -> None:
        self.out.write("# slurmdoc scan\n\n| job | status | category | rank | node | evidence | signature |\n"
                       "|---|---|---|---|---|---|---|\n")

    def row(self, r: JobRecord) -> None:
        cells = [_job(r), r.status, f"`{r.category}`" if r.category else "-", "-" if r.rank is None else str(r.rank),
                 r.node or "-", r.evidence or "-", (r.signature or (r.error or "")) + _use(r)]
        self.out.write("| " + " | ".join(_cell(c) for c in cells) + " |\n")

    def finish(self, summary: dict) -> None:
        self.out.write("\n## Summary\n\n```\n" + "\n".join(summary_lines(summary)) + "\n```\n")


def make_output(fmt: str, out: IO[str], color: bool = False) -> Output:
    if fmt == "text":
        return TextOut(out, color)
    return {"json": JsonOut, "jsonl": JsonlOut, "markdown": MarkdownOut}[fmt](out)
