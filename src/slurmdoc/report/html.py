"""`--format html`: one self-contained page (inline CSS and SVG; no script, no font, nothing
fetched from the network): the verdict and root cause, the rank x time timeline, each
rank's last progress, the symptoms, the launchers' summaries, the traceback.

It stays small whatever the job's size: timeline rows are ranks when few, else nodes or
blocks of ranks, and each row's marks are binned to the pixel columns they fall in; the
progress table folds ranks that stopped at the same step and time into rank ranges.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Optional

from slurmdoc.diagnosis.ranks import describe, ranges
from slurmdoc.models import Diagnosis
from slurmdoc.report.layout import straggler_own, delay, human_seconds, ordered_symptoms, ranks_seen, supporting, trim_traceback
from slurmdoc.report.wording import evidence_in_words, recorder_lines
from slurmdoc.report.picture import GLYPH_RANK, rows_of, span

MAX_ROWS = 32  # timeline rows
BINS = 240  # horizontal resolution of a row
MAX_PROGRESS_ROWS = 200
KIND = {"X": ("root", "root cause"), "x": ("cause", "another cause"), "o": ("symptom", "symptom"),
        "|": ("progress", "last progress"), "]": ("end", "end of output")}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#1d1d1f;padding:0 16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{background:#fff4f4;border-left:5px solid #c62828;padding:10px 14px;margin:8px 0 16px}
.verdict.ok{background:#f1faf1;border-color:#2e7d32}
code,pre,.loc{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.loc{white-space:nowrap}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;white-space:pre}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{font-weight:600;border-bottom:1px solid #ccc}
.cat{color:#7b1fa2}.msg{font-weight:600;color:#8a4b00;white-space:pre-wrap;word-break:break-word}
.dim{color:#666}.fix li{margin:2px 0}
svg text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#333}
svg .row rect.band{fill:#f7f7f7}svg .row.straggler rect.band{fill:#fff0c2}svg .row.root rect.band{fill:#ffd6d6}
.m-root{fill:#c62828}.m-cause{fill:#ef6c00}.m-symptom{fill:#1565c0}.m-progress{fill:#2e7d32}.m-end{fill:#777}
.legend span{margin-right:14px;white-space:nowrap}.legend svg{vertical-align:middle}
"""


def _loc(x: Optional[str]) -> str:
    return f'<span class="loc">{escape(x)}</span>' if x else ""


def _shape(kind: str, x: float, y: float) -> str:
    cls = f"m-{kind}"
    if kind == "root":
        return f'<path class="{cls}" d="M{x - 5:.1f} {y - 5:.1f}l10 10m0 -10l-10 10" stroke="#c62828" stroke-width="3"/>'
    if kind == "progress":
        return f'<rect class="{cls}" x="{x - 1:.1f}" y="{y - 6:.1f}" width="2.5" height="12"/>'
    if kind == "end":
        return f'<rect class="{cls}" x="{x - 1:.1f}" y="{y - 6:.1f}" width="4" height="12" fill-opacity=".6"/>'
    r = 4 if kind == "symptom" else 5
    return f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{r}"/>'


