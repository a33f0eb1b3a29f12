"""The default report: rich text for a terminal, plain text (no colour) otherwise.

Read top-down at 3 a.m.: the verdict, the picture of the cascade, the root cause with its
location and evidence, what to do; then the traceback, the symptoms in time order, the
launchers' summaries and the attempts. No boxes, and a location is never split: prose
wraps at spaces on a terminal (`width`), not at all elsewhere, so a pasted report keeps
every `path:line` intact and greppable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from slurmdoc.diagnosis.ranks import describe
from slurmdoc.models import Diagnosis
from slurmdoc.report.wording import evidence_in_words, recorder_lines
from slurmdoc.report.layout import columns, delay, locations, ordered_symptoms, straggler_own, supporting, trim_traceback, wrap
from slurmdoc.report.styled import Line, Lines, Styled, as_lines

if TYPE_CHECKING:
    from rich.console import Console

MESSAGE_LINES = 3  # on a terminal, a longer message is cut here when the traceback shows it whole


def _who(d: Diagnosis) -> str:
    rc = d.root_cause
    assert rc is not None
    if len(rc.ranks) > 1:
        return describe(rc.ranks, d.ranks_seen)
    if rc.rank is not None:
        return f"rank {rc.rank}"
    return "the whole job" if rc.job_level else "unknown rank"


def layout_width(console: Lines) -> Optional[int]:
    """The width to wrap at: the terminal's, or None (no wrapping) off a terminal."""
    return console.width if console.is_terminal else None


class _Out:
    def __init__(self, console: Lines, width: Optional[int], keep: list[str]) -> None:
        self.console = console
        self.width = width
        self.keep = keep
        self.message_in_full = True

    def line(self, text: Line = "", style: Optional[str] = None) -> None:
        self.console.line(text, style or "")

    def para(self, text: str, style: Optional[str] = None, indent: str = "  ", hang: Optional[str] = None) -> None:
        for ln in wrap(text, self.width, indent, hang, self.keep):
            self.line(ln, style)


def render(d: Diagnosis, console: "Union[Lines, Console]", width: Optional[int] = -1, full: bool = False, picture: bool = True) -> None:
    """Write the report of `d` to `console`. `width`: wrap prose at this many columns (None:
    never; default: the console's width on a terminal, else never). `full`: the whole
    traceback. `picture`: the rank x time strip under the verdict, when times are known."""
    lines = as_lines(console)
    w = layout_width(lines) if width == -1 else width
    out = _Out(lines, w, locations(d))
    rc = d.root_cause
    if rc is None:
        out.para(d.verdict, "bold green", indent="")
    else:
        out.para("VERDICT  " + d.verdict, "bold", indent="", hang="  ")
        if picture:
            from slurmdoc.report.picture import strip

            rows = strip(d, w or 100)
            if rows:
                for row in rows:
                    out.line(row)
        _root(d, out)
    _rest(d, out, full)


