"""report/styled.py: the text reports' lines, written with or without rich, must be the bytes
rich writes (a report must not depend on which of the two wrote it)."""

from __future__ import annotations

import io

import rich.control
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from slurmdoc.report.emit import _console, make_console
from slurmdoc.report.styled import RICH_STRIPS, PlainLines, RichLines, Styled, as_lines

STYLES = st.sampled_from(["", "bold", "bold red", "dim", "italic", "magenta", "bold cyan", "yellow"])
# what a log line can hold: prose, paths, tabs, stray control codes, escapes, wide characters
TEXT = st.text(st.one_of(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                         st.sampled_from(["\t", "\n", "\r", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x00", "日", "本", "é", " "])),
               max_size=40)
# a line as the renderers build it: a start, then appends and stylings of ranges from an offset
# the renderers found (0 or more; a range may run past the text's end). A negative offset is
# left out: rich mis-draws a range that starts before the text (repeats characters, or raises)
STYLIZE = st.tuples(st.just("stylize"), STYLES, st.integers(0, 40), st.integers(0, 20)).map(lambda t: (*t[:3], t[2] + t[3]))
OPS = st.lists(st.one_of(st.tuples(st.just("append"), TEXT, STYLES), STYLIZE), max_size=5)


def _build(start: str, style: str, ops) -> tuple[Styled, Text]:
    s, t = Styled(start, style), Text(start, style=style)
    for op in ops:
        if op[0] == "append":
            s.append(op[1], op[2] or None)
            t.append(op[1], style=op[2] or None)
        else:
            s.stylize(op[1], op[2], op[3])
            t.stylize(op[1], op[2], op[3])
    return s, t


def _by_rich(texts: list[Text], colored: bool) -> str:
    """What rich writes for these lines on a stream that is not a terminal, configured as the
    report's console is (emit._console), printed as the renderers print."""
    buf = io.StringIO()
    con = _console(buf, colored, False)
    for t in texts:
        con.print(t, soft_wrap=True, no_wrap=True, overflow="ignore", crop=False)
    return buf.getvalue()


def test_the_stripped_control_codes_are_riches():
    assert sorted(RICH_STRIPS) == sorted(rich.control.STRIP_CONTROL_CODES)


@given(st.lists(st.tuples(TEXT, STYLES, OPS), min_size=1, max_size=4))
def test_plain_lines_are_the_bytes_rich_writes_without_colour(lines):
    built = [_build(start, style, ops) for start, style, ops in lines]
    buf = io.StringIO()
    out = PlainLines(buf, lambda: _console(buf, False, False))
    for s, _ in built:
        out.line(s)
    assert buf.getvalue() == _by_rich([t for _, t in built], colored=False)


@given(TEXT, STYLES)
def test_a_plain_str_and_its_style_is_a_line_of_that_style(text, style):
    buf = io.StringIO()
    PlainLines(buf, lambda: _console(buf, False, False)).line(text, style)
    assert buf.getvalue() == _by_rich([Text(text, style=style)], colored=False)
    cbuf = io.StringIO()
    RichLines(_console(cbuf, True, False)).line(text, style)
    assert cbuf.getvalue() == _by_rich([Text(text, style=style)], colored=True)


@given(TEXT, STYLES, OPS)
def test_rich_replays_a_styled_line_as_the_calls_that_built_it(start, style, ops):
    s, t = _build(start, style, ops)
    assert s.plain == t.plain
    buf = io.StringIO()
    RichLines(_console(buf, True, False)).line(s)
    assert buf.getvalue() == _by_rich([t], colored=True)


def test_without_colour_off_a_terminal_no_rich_console_is_made_unless_a_line_needs_rich():
    made = []
    buf = io.StringIO()

    def console():
        made.append(1)
        return _console(buf, False, False)

    out = PlainLines(buf, console)
    out.line(Styled("ROOT CAUSE  ", "bold red").append("CUDA out of memory\r", "bold"))
    out.line("")
    assert made == [] and buf.getvalue() == "ROOT CAUSE  CUDA out of memory\n\n"
    out.line("a\tb")  # rich's tab stops
    out.line("c\td")
    assert made == [1] and buf.getvalue().endswith("a       b\nc       d\n")


def test_make_console_picks_plain_lines_only_without_colour_off_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    for var in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "90")
    assert isinstance(make_console(io.StringIO(), "auto")[0], PlainLines)
    assert make_console(io.StringIO(), "never", 70)[1] == 70
    assert make_console(io.StringIO(), "auto")[1] is None  # off a terminal: never wrap
    assert isinstance(make_console(io.StringIO(), "always")[0], RichLines)
    lines, width = make_console(Tty(), "never")
    assert isinstance(lines, RichLines) and width == 90  # a terminal's width comes from rich
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert isinstance(make_console(io.StringIO(), "auto")[0], RichLines)


def test_renderers_take_a_rich_console_as_it_is_configured():
    con = Console(file=io.StringIO(), width=123, no_color=True)
    lines = as_lines(con)
    assert isinstance(lines, RichLines) and lines.width == 123 and lines.is_terminal is False
    assert as_lines(lines) is lines
