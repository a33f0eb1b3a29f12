"""A traceback kept inside a string, read as the lines it holds.

Structured loggers, result files and notebooks often keep a traceback as one string value:
its line breaks written as the two characters `\\n` and its quotes as `\\"` (a JSON log
record's `"exc_info": "Traceback (most recent call last):\\n  File \\"train.py\\", ..."`, a
list of results, a repr). One physical line then holds a whole traceback that no reader of
lines can see. Whatever tool wrote it, the form is the same: `escaped_lines` finds such a
string by the traceback it holds (its header or a frame after an escaped line break), undoes
its escapes, and returns the line's pieces: the text before the string, each line of the
string, and what follows the string when it says anything. The string's own delimiter is
known when its quotes are escaped (`\\"`: a JSON string, ended by the first quote that is
not); otherwise the escaped text runs to the end of the line.

`unescape_frame` undoes the escaped quotes of a traceback's frame line that a string kept with
its line breaks printed as real ones (a notebook's error record copied as JSON:
`  File \\"/path/x.py\\", line 3, in f`), so that the frame reads as one.

Both are plain string work, bounded by the line: the caller (the reader) tries them only on
a line that holds an escaped line break or quote.
"""

from __future__ import annotations

import re
from typing import Optional

# a traceback inside a string: its header before an escaped line break, or an escaped line
# break before a frame whose quotes are escaped
ESCAPED_TB = re.compile(r'(?:Original )?Traceback \(most recent call last\):\\n|\\n\s*File \\"')
ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.)', re.S)
SIMPLE = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "/": "/", "b": "", "f": ""}
FRAME_ESCAPED = re.compile(r'\s*File \\"[^"]*\\", line \d+')
MAX_PIECES = 10_000  # lines one string may give (bounded whatever the input)
MAX_QUOTES = 4096  # escaped quotes passed over while looking for a string's own


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        e = m.group(1)
        if len(e) == 5:  # uXXXX; half of a UTF-16 pair alone becomes U+FFFD
            c = int(e[1:], 16)
            return "\ufffd" if 0xD800 <= c <= 0xDFFF else chr(c)
        return SIMPLE.get(e, "\\" + e)

    return ESCAPE.sub(one, text)


def _unescaped_quote(text: str, start: int, step: int) -> int:
    """The index of the first `"` from `start` going by `step` (1 or -1) that no odd run of
    backslashes escapes, or -1 (also past MAX_QUOTES escaped ones: a line of escaped quotes
    costs a bounded time; the string is then read from the line's start, or to its end)."""
    i = start
    for _ in range(MAX_QUOTES):
        if not 0 <= i < len(text):
            return -1
        i = text.find('"', i) if step > 0 else text.rfind('"', 0, i + 1)
        if i < 0:
            return -1
        k = i
        while k > 0 and text[k - 1] == "\\":
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i += step
    return -1


def escaped_lines(raw: str) -> Optional[list[str]]:
    """The pieces of a line that holds a traceback inside a string (see the module's
    docstring), or None when it holds none."""
    m = ESCAPED_TB.search(raw)
    if m is None:
        return None
    p = m.start()
    if '\\"' in raw:  # a string whose quotes are escaped: its own quotes delimit it
        q = _unescaped_quote(raw, p - 1, -1) if p else -1
        start, hend = (q + 1, q) if q >= 0 else (0, 0)  # (none: the string began on a line before)
        end = _unescaped_quote(raw, m.end(), 1)
    else:
        start = hend = p
        end = -1
    body = raw[start : end if end >= 0 else len(raw)]
    head = raw[:hend]
    pieces = [head] if head.strip() else []
    lines = _unescape(body).split("\n")
    if len(lines) > MAX_PIECES:
        lines = lines[: MAX_PIECES - 1] + ["\n".join(lines[MAX_PIECES - 1 :])]
    pieces.extend(lines)
    tail = raw[end + 1 :] if end >= 0 else ""
    if any(c.isalnum() for c in tail):
        pieces.append(tail)
    return pieces


def unescape_frame(raw: str) -> Optional[str]:
    """A frame line whose quotes are escaped, with them undone; None for any other line."""
    if FRAME_ESCAPED.match(raw) is None:
        return None
    return raw.replace('\\"', '"')