def _root(d: Diagnosis, out: _Out) -> None:
    rc = d.root_cause
    assert rc is not None
    out.line()
    head = Styled()
    head.append("ROOT CAUSE  ", style="bold red")
    head.append(rc.title, style="bold")
    head.append(f"  [{rc.category}" + (f": {rc.label}" if rc.label else "") + "]", style="magenta")
    if out.width is None or len(head.plain) <= out.width:
        out.line(head)
    else:
        out.para(head.plain, "bold", indent="", hang="  ")
    own = straggler_own(d)
    if own is not None:  # the root line is the others' report that it was missing
        head = _who(d) + " (straggler)" + (f" on {rc.node}" if rc.node else "")
        if own.endswith("printed nothing in this log"):
            out.para(f"{head}: it printed nothing in this log", "bold cyan", hang="    ")
        else:
            out.para(head, "bold cyan")
            out.para(own, hang="    ")
        out.para(f"reported at {rc.source}")
    else:
        out.para(_who(d) + (f" on {rc.node}" if rc.node else "") + (f" at {rc.timestamp}" if rc.timestamp else ""), "bold cyan")
        out.para(f"printed at {rc.source}")
    raised_at = getattr(rc, "raised_at", None)
    raised_in = getattr(rc, "raised_in", None) or rc.frame
    if raised_at:
        out.para(f"raised at {raised_at}" + (f" (inside {raised_in})" if raised_in and raised_in != raised_at else ""))
    elif raised_in:
        out.para(f"raised in {raised_in}")
    if rc.promoted and own is None:
        out.para("(no error that starts a failure: this is the earliest failure evidence)", "yellow")
    msg = wrap(rc.message, out.width, "  ", "    ", out.keep)
    out.message_in_full = True
    if len(msg) > MESSAGE_LINES and len(rc.traceback) > 1 and any(t.strip() == rc.message.strip() for t in rc.traceback):
        cut = " … (in full below)"  # the traceback below ends with it in full
        shown = msg[: MESSAGE_LINES - 1]
        rest = " ".join(rc.message.split()[sum(len(ln.split()) for ln in shown):])
        msg = shown + [wrap(rest, out.width - len(cut), "    ", "    ", out.keep)[0] + cut]
        out.message_in_full = False
    for ln in msg:
        out.line(ln, "bold yellow")
    out.para(evidence_in_words(rc), "italic", hang="    ")
    for e in supporting(rc):
        if own is not None and own.endswith(e.rsplit("): ", 1)[-1]) and e.split(" (", 1)[-1].split(")")[0] in own:
            continue  # the straggler's own last line, said above
        out.para(f"evidence: {e}", "dim", hang="    ")
    rem = rc.remediation_parts
    out.line()
    out.line("WHAT TO DO", "bold green")
    summary = rem.summary
    if len(rc.message) > 60 and out.message_in_full:
        summary = summary.replace(rc.message, "(the error above)")  # said once
    out.para(summary)
    if rem.why:
        out.para(rem.why, "italic")
    for f in rem.fix:
        out.para(f"• {f}", hang="    ")


def _rest(d: Diagnosis, out: _Out, full: bool) -> None:
    rc = d.root_cause
    fr = recorder_lines(d)
    if fr:
        out.line()
        out.line("FLIGHT RECORDER", "bold")
        for ln in fr:
            out.para(ln, hang="    ")
    if rc is not None and len(rc.traceback) > 1:
        out.line()
        out.line("TRACEBACK" + ("" if full else "  (your frames and the one that raised; --full shows all)"), "bold")
        for line in trim_traceback(rc.traceback, rc.message if out.message_in_full else "", full):
            out.line("    " + line, "dim" if line.startswith("  ") else None)
    if d.symptoms:
        out.line()
        out.line("OTHER FAILURES AND SYMPTOMS" + ("  (in time order)" if any(s.first_time for s in d.symptoms) else ""), "bold")
        syms = ordered_symptoms(d)
        after = [delay(s, rc) for s in syms]
        head = ["category", "ranks", "count", "first seen"] + (["after"] if any(after) else []) + ["what"]
        rows = [[s.category, s.rank_ranges or "-", str(s.count), s.first_source] + ([a or ""] if any(after) else []) + [s.title]
                for s, a in zip(syms, after)]
        table = columns([head] + rows, out.width)
        if table is not None:
            out.line(table[0], "bold")
            for s, line in zip(syms, table[1:]):
                out.line(line, "red" if s.role == "cause" else None)
        else:
            for s, a in zip(syms, after):
                ranks = f"ranks {s.rank_ranges}" if s.rank_ranges else "rank unknown"
                when = f", {a} after the root cause" if a else ""
                for ln in wrap(f"{s.category}  {ranks}  ×{s.count}  first at {s.first_source}{when}: {s.title}",
                               out.width, "  ", "    ", out.keep + ([a] if a else [])):
                    out.line(ln, "red" if s.role == "cause" else None)
    if d.launcher_verdicts:
        out.line()
        for v in d.launcher_verdicts:
            mark = "✗" if v.agrees is False else ("✓" if v.agrees else "•")
            out.para(f"{mark} launcher summary at {v.source}: {v.note}", "yellow" if v.agrees is False else "dim", indent="", hang="  ")
    if d.attempts:
        out.line()
        out.para(f"ATTEMPTS  {d.history}", "bold", indent="", hang="  ")
        for a in d.attempts:
            where = f" at {a.source}" if a.source else ""
            start = f"  (from {a.starts_at})" if a.starts_at else ""
            what = f"{a.category} on " + (f"rank {a.rank}" if a.rank is not None else describe(a.ranks) if a.ranks else "an unknown rank") if a.category else "no failure"
            out.para(f"{a.index}  {what}{where}{start}", "dim" if a is not d.attempts[-1] else None, hang="     ")
