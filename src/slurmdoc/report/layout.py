"""Layout shared by the renderers: wrapping prose without ever breaking a location, trimming
a traceback to the frames a user will open, ordering symptoms by time.

A location (`path:line`, a path) is never split: prose wraps only at spaces, never inside a
word, and the spaces of the locations named in `keep` are not break points either. With no
width (off a terminal) nothing is wrapped at all.
"""

from __future__ import annotations

import textwrap
from datetime import datetime
from typing import Iterable, Optional, Sequence

from slurmdoc import frames
from slurmdoc.models import Diagnosis, RootCause, Symptom

_GLUE = "\x00"  # stands for a space that must not break a line
TB_HEAD = 4  # lines kept from the start of a traceback that is still long once trimmed
TB_TAIL = 14
TB_MAX = 40


def wrap(text: str, width: Optional[int], indent: str = "  ", hang: Optional[str] = None, keep: Iterable[str] = ()) -> list[str]:
    """Lines of `text` at most `width` wide (None: one line), broken only at spaces outside
    the `keep` strings; a word longer than the width stands alone on its line, whole."""
    if width is None:
        return [indent + text]
    for k in keep:
        if k and " " in k:
            text = text.replace(k, k.replace(" ", _GLUE))
    out = textwrap.wrap(
        text, width=max(width, len(indent) + 20), initial_indent=indent, subsequent_indent=hang if hang is not None else indent,
        break_long_words=False, break_on_hyphens=False, drop_whitespace=True,
    )
    return [line.replace(_GLUE, " ") for line in out] or [indent]


def locations(d: Diagnosis) -> list[str]:
    """Every location a report of `d` may print (kept whole when wrapping)."""
    out: list[str] = list(d.inputs)
    rc = d.root_cause
    if rc is not None:
        out += [x for x in (rc.source, rc.frame, getattr(rc, "raised_at", None), getattr(rc, "raised_in", None)) if x]
    out += [s.first_source for s in d.symptoms]
    out += [v.source for v in d.launcher_verdicts]
    out += [a.source for a in d.attempts if a.source] + [a.starts_at for a in d.attempts if a.starts_at]
    return sorted(set(out), key=len, reverse=True)


def supporting(rc: RootCause) -> tuple[str, ...]:
    """The lines that support or refine the root cause (`evidence_lines`, once `evidence`
    names the rung of the evidence ladder)."""
    lines = getattr(rc, "evidence_lines", None)
    if lines is None:
        ev = getattr(rc, "evidence", ())
        lines = ev if isinstance(ev, tuple) else ()
    return tuple(lines)


def trim_traceback(tb: Sequence[str], message: str, full: bool = False) -> list[str]:
    """The traceback as a user reads it: frames in the user's code and the frame that raised
    (library frames between them folded into one line), the exception line that repeats the
    root cause's message shortened to its type. `full`: every line."""
    lines = list(tb)
    msg = message.strip()
    for i, line in enumerate(lines):
        if msg and line.strip() == msg and len(msg) > 60:
            head = msg.split(":", 1)[0] if ":" in msg[:80] else ""
            lines[i] = line[: len(line) - len(line.lstrip())] + (f"{head}: " if head else "") + "(the error above)"
    if full:
        return lines
    fs = frames.frames(lines)
    drop: set[int] = set()
    for k, f in enumerate(fs):
        nxt = fs[k + 1].index if k + 1 < len(fs) else None
        innermost = nxt is None or nxt > f.end  # an exception line lies between it and the next frame
        if not f.user and not innermost:
            drop.update(range(f.index, f.end))
    out: list[str] = []
    run = 0
    for i, line in enumerate(lines):
        if i in drop:
            run += 1 if FRAME_LINE.match(line) else 0
            continue
        if run:
            out.append(f"  ... {run} library frame{'s' if run > 1 else ''} (--full shows them)")
            run = 0
        out.append(line)
    if len(out) > TB_MAX:
        out = out[:TB_HEAD] + [f"    ... {len(out) - TB_HEAD - TB_TAIL} lines (--full shows them) ..."] + out[-TB_TAIL:]
    return out