def timeline_svg(d: Diagnosis) -> str:
    sp = span(d)
    if sp is None or d.root_cause is None:
        return '<p class="dim">The log\'s lines carry too few times to draw a timeline.</p>'
    t0, t1 = sp
    rows = rows_of(d, MAX_ROWS, per_rank_max=MAX_ROWS)
    label_w, left, width, row_h, top = 235, 8, 1060, 22, 8
    plot_w = width - label_w - left - 20
    secs = (t1 - t0).total_seconds()
    out = [f'<svg class="timeline" width="{width}" height="{top + row_h * len(rows) + 40}" '
           f'role="img" aria-label="ranks over time">']
    for i, r in enumerate(rows):
        y = top + i * row_h
        classes = "row" + (" root" if "root" in r.note else "") + (" straggler" if "straggler" in r.note else "")
        out.append(f'<g class="{classes}" data-ranks="{escape(ranges(r.ranks))}">')
        out.append(f'<rect class="band" x="{left}" y="{y}" width="{width - left}" height="{row_h - 2}"/>')
        label = r.label + (f"  {r.note.replace('<- ', '')}" if r.note else "")
        out.append(f'<text x="{left + 4}" y="{y + 15}">{escape(label[:36])}</text>')
        best: dict[int, str] = {}
        for when, g in r.marks:
            b = 0 if when <= t0 else min(BINS - 1, int((when - t0).total_seconds() / secs * (BINS - 1) + 0.5))
            if GLYPH_RANK[g] > GLYPH_RANK.get(best.get(b, "."), 0):
                best[b] = g
        for b, g in sorted(best.items(), key=lambda kv: GLYPH_RANK[kv[1]]):
            out.append(_shape(KIND[g][0], label_w + left + b * plot_w / (BINS - 1), y + (row_h - 2) / 2))
        out.append("</g>")
    y = top + row_h * len(rows) + 4
    out.append(f'<g class="axis"><line x1="{label_w + left}" y1="{y}" x2="{label_w + left + plot_w}" y2="{y}" stroke="#333"/>')
    for k in range(6):
        x = label_w + left + k * plot_w / 5
        label = t0.strftime("%H:%M:%S") if k == 0 else "+" + human_seconds(secs * k / 5)
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 5}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{y + 18}" text-anchor="{"start" if k == 0 else "end" if k == 5 else "middle"}">{escape(label)}</text>')
    out.append("</g></svg>")
    legend = ['<div class="legend">']
    for g in ("X", "x", "o", "|", "]"):
        kind, words = KIND[g]
        legend.append(f'<span class="key-{kind}"><svg width="14" height="14">{_shape(kind, 7, 7)}</svg> {words}</span>')
    legend.append('<span><svg width="14" height="14"><rect width="14" height="14" fill="#ffd6d6"/></svg> the root rank\'s row</span>')
    legend.append("</div>")
    return "".join(out) + "\n" + "".join(legend)


