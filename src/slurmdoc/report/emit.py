"""Where a report goes and how it looks there: the console (colour, width) and the choice
of renderer. The CLI only names the format, the destination and the options.

Colour: `auto` colours a terminal unless NO_COLOR is set, and anything when FORCE_COLOR is
set (not empty, not 0); `always` and `never` decide alone. Width: a terminal's own; off a
terminal (a pipe, a file, `--output`) lines are never wrapped.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable, Optional, TextIO

if TYPE_CHECKING:
    from rich.console import Console

    from slurmdoc.report.styled import Lines

# rich is imported where a coloured or terminal console is made: the JSON, Markdown and HTML
# reports never need it, nor a text report without colour off a terminal (report/styled.py)
COLORS = ("auto", "always", "never")


def wants_color(stream: TextIO, color: str = "auto") -> bool:
    if color == "always":
        return True
    if color == "never":
        return False
    force = os.environ.get("FORCE_COLOR", "")
    if force and force != "0":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return _isatty(stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def make_console(stream: TextIO, color: str = "auto", width: Optional[int] = None) -> tuple[Lines, Optional[int]]:
    """Where a text report's lines go on `stream`, and the width to wrap prose at (None: do
    not wrap): `width` when given, else a terminal's own. Without colour off a terminal,
    rich is not even imported (PlainLines writes what it would)."""
    from slurmdoc.report.styled import PlainLines, RichLines

    tty = _isatty(stream)
    colored = wants_color(stream, color)
    if not colored and not tty:
        return PlainLines(stream, lambda: _console(stream, colored, tty)), width or None
    console = _console(stream, colored, tty)
    return RichLines(console), (width if width else console.width if tty else None)


def _console(stream: TextIO, colored: bool, tty: bool) -> Console:
    from rich.console import Console

    return Console(
        file=stream,
        no_color=not colored,
        force_terminal=colored or None,
        color_system="auto" if colored else None,
        highlight=False,
        soft_wrap=True,
        width=None if tty else 100_000,
    )


def emit(result, fmt: str, stream: TextIO, color: str = "auto", full: bool = False, picture: bool = True, width: Optional[int] = None) -> None:
    """Write the report of a diagnosis (joined with its job record for `--job`) in `fmt`:
    text, json, markdown or html."""
    if fmt == "json":
        from slurmdoc.report.json_format import render

        stream.write(render(result))
    elif fmt == "html":
        from slurmdoc.report.html import render as render_html

        stream.write(render_html(result, full=full))
    elif fmt == "markdown":
        from slurmdoc.report.markdown import render as render_md

        if result.job is not None:
            from slurmdoc.report.job import render_markdown as render_job_md

            stream.write(render_job_md(result.job))
        if result.job is None or result.lines_read:
            stream.write(render_md(result, full=full))
    else:
        from slurmdoc.report.terminal import render as render_term

        console, width = make_console(stream, color, width)
        if result.job is not None:
            from slurmdoc.report.job import render_text as render_job

            render_job(result.job, console, width)
            if not result.lines_read:
                stream.flush()
                return
            console.line()
        render_term(result, console, width=width, full=full, picture=picture)
    stream.flush()


def with_progress(fn: Callable, total: int):
    """Run fn(on_bytes) under a progress bar on stderr, cleared when done."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    console = Console(stderr=True)
    prog = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=console, transient=True)
    try:
        with prog:
            task = prog.add_task("reading", total=total)
            return fn(lambda n: prog.advance(task, n))
    finally:
        if console.is_terminal:  # whatever rich left (a bar stopped short of its total): erase the line
            try:
                sys.stderr.write("\r\x1b[2K")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