FRAME_LINE = frames.FRAME


def _when(ts: Optional[str]) -> Optional[datetime]:
    if not ts:
        return None
    try:
        t = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return t.replace(tzinfo=None)


def _line_key(source: str, inputs: Sequence[str]) -> tuple[int, int]:
    path, _, line = source.rpartition(":")
    idx = inputs.index(path) if path in inputs else len(inputs)
    return idx, int(line) if line.isdigit() else 0


def ordered_symptoms(d: Diagnosis) -> list[Symptom]:
    """Symptoms in time order (those with a time first), then in line order."""
    inputs = list(d.inputs)

    def key(s: Symptom):
        t = _when(s.first_time)
        return (t is None, t or datetime.min, _line_key(s.first_source, inputs))

    return sorted(d.symptoms, key=key)


def delay(s: Symptom, rc: Optional[RootCause]) -> Optional[str]:
    """How long after the root cause a symptom first appeared (`+600 s`), when both times are
    known; before it, `-19 s` (a launcher reports a rank's death after its peers saw it)."""
    if rc is None:
        return None
    a, b = _when(rc.timestamp), _when(s.first_time)
    if a is None or b is None:
        return None
    sec = (b - a).total_seconds()
    return ("+" if sec >= 0 else "") + human_seconds(sec)


def human_seconds(sec: float) -> str:
    neg = sec < 0
    sec = abs(sec)
    if sec == 0:
        txt = "0 s"
    elif sec < 0.01:
        txt = f"{sec * 1000:.1f} ms"
    elif sec < 1:
        txt = f"{sec * 1000:.0f} ms"
    elif sec < 10:
        txt = f"{sec:.1f} s" if sec % 1 else f"{sec:.0f} s"
    elif sec < 120:
        txt = f"{sec:.0f} s"
    elif sec < 7200:
        txt = f"{sec / 60:.0f} min"
    else:
        txt = f"{sec / 3600:.1f} h"
    return ("-" if neg else "") + txt


def ranks_seen(d: Diagnosis) -> str:
    """'4 ranks seen', or why none is counted: no line named its rank (a count of 0 would
    claim that no rank ran)."""
    if d.ranks_seen or not d.lines_read:
        return f"{d.ranks_seen} rank{'s' if d.ranks_seen != 1 else ''} seen"
    return "no line names its rank"


def columns(rows: list[list[str]], width: Optional[int], indent: str = "") -> Optional[list[str]]:
    """Rows aligned in columns, or None when they would not fit in `width` (no width: always fit)."""
    if not rows:
        return []
    n = max(len(r) for r in rows)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(n)]
    total = len(indent) + sum(widths) + 2 * (n - 1)
    if width is not None and total > width:
        return None
    out = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i < n - 1 else c for i, c in enumerate(r)]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def straggler_own(d: Diagnosis) -> Optional[str]:
    """What a straggler root printed itself (its last line, where, when, its last step), or
    that it printed nothing: the root line of a straggler is another rank's report."""
    rc = d.root_cause
    if rc is None or not rc.stragglers:
        return None
    rank = rc.rank if rc.rank is not None else rc.stragglers[0]
    p = next((x for x in d.progress if x.rank == rank), None)
    if p is not None:
        step = f", {p.unit or 'step'} {p.step}" if p.step is not None else ""
        when = f" at {p.last_time}" if p.last_time else ""
        return f"its last line, {p.last_source}{when}{step}: {p.last_line}"
    t = next((x for x in d.timeline if x.rank == rank), None)
    if t is not None and t.last_output:
        return f"it printed nothing after {t.last_output}"
    return f"rank {rank} printed nothing in this log"