def _progress_rows(d: Diagnosis) -> list[tuple[str, str, str, str]]:
    """(ranks, last step, its time, last output) with ranks alike folded into ranges."""
    items: list[tuple[int, str, str, str]] = []
    if d.progress:
        for p in d.progress:
            step = f"{p.unit or 'step'} {p.step}" if p.step is not None else "-"
            items.append((p.rank, step, p.step_time or "-", p.last_time or "-"))
    else:
        for t in d.timeline:
            step = f"step {t.step}" if t.step is not None else "-"
            items.append((t.rank, step, t.progress_at or "-", t.last_output or "-"))
    folded: list[tuple[list[int], tuple[str, str, str]]] = []
    for rank, *rest in sorted(items):
        key = tuple(rest)
        if folded and folded[-1][1] == key:
            folded[-1][0].append(rank)
        else:
            folded.append(([rank], key))
    return [(ranges(rs), *k) for rs, k in folded]


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    h = "".join(f"<th>{escape(x)}</th>" for x in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


def render(d: Diagnosis, full: bool = False) -> str:
    rc = d.root_cause
    e = escape
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>slurmdoc: {e(d.verdict[:120])}</title><style>{CSS}</style></head><body>",
             "<h1>slurmdoc diagnosis</h1>",
             f'<div class="verdict{" ok" if rc is None else ""}" id="verdict">{e(d.verdict)}</div>']
    if d.job is not None:
        from slurmdoc.report.job import lines as job_lines

        v = d.job
        parts += [f'<section id="job"><h2>Job {e(v.job_id)}: {e(v.verdict)}' + (f' <span class="cat">[{e(v.category)}]</span>' if v.category else "") + "</h2>",
                  _table(["", ""], ([e(k), e(t)] for k, t in job_lines(v))), "</section>"]
    if rc is not None:
        who = describe(rc.ranks, d.ranks_seen) if len(rc.ranks) > 1 else (f"rank {rc.rank}" if rc.rank is not None else "the whole job" if rc.job_level else "unknown rank")
        raised_at, raised_in = rc.raised_at, rc.raised_in or rc.frame
        parts += ['<section id="timeline"><h2>Timeline: ranks over time</h2>', timeline_svg(d), "</section>"]
        parts += ['<section id="root-cause"><h2>Root cause: ' + e(rc.title) + f' <span class="cat">[{e(rc.category)}{": " + e(rc.label) if rc.label else ""}]</span></h2>',
                  "<table>",
                  f"<tr><th>where</th><td>{e(who)}" + (f" on {e(rc.node)}" if rc.node else "") + "</td></tr>",
                  f"<tr><th>printed at</th><td>{_loc(rc.source)}</td></tr>"]
        if raised_at:
            parts.append(f"<tr><th>raised at</th><td>{_loc(raised_at)}" + (f' <span class="dim">(inside {_loc(raised_in)})</span>' if raised_in and raised_in != raised_at else "") + "</td></tr>")
        elif raised_in:
            parts.append(f"<tr><th>raised in</th><td>{_loc(raised_in)}</td></tr>")
        if rc.timestamp:
            parts.append(f"<tr><th>time</th><td>{e(rc.timestamp)}</td></tr>")
        if rc.stragglers:
            parts.append(f"<tr><th>straggler</th><td>{e(describe(rc.stragglers))}: {e(straggler_own(d) or '')}</td></tr>")
        parts.append("</table>")
        parts.append(f'<p class="msg">{e(rc.message)}</p>')
        parts.append(f'<p><em>{e(evidence_in_words(rc))}</em> <span class="dim">(evidence level: {e(rc.evidence)})</span></p>')
        for ev in supporting(rc):
            parts.append(f'<p class="dim">evidence: {e(ev)}</p>')
        rem = rc.remediation_parts
        parts += ["<h2>What to do</h2>", f"<p>{e(rem.summary)}</p>"]
        if rem.why:
            parts.append(f"<p><em>{e(rem.why)}</em></p>")
        if rem.fix:
            parts.append('<ul class="fix">' + "".join(f"<li>{e(f)}</li>" for f in rem.fix) + "</ul>")
        parts.append("</section>")
        prog = _progress_rows(d)
        if prog:
            more = len(prog) - MAX_PROGRESS_ROWS
            parts += ['<section id="progress"><h2>Last progress per rank</h2>',
                      _table(["ranks", "last progress", "at", "last output"], ([e(c) for c in r] for r in prog[:MAX_PROGRESS_ROWS])),
                      f'<p class="dim">... {more} more rows</p>' if more > 0 else "", "</section>"]
    fr = recorder_lines(d)
    if fr:
        parts += ['<section id="flight-recorder"><h2>Flight recorder</h2>'] + [f"<p>{e(ln)}</p>" for ln in fr] + ["</section>"]
    if d.symptoms:
        rows = ([e(s.category), e(s.rank_ranges or "-"), str(s.count), _loc(s.first_source), e(delay(s, rc) or "-"), e(s.title)] for s in ordered_symptoms(d))
        parts += ['<section id="symptoms"><h2>Other failures and symptoms</h2>',
                  _table(["category", "ranks", "count", "first seen", "after the root cause", "what"], rows), "</section>"]
    if d.launcher_verdicts:
        rows = (["✓" if v.agrees else "✗" if v.agrees is False else "•", _loc(v.source), e(v.node or "-"), e(v.note)] for v in d.launcher_verdicts)
        parts += ['<section id="launchers"><h2>Launcher summaries</h2>', _table(["", "at", "host", "says"], rows), "</section>"]
    if d.attempts:
        rows = ([str(a.index), e(a.category or "no failure"), e(f"rank {a.rank}" if a.rank is not None else describe(a.ranks) if a.ranks else "-"), _loc(a.source or "-"), _loc(a.starts_at or "start")] for a in d.attempts)
        parts += ['<section id="attempts"><h2>Attempts</h2>', f"<p>{e(d.history or '')}</p>", _table(["attempt", "outcome", "where", "at", "starts at"], rows), "</section>"]
    if rc is not None and len(rc.traceback) > 1:
        tb = trim_traceback(rc.traceback, "", full)
        parts += ['<section id="traceback"><h2>Traceback</h2>', f"<pre>{e(chr(10).join(tb))}</pre>", "</section>"]
    if d.warnings:
        parts += ["<h2>Warnings</h2><ul>"] + [f"<li>{e(w)}</li>" for w in d.warnings] + ["</ul>"]
    parts.append(f'<p class="dim">{d.lines_read} lines from {len(d.inputs)} file(s), {e(ranks_seen(d))}. Made by slurmdoc.</p>')
    parts.append("</body></html>\n")
    return "\n".join(parts)
