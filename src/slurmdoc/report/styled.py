"""The lines of the text reports (diagnose, --job, triage) and where they are written.

A renderer builds each line as a `Styled` (its text and rich's style names: "bold red") and
hands it to a `Lines`:
- `RichLines` draws it with rich's Console: colour, a terminal's width.
- `PlainLines` writes it without colour and without importing rich (about 20 ms of a run's
  start-up: the console module and its styles, colours and segments). It writes what rich
  writes with colour off, byte for byte: the text without the control codes rich strips
  (RICH_STRIPS), and a newline. A line holding a tab or a newline is handed to rich itself,
  whose tab stops count terminal cells (an East Asian wide character takes two), so the
  report never depends on which of the two wrote it. tests/test_styled.py holds them equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Protocol, TextIO, Union

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# The control codes rich's Text removes from whatever it is given (rich.control's
# STRIP_CONTROL_CODES): bell, backspace, vertical tab, form feed, carriage return.
RICH_STRIPS = (7, 8, 11, 12, 13)
_STRIP = dict.fromkeys(RICH_STRIPS)
_TO_RICH = ("\t", "\n")  # what PlainLines leaves to rich (tab stops, line splitting)


class Styled:
    """One line of a text report with its styles, kept as the calls that built it (the text
    it starts with, then appends and stylings), so rich replays them exactly when it draws
    the line, and the plain text is the one rich would print with colour off."""

    __slots__ = ("_ops",)

    def __init__(self, text: str = "", style: str = "") -> None:
        self._ops: list[tuple[str, str, object]] = [("text", text, style)]

    def append(self, text: str, style: Optional[str] = None) -> "Styled":
        self._ops.append(("append", text, style))
        return self

    def stylize(self, style: str, start: int, end: int) -> "Styled":
        """Style the characters start..end of the text (clipped to it, as rich clips)."""
        self._ops.append(("stylize", style, (start, end)))
        return self

    @property
    def plain(self) -> str:
        return "".join(text.translate(_STRIP) for op, text, _ in self._ops if op != "stylize")

    def to_rich(self) -> "Text":
        from rich.text import Text

        (_, text, style), *rest = self._ops
        t = Text(text, style=style)  # type: ignore[arg-type]
        for op, a, b in rest:
            if op == "append":
                t.append(a, style=b)  # type: ignore[arg-type]
            else:
                start, end = b  # type: ignore[misc]
                t.stylize(a, start, end)
        return t


Line = Union[str, Styled]


class Lines(Protocol):
    """Where a text report's lines go."""

    @property
    def is_terminal(self) -> bool: ...

    @property
    def width(self) -> int: ...

    def line(self, text: Line = "", style: str = "") -> None:
        """Write one line: `text` (a plain str takes `style` for the whole line)."""
        ...


def _styled(text: Line, style: str) -> Styled:
    return text if isinstance(text, Styled) else Styled(text, style)


class RichLines:
    """Lines drawn by a rich Console (colour, a terminal's width), each printed as it is:
    no wrapping, no cropping (the renderers wrap prose themselves, at spaces only)."""

    def __init__(self, console: "Console") -> None:
        self.console = console

    @property
    def is_terminal(self) -> bool:
        return self.console.is_terminal

    @property
    def width(self) -> int:
        return self.console.width

    def line(self, text: Line = "", style: str = "") -> None:
        self.console.print(_styled(text, style).to_rich(), soft_wrap=True, no_wrap=True, overflow="ignore", crop=False)


class PlainLines:
    """Lines without colour on a stream that is not a terminal (a pipe, a file, a buffer),
    written as rich writes them there; `rich_console` makes the console a line holding a tab
    or a newline is handed to (made once, when first needed)."""

    is_terminal = False

    def __init__(self, stream: TextIO, rich_console: Callable[[], "Console"]) -> None:
        self.stream = stream
        self._make_rich = rich_console
        self._rich: Optional[RichLines] = None

    @property
    def width(self) -> int:
        return self.rich.width

    @property
    def rich(self) -> RichLines:
        if self._rich is None:
            self._rich = RichLines(self._make_rich())
        return self._rich

    def line(self, text: Line = "", style: str = "") -> None:
        plain = text.plain if isinstance(text, Styled) else text.translate(_STRIP)
        if _TO_RICH[0] in plain or _TO_RICH[1] in plain:
            self.rich.line(text, style)
        else:
            self.stream.write(plain + "\n")


def as_lines(target: "Union[Lines, Console]") -> Lines:
    """The renderers take a Lines, or a rich Console (drawn as it is configured)."""
    if isinstance(target, (RichLines, PlainLines)):
        return target
    return RichLines(target)  # type: ignore[arg-type]
