"""Times at the start of a log line: glog's `E0321 02:07:08.408271` (no year: the reader
supplies it), ISO-like `2025-03-01T13:10:00`, `2025-03-01 12:00:00,123` with or without
brackets and a zone, NeMo's `[NeMo I <ISO>`; a logging formatter's time and separator; the
year a year-less time belongs to. Each distinct time text is read once (the lines of one
second, of every rank, share it), in bounded tables.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Optional

GLOG_TS = re.compile(r"\[?([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\b")
ISO_TS = re.compile(
    r"\[?(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?\]?"
)
# a logging formatter's leading time and its separator (`2025-03-01 12:00:00,123 - `,
# `[2025-03-01T12:00:00Z] `, `2025-03-01 12:00:00 | `); the parser reads it off ISO_TS's match
# (`_logging_head`), which the tests hold to this definition
LOGGING_HEAD = re.compile(
    r"(?:\[\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\] "
    r"|\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? (?:- |\| ))"
)
LEADING_TS_BEFORE_RANK = re.compile(r"\[?\d{4}-\d\d-\d\d[T _][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]?\s*$")

_TS_START = frozenset("[0123456789IWEF")


def _frac(s: Optional[str]) -> int:
    if not s:
        return 0
    return int((s + "000000")[:6])


NEMO_TS = re.compile(r"\[NeMo [A-Z] ")


def parse_ts(text: str, year: int) -> Optional[datetime]:
    """A timestamp at the start of `text` (glog or ISO-like, NeMo's `[NeMo I <ISO>`), or None."""
    return _stamp(text, year)[0]


# a time's own text (with the year, for glog) -> its value: the lines of one second, of all
# ranks, share one time, which is read once; None for a time that is no date (bounded)
_ISO_SEEN: dict[str, Optional[datetime]] = {}
_GLOG_SEEN: dict[tuple[str, int], Optional[datetime]] = {}
MAX_STAMPS = 4096


def _stamp(text: str, year: int) -> tuple[Optional[datetime], int]:
    """parse_ts, and how the time is written at the start of `text` itself: the end of an
    ISO-like time (> 0), -1 for a glog time, 0 for none or one behind NeMo's tag."""
    if not text or text[0] not in _TS_START:
        return None, 0
    nemo = text.startswith("[NeMo ") and NEMO_TS.match(text) is not None
    if nemo:
        text = text[8:]
    m = ISO_TS.match(text)
    if m is not None:
        key = m.group()
        if key in _ISO_SEEN:
            return _ISO_SEEN[key], 0 if nemo else m.end()
        dt: Optional[datetime]
        try:
            dt = datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), _frac(m[7]))
        except ValueError:
            dt = None
        tz = m[8]
        if dt is not None and tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            hh, mm = int(tz[1:3]), int(tz[-2:])
            try:
                dt -= sign * timedelta(hours=hh, minutes=mm)
            except OverflowError:
                dt = None
        if len(_ISO_SEEN) >= MAX_STAMPS:
            _ISO_SEEN.clear()
        _ISO_SEEN[key] = dt
        return dt, 0 if nemo else m.end()
    m = GLOG_TS.match(text)
    if m is not None:
        gkey = (m.group(), year)
        if gkey in _GLOG_SEEN:
            return _GLOG_SEEN[gkey], 0 if nemo else -1
        try:
            dt = datetime(year, int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), _frac(m[7]))
        except ValueError:
            dt = None
        if len(_GLOG_SEEN) >= MAX_STAMPS:
            _GLOG_SEEN.clear()
        _GLOG_SEEN[gkey] = dt
        return dt, 0 if nemo else -1
    return None, 0


def _logging_head(text: str, end: int) -> int:
    """Where LOGGING_HEAD's match ends in `text` (0: no match), given where an ISO-like time at
    its start ends (`end`, from ISO_TS), without a second regex: the head is that time in
    brackets and a space, or unbracketed and then ` - ` or ` | ` (tests/test_prefix.py holds
    this to LOGGING_HEAD)."""
    if text[0] == "[":
        return end + 1 if text[end - 1] == "]" and text[end : end + 1] == " " else 0
    return end + 3 if text[end - 1] != "]" and text[end : end + 3] in (" - ", " | ") else 0


def _nearest_year(ts: datetime, ref: datetime) -> int:
    """The year that puts month-day-time `ts` nearest `ref` (one of ref's year and the two around it)."""
    best: Optional[datetime] = None
    for y in (ref.year - 1, ref.year, ref.year + 1):
        try:
            c = ts.replace(year=y)
        except ValueError:
            continue
        if best is None or abs(c - ref) < abs(best - ref):
            best = c
    return best.year if best is not None else ref.year


def _year_not_after(ts: datetime, until: datetime) -> int:
    """The latest year that does not put month-day-time `ts` after `until`."""
    for y in (until.year + 1, until.year, until.year - 1):
        try:
            if ts.replace(year=y) <= until:
                return y
        except ValueError:
            continue
    return until.year - 1
