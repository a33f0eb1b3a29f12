"""Undo what pasting does to a log, before its prefixes are parsed.

A log that reached us through an issue thread, a chat or a terminal is rarely the file the
job wrote. The damage comes in a few general forms, each undone here line by line:

- Markdown decoration: quote marks (`> `, nested `> > `, a bare `>`) before the lines of a
  log quoted in a reply, code fences (```` ``` ````, ```` ```text ````, Markdown's other fence
  `~~~`, a fence glued to the first or last log line), `**` bold markers around a line, a heading made of a bold line
  (`### **RuntimeError: ...**`), the single backtick of inline code opened on one line and
  closed on another (an unmatched mark at a line's start or end);
- a line-number column added by a log viewer, `[12345] ` or `  123 | `: taken off only when
  several lines in a row carry it and the numbers advance with the lines (a constant offset
  from the physical line number), so a program's own `[3] ...` output is left alone;
- line ends: `\\r\\r\\n`, and a stream whose lines end in a lone `\\r`;
- ANSI colour and cursor codes, also colour codes whose escape byte was lost (`[36m` at
  the start of a line); Ray's de-duplication note at the end of a line (`[repeated 2x
  across cluster]`);
- tracebacks whose leading indentation was stripped: a `File "...", line N, in f` line at
  column 0 gets its indentation back, and so does the source line that follows it;
- hard wrapping at a fixed column: the width is learnt from the input (several lines of the
  same length, none longer), then a line of exactly that width is joined with the next one
  unless the next one starts a record of its own (a prefix, a timestamp, a traceback line);
- soft wrapping at a word boundary (a mail client, an issue tracker's exporter, a program's own
  message formatter fill lines up to a column and break after a space, which stays at the
  line's end): a line of a wrap's length ending in one space after a word, followed by one
  that goes on with the sentence in lower case and cannot stand on its own, is one line.

A log collector's time in front of every line (a container runtime's, a CI runner's, a log
shipper's: `prefix.py` says what one looks like) was put there after the program wrote the
line, so the line-number column and wrap stages look behind it: a viewer's column after
it is taken off (`2026-11-27T13:40:01Z [12] text`), and a line the program wrapped is
rejoined though each of its pieces got a time of its own. The joined line keeps its first
piece's time, in front, for the prefix parser to read.

It streams: lines are held back only while a decision needs the next few (a line-number
column being confirmed, a line that may have been wrapped), never more than `MAX_HOLD`
lines. Clean input takes a fast path that costs a length comparison and two cheap checks
per line. Nothing is ever dropped except lines that are decoration only (a bare fence, an
empty `**` line); a joined line keeps the number of its first piece and is handed to the
rules whatever the prefilter found in its pieces. A bare fence line's
number is recorded as a break between pasted excerpts (`repair(..., breaks)`), and so is a
fence glued to a log line (before that line, or after it when glued to its end): the reader
ends whatever it was assembling there, and liveness reads each excerpt's progress on its own.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional

from slurmdoc.ingest.prefix import _MONTH_FIRST, _collected
from slurmdoc.ingest.stamps import ISO_TS

Line = tuple[int, str, bool]  # (line number, text, prefilter hit) as the readers yield them

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# colour codes that lost their escape byte on the way (`[36m(Worker pid=1)[0m text`): taken
# off only from a line that starts with one, where they cannot be the program's own words
LOST_ESC_HEAD = re.compile(r"(?:\[[0-9]{1,3}(?:;[0-9]{1,3}){0,4}m(?!\]))+(?=\S)")
LOST_ESC = re.compile(r"\[[0-9]{1,3}(?:;[0-9]{1,3}){0,4}m(?!\])")

QUOTE = re.compile(r"(?:>(?: |$))+")  # Markdown quote marks: `>` then a space or the line's end
# Markdown's two fences: what every fence line the reader records holds (the fast reader
# searches for them)
FENCE_WORDS = ("```", "~~~")
FENCE = re.compile(r"\s*(?:```|~~~)[\w+.\-]*\s*$")  # a fence line, with or without a language
# a fence glued to the start of a log line (a row of tildes is a program's own rule, no fence)
FENCE_HEAD = {"```": re.compile(r"```(?=\S)"), "~~~": re.compile(r"~~~(?=[^\s~])")}
RAY_REPEAT = re.compile(r" ?\[repeated \d+x across cluster\]$")
HEADING_BOLD = re.compile(r"#{1,6} \*\*(?=\S)")
# a line in bold (`**text**`, `***text***`), or a bare `**`; as in Markdown, a run of asterisks
# followed by a space opens no emphasis: `*** SIGSEGV received at time=... ***` is a program's
# own banner, kept whole
BOLD_LINE = re.compile(r"\s*(\*{2,3})(?:(?![\s*])(.*?)(?<![\s*])\1)?:?\s*$")
# a program's `***` banner (glog's and abseil's failure-signal handlers, glog's check
# failure) as Markdown editors save it, with one or more of its asterisks escaped (`**\*`,
# `\*\*\*`); the banner's closing `***` likewise at the line's end
ESCAPED_BANNER = re.compile(r"(\s*)(?:\\?\*){3}(?=\s)")
ESCAPED_BANNER_END = re.compile(r"(?<=\s)(?:\\?\*){3}\s*$")
COLUMN = re.compile(r"(?:\[(\d{1,9})\](?: |$)| *(\d{1,9}) \|(?: |$))")
COLUMN_CONFIRM = 4  # lines in a row that must carry a consistent column before it is removed

FRAME = re.compile(r'File "[^"]*", line \d+')  # an unindented traceback frame
FRAME_ANY = re.compile(r'\s*File "[^"]*", line \d+')
CARETS = re.compile(r"[\^~ ]*\^[\^~ ]*$")
# an exception line: a (dotted) class name, then `:` or the end of the line
EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::(?: .*)?)?$")
TB_MARKS = re.compile(r"\s*(?:Traceback \(most recent call last\)|During handling of the above|The above exception was)")

# what starts a record of its own, so cannot be the wrapped rest of the line before it
RECORD_START = re.compile(
    r"\s*(?:File \"|Traceback \(most|During handling|The above exception)"
    r"|\[(?:rank|default)\d|\[(?:rank: |RANK )\d"
    r"|\[?[IWEF]\d{3,4} \d\d:\d\d"  # glog
    r"|\[?\d{4}-\d\d-\d\d[T _]\d\d:\d\d"  # ISO, logging
    r"|(?:srun|slurmstepd|sbatch|salloc)\b"
    r"|\(\w[\w.:\-]* pid=\d+"  # Ray
    r"|\[[\w.\-]+:\d+\]:"  # accelerate
)
LABEL = re.compile(r" {0,8}\d{1,6}: ")  # srun --label: a record start only where labels are in use
BOX_EDGES = frozenset("│┃║╮╯╰╭┐┘└┌|")  # a drawn box's borders
MIN_WIDTH = 60  # narrower "wrapping" is a program's own fixed-width output
MAX_WIDTH = 4096
MAX_BREAKS = 10_000  # fence lines kept per input (bounded whatever the input)
WIDTH_CONFIRM = 3  # wrapped pairs at the greatest length before it is taken as a wrap width
# the columns terminals, editors and web forms wrap at: one line of such a length, the
# longest so far, split inside a word, is evidence enough of a wrap
COMMON_WIDTHS = frozenset({80, 100, 120, 132, 160, 200, 240, 250, 256})
WIDTH_WINDOW = 16  # lines a possible first wrap waits for that confirmation
WIDTH_MISSES = 8  # pairs at a length that were two records (and 4x the wraps): no wrap width
SAME_START = 16  # a next line that begins like this one (numbers aside) is the next record of its kind
MAX_HOLD = 64  # lines held back at most, whatever the input
# a line filled up to a column between these and broken after a space (a soft wrap)
SOFT_MIN, SOFT_MAX = MIN_WIDTH, 100


class Repair:
    """The paste-damage state of one input (one stream of physical lines)."""

    def __init__(self, breaks: Optional[list[int]] = None) -> None:
        self.breaks = breaks  # where a fence ends one pasted excerpt (SourceInfo.excerpt_breaks)
        self.cr_lines: Optional[bool] = None  # does this input end its lines with a lone \r?
        self.renumber = 0  # lines added by splitting \r-ended lines (later numbers shift)
        # line-number column
        self.col_offset: Optional[int] = None  # confirmed: column number - line number
        self.col_pending: list[tuple[int, str, bool, int]] = []  # (n, raw, hit, offset) being confirmed
        # numberings that counted from 0 (column number - line number): a viewer numbers its
        # lines from 1, so lines counting on from a 0 are a program's numbers (MPICH's rank
        # tags when ranks print one line each in rank order), never a column
        self.not_col: set[int] = set()
        # lost indentation
        self.after_frame = False  # the previous line was an unindented frame line
        self.after_code = False  # ... or the source line under one
        # wrapping
        self.maxlen = MIN_WIDTH - 1  # the longest line seen (at least MIN_WIDTH - 1)
        self.pairs = 0  # pairs (line of that length, next line) that read as one wrapped line
        self.shapes: set[str] = set()  # the shapes of line (`_shape`) those pairs began with
        self.width: Optional[int] = None  # the confirmed wrap width
        self.held: list[Line] = []  # a line of the wrap width and its continuations so far
        self.waiting: list[Line] = []  # a possible first wrap and the lines after it, awaiting the width
        self.wait_len = 0
        self.prev: Line = (0, "", False)  # the line before the current one
        self.head = ""  # the first piece of the last record placed (never a wrapped rest)
        self.fast_below = MIN_WIDTH - 1  # shorter lines cannot start or continue a wrap
        self.rejected = -1  # a width whose lines of that length all proved to be records
        self.misses = 0  # ... and that read as two records
        self.miss_shapes: set[str] = set()  # the shapes of line those record pairs began with
        self.cuts = 0  # wrapped pairs whose cut fell inside a word
        self.busy = False  # some repair is under way: every line takes the slow path
        self.labels = 0  # the lines around the current one carry srun labels this long (0: none)
        self.quoted = False  # the last line carried Markdown quote marks
        self.tick_open = -1  # the line that left a backtick open inside its words
        self.stamps: dict[int, str] = {}  # line number -> the collector's time taken off it, until it is handed on
        self.soft: Optional[Line] = None  # a line that ends where a soft wrap breaks, held for the next one

    def _settle(self) -> None:
        """After a slow-path line: may the next line take the fast path?"""
        self.busy = bool(self.col_pending or self.col_offset is not None or self.after_frame or self.after_code or self.held or self.waiting or self.cr_lines or self.quoted or self.soft)

    # ---- stage 1: line ends, colour, Markdown -------------------------------------------
    def feed(self, n: int, raw: str, hit: bool) -> list[Line]:
        """The lines `raw` completes (each stage appends to one list: no generator per stage
        and line)."""
        out: list[Line] = []
        self._feed(n, raw, hit, out)
        self._settle()
        return out

    def _feed(self, n: int, raw: str, hit: bool, out: list[Line]) -> None:
        if "\r" in raw:
            raw = raw.rstrip("\r")
            if "\r" in raw:
                if self.cr_lines is None:
                    self.cr_lines = _cr_ended(raw)
                if self.cr_lines:
                    pieces = raw.split("\r")
                    base = n + self.renumber
                    self.renumber += len(pieces) - 1
                    for i, piece in enumerate(pieces):
                        self._clean(base + i, piece, hit, out)
                    return
        if self.cr_lines is None:
            self.cr_lines = False
        self._clean(n + self.renumber, raw, hit, out)

    def _clean(self, n: int, raw: str, hit: bool, out: list[Line]) -> None:
        if "\x1b" in raw:
            raw = ANSI.sub("", raw)
        elif raw[:1] == "[" and _bracket_code(raw) and LOST_ESC_HEAD.match(raw):
            raw = LOST_ESC.sub("", raw)  # colour codes whose escape byte a paste dropped
        if raw.endswith("cluster]"):
            raw = RAY_REPEAT.sub("", raw)  # Ray's de-duplication note, not the line's words
        m = QUOTE.match(raw) if raw[:1] == ">" else None
        if (m is not None) != self.quoted:
            # where a quote starts or ends, a record starts: no line wrapped across it
            self.quoted = m is not None
            out.extend(self.flush())
        if m is not None:
            raw = raw[m.end():]  # a quoted reply's marks (`>>>`, `>text` are no quote)
        tick = "`" in raw
        if tick or "~~~" in raw:
            if FENCE.match(raw):
                self._break(n)
                return  # decoration only
            # one fence glued to a log line breaks there; a line holding both fences of a
            # pair (`...```42````, inline code) opens and closes nothing
            for word in FENCE_WORDS:
                if word not in raw:
                    continue
                mark = word[0]
                lone = raw.count(word) == 1
                if mark == "~" and not lone:
                    continue  # a program's own tildes (a banner between two, a row of them)
                if raw.startswith(word) and (m := FENCE_HEAD[word].match(raw)) is not None:
                    raw = raw[m.end():]
                    if lone and raw[:1] != mark:
                        self._break(n - 1)  # a fence glued before this line: it opens here
                if raw.endswith(word) and (mark == "`" or raw[-4:-3] != mark):
                    raw = raw[:-3]
                    if lone and raw[-1:] != mark:
                        self._break(n)  # ... glued after it: it closes after this line
        if tick:
            if raw.count("`") % 2:
                # a log pasted as inline code: the mark that opens or closes it, unmatched on
                # this line, is the paste's; a lone mark is decoration only. A mark at the
                # start that closes one the line before left open inside its words
                # (`Assertion `t >= 0` cut by a hard wrap before its closing mark) is the
                # program's own
                closes = self.tick_open == n - 1 and raw.startswith("`")
                if not raw.strip(" `") and not closes:
                    return
                if raw.endswith("`") and not raw.endswith("``") and not closes:
                    raw = raw[:-1]
                elif raw.startswith("`") and not raw.startswith("``") and not closes:
                    raw = raw[1:]
                elif not closes and not raw.startswith("`"):
                    self.tick_open = n  # one left open inside the words: the next line may close it
        if raw[:1] == "#" and (m := HEADING_BOLD.match(raw)) is not None:
            # a Markdown heading made of a log line (`### **Error: ...**`)
            raw = raw[m.end():]
            if raw.endswith("**"):
                raw = raw[:-2]
        if raw.lstrip().startswith(("**\\*", "\\*")) and (m := ESCAPED_BANNER.match(raw)) is not None and "\\" in m.group(0):
            raw = m.group(1) + "***" + raw[m.end():]
            if "\\" in raw[-6:]:
                raw = ESCAPED_BANNER_END.sub("***", raw)
        if raw.lstrip().startswith("**"):
            m = BOLD_LINE.match(raw)
            if m is not None:
                raw = m.group(2) or ""
                if not raw.strip():
                    return
        if raw[:1] in _STAMP_FIRST and (end := _collector_end(raw)):
            # a collector's time: the later stages read the program's line behind it (as the
            # fast path in `repair` does)
            if len(self.stamps) >= 4 * MAX_HOLD:
                self.stamps.clear()  # (bounded whatever happens; each is taken when its line is handed on)
            self.stamps[n] = raw[:end]
            raw = raw[end:]
        self._column(n, raw, hit, out)

    def _break(self, after: int) -> None:
        """A fence between line `after` and the next: it ends one pasted excerpt and starts
        another (SourceInfo.excerpt_breaks; a bare fence line's own number, which no line keeps).
        Every fence counts, two at one place too: fences open and close excerpts in turn."""
        b = self.breaks
        if b is not None and len(b) < MAX_BREAKS:
            b.append(after)

    # ---- stage 2: a line-number column --------------------------------------------------
    def _column(self, n: int, raw: str, hit: bool, out: list[Line]) -> None:
        c = raw[:1]
        m = COLUMN.match(raw) if c in "[ 0123456789" and (c != "[" or _bracket_code(raw)) else None
        if m is None:
            if self.col_pending:
                self._release_column(out)
            self._indent(n, raw, hit, out)
            return
        number = int(m.group(1) or m.group(2))
        offset = number - n
        if number == 0 or offset in self.not_col:
            if number == 0 and len(self.not_col) < 64:
                self.not_col.add(offset)
            if self.col_offset == offset:
                self.col_offset = None
            if self.col_pending:
                self._release_column(out)
            self._indent(n, raw, hit, out)
            return
        if self.col_offset is not None:
            if offset == self.col_offset:
                self._indent(n, raw[m.end():], hit, out)
                return
            self.col_offset = None  # a different numbering: confirm it afresh
        if self.col_pending and self.col_pending[-1][3] != offset:
            self._release_column(out)
        self.col_pending.append((n, raw, hit, offset))
        if len(self.col_pending) >= COLUMN_CONFIRM:
            self.col_offset = offset
            pending, self.col_pending = self.col_pending, []
            for pn, praw, phit, _ in pending:
                self._indent(pn, COLUMN.sub("", praw, 1), phit, out)

    def _release_column(self, out: list[Line]) -> None:
        pending, self.col_pending = self.col_pending, []
        for pn, praw, phit, _ in pending:
            self._indent(pn, praw, phit, out)

    # ---- stage 3: lost indentation of traceback frames ----------------------------------
    def _indent(self, n: int, raw: str, hit: bool, out: list[Line]) -> None:
        if raw.startswith('File "') and FRAME.match(raw):
            raw = "  " + raw
            self.after_frame, self.after_code = True, False
        elif self.after_frame:
            self.after_frame = False
            if raw and raw[0] not in " \t" and not (EXCEPTION.match(raw) or TB_MARKS.match(raw) or RECORD_START.match(raw)):
                raw = "    " + raw  # the frame's source line
                self.after_code = True
        elif self.after_code:
            self.after_code = False
            if raw and CARETS.match(raw):
                raw = "    " + raw  # the position markers under it (Python 3.11+)
        self._wrap(n, raw, hit, out)

    # ---- stage 4: hard wrapping ---------------------------------------------------------
    # A width is learnt from pairs of lines: a line of the greatest length so far and the
    # line after it. A pair is a wrap when the second line cannot stand on its own (no
    # prefix, no timestamp, no traceback line, not the next record of the same kind). Such
    # pairs beginning with lines of WIDTH_CONFIRM different shapes, more shapes than the pairs
    # that were two records began with, make the length a wrap width (a template that prints
    # lines of one length, each followed by a short line, is no wrap; one that prints lines
    # of one length many times is one record's shape, however often it recurs); one pair is
    # enough at a common terminal width when the cut falls inside a word, and at any width
    # when the two lines make one traceback frame line whole.
    # Many record pairs and no wraps make the length a program's fixed-format line instead,
    # and lines of that length take the fast path again.
    def _wrap(self, n: int, raw: str, hit: bool, out: list[Line]) -> None:
        ln = (n, raw, hit)
        size = len(raw)
        if self.waiting and size > self.wait_len:
            self._release(out)  # a longer line: that was no wrap; this one may be
        if self.waiting:
            before = self.waiting[-2][1] if len(self.waiting) > 1 else self.prev[1]
            line = self.waiting[-1][1]
            self.waiting.append(ln)
            self._measure(size)
            if len(line) == self.wait_len:
                self._judge(before, line, raw)
            if self.width is None and self.rejected != self.wait_len and len(self.waiting) < WIDTH_WINDOW:
                return
            if self.width is None and size == self.wait_len and self.rejected != size:
                # the window is full, but this line may be a wrap too: it waits on
                self.waiting.pop()
                self._release(out)
                self.waiting = [ln]
                return
            self._release(out)
            return
        self._measure(size)
        if self.width is None and not self.held and size == self.maxlen and size >= MIN_WIDTH and size != self.rejected:
            # the longest line so far may be the first wrap: wait a few lines for the width
            self.waiting = [ln]
            self.wait_len = size
            return
        self._place(ln, out)

    def _judge(self, before: str, line: str, nxt: str) -> None:
        """Count the pair (`line`, `nxt`) for or against `len(line)` as a wrap width."""
        self.labels = _label_end(line) or _label_end(before)
        if self._continues(line, line, nxt):
            self.pairs += 1
            self.shapes.add(_shape(line))
            inside = _inside_word(line, nxt)
            self.cuts += inside
            # a traceback's frame line that only the two lines make whole was cut at the
            # width, whatever the width
            frame = not FRAME_ANY.match(line) and FRAME_ANY.match(line + nxt) is not None
            common = (inside and len(line) in COMMON_WIDTHS) or frame
            # a wrap cuts whatever line reaches the width; lines of one shape (one template)
            # that share a length are that template's length, however often they recur: the
            # evidence on either side is counted in shapes of line
            shapes, against = len(self.shapes), len(self.miss_shapes)
            # many wrapped pairs of two shapes or more are as good as three shapes
            many = self.pairs > WIDTH_CONFIRM and shapes >= 2
            if ((shapes >= WIDTH_CONFIRM or many) and shapes > against) or (common and shapes >= against):
                self.width = len(line)
        else:
            self._missed(line)

    def _missed(self, line: str) -> None:
        """A line of this length was a whole record. Many such and few wraps: the length is
        a fixed-format line of the program, not a wrap width (a wrap that cut a word in two
        raises the bar: a template of that length may share a log with a wrap width)."""
        size = len(line)
        self.misses += 1
        self.miss_shapes.add(_shape(line))
        if self.misses >= WIDTH_MISSES * (1 + 8 * self.cuts) and self.misses >= 4 * self.pairs:
            self.rejected = size
            self.width = None
            if self.maxlen == size:
                self.fast_below = size + 1

    def _release(self, out: list[Line]) -> None:
        lines, self.waiting = self.waiting, []
        for ln in lines:
            self._place(ln, out)

    def _measure(self, size: int) -> None:
        if size > self.maxlen:
            self.width = None  # a longer line: no wrap width (or not that one)
            self.maxlen = size
            self.fast_below = size
            self.pairs = self.misses = self.cuts = 0
            self.shapes.clear()
            self.miss_shapes.clear()

    def _place(self, ln: Line, out: list[Line]) -> None:
        """Join `ln` to the held wrapped line before it, or hold it if it may be wrapped."""
        n, raw, _ = ln
        if self.soft is not None:
            soft, self.soft = self.soft, None
            if n == soft[0] + 1 and not self.held and _soft_rest(raw, soft[1]) and self._continues(soft[1], soft[1], raw):
                ln = self._join([soft, ln])
                n, raw, _ = ln
            else:
                self._place_one(soft, out)
        if not self.held and _soft_end(raw) and len(raw) != self.width:
            # (a line of the hard wrap's width is a piece of it: the wrap's pieces are joined
            # whatever they end with, however many there are)
            self.soft = ln  # the next line says whether it was wrapped here
            return
        self._place_one(ln, out)

    def _place_one(self, ln: Line, out: list[Line]) -> None:
        n, raw, _ = ln
        if self.held:
            if n == self.prev[0] + 1 and self._continues(self.held[0][1], self.held[-1][1], raw):
                self.held.append(ln)
                self.prev = ln
                if len(self.held) == 2:
                    self.pairs += 1
                if len(raw) == self.width and len(self.held) < MAX_HOLD:
                    return  # wrapped again
                out.append(self._join(self.held))
                self.held = []
                return
            if len(self.held) == 1 and self.width is not None:
                self._missed(self.held[0][1])
            out.append(self._join(self.held))
            self.held = []
        if self.width is not None and len(raw) == self.width:
            # a label is learnt from records: a wrapped rest (`30121: Connection reset`)
            # can look like one
            self.labels = _label_end(raw) or _label_end(self.head)
            self.prev = ln
            self.head = raw
            self.held = [ln]
            return
        self.prev = ln
        self.head = raw
        out.append(self._join([ln]) if self.stamps else ln)

    def _continues(self, first: str, prev: str, nxt: str) -> bool:
        """Can `nxt` be the wrapped rest of `prev` (a line that began as `first`)?"""
        if not nxt.strip():
            return False
        if RECORD_START.match(nxt):
            return False  # a record of its own
        if not self.labels and _exception_line(nxt):
            return False  # an exception line is never swallowed (where every task line is
            # labelled, an unlabelled one can only be the rest of the line before)
        if self.labels and _label_end(nxt) == self.labels:
            return False  # srun pads every label to the width of the largest task id
        if _kind(nxt) == _kind(first):
            return False  # the next record of the same kind (same prefix, same wording)
        if nxt[:2].isspace() and FRAME_ANY.match(prev):
            return False  # a frame's indented source line
        if prev.rstrip()[-1:] in BOX_EDGES or nxt.lstrip()[:1] in BOX_EDGES:
            return False  # a drawn box (rich's tracebacks): its lines are padded to its width
        return True

    def _join(self, lines: list[Line]) -> Line:
        """The pieces of a wrapped line as one, a prefilter hit whatever its pieces were: the
        prefilter searched the physical lines, and a keyword the column cut in two is in none
        of them. The first piece's collector's time goes back in front; the rests' go."""
        stamps = self.stamps
        if len(lines) == 1:
            ln = lines[0]
            if stamps and (stamp := stamps.pop(ln[0], None)) is not None:
                return ln[0], stamp + ln[1], ln[2]
            return ln
        if stamps:
            for ln in lines[1:]:
                stamps.pop(ln[0], None)
            return lines[0][0], stamps.pop(lines[0][0], "") + "".join(ln[1] for ln in lines), True
        return lines[0][0], "".join(ln[1] for ln in lines), True

    def flush(self) -> list[Line]:
        out: list[Line] = []
        if self.col_pending:
            self._release_column(out)
        if self.waiting:
            self._release(out)
        if self.soft is not None:
            soft, self.soft = self.soft, None
            self._place_one(soft, out)
        if self.held:
            out.append(self._join(self.held))
            self.held = []
        return out


_DIGITS = re.compile(r"\d+")


def _kind(line: str) -> str:
    """A line's start with its numbers masked: `iteration 100 | ...` and `iteration 110 | ...`
    are records of one kind."""
    return _DIGITS.sub("0", line[: 2 * SAME_START])[:SAME_START]


def _shape(line: str) -> str:
    """A line's start and end with numbers masked: the lines one template prints (an
    iteration line) share both; lines a wrap cut share at most a prefix (a Ray actor's
    `(TrainController pid=1) `), not where the cut fell."""
    return _DIGITS.sub("0", line[:SAME_START]) + "|" + _DIGITS.sub("0", line[-SAME_START:])


LOG_LEVELS = frozenset({"DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL", "PANIC", "TRACE"})


def _exception_line(line: str) -> bool:
    """Is `line` an exception line (`ValueError: ...`, `torch.OutOfMemoryError`, `KeyboardInterrupt`)
    or a log level's record (`ERROR: ...`)? A class is named in CamelCase or by its dotted
    path; a name all in capitals (`NCCL_BLOCKING_WAIT: 0`, the `S` a column cut off
    `SIGBUS`) is a setting's or a word's rest, and one with an underscore inside
    (`NLLCriterion_updateOutput_kernel: ...`, the rest of a CUDA kernel's name) a function's,
    not an exception."""
    if EXCEPTION.match(line) is None:
        return False
    name = line.partition(":")[0].rstrip()
    last = name.rpartition(".")[2]
    return "." in name or last in LOG_LEVELS or (any(c.islower() for c in last) and "_" not in last.strip("_"))


def _label_end(line: str) -> int:
    """The length of the line's srun label (`  7: `), 0 if it has none."""
    m = LABEL.match(line)
    return m.end() if m is not None else 0


# characters a program opens a line of its own with (`> building ...`, `# note`, `* item`,
# `=== banner`, `| table`, `<tag>`, `+ cmd`, `$ cmd`, `@ ...`, `~`); a word cut at a
# fixed column is not continued by one of them
LINE_MARKS = frozenset(">#*=|<+$@~")


def _inside_word(line: str, nxt: str) -> bool:
    """Was the line cut where a fixed column falls, not where its writer ended it: after a
    word character or a space, with the rest starting with no space and not with a mark
    that opens a line of its own? A lower-case letter followed by a capital is where one
    word ends and a sentence or a message begins (`...opened libcupti locally` then
    `Segmentation fault`), not a word a column cut in two. A path cut after one of its
    separators (`.../torch/lib/` then `THC/generic/THCStorage.c line=82`) is a word cut too:
    a program seldom ends a line on a separator inside a path."""
    return (
        bool(nxt)
        and not nxt[0].isspace()
        and nxt[0] not in LINE_MARKS
        and (line[-1:].isspace() or line[-1:].isalnum() or line[-1:] == "_" or (line[-1:] == "/" and nxt[0].isalnum() and "/" in line[-64:-1]))
        and not (line[-1:].islower() and nxt[0].isupper())
    )


def _soft_end(line: str) -> bool:
    """Does `line` end where a soft wrap breaks: filled to a wrap's length, then one space
    after a word (a writer's own line seldom keeps a space at its end; two or more are
    padding)?"""
    return SOFT_MIN <= len(line) <= SOFT_MAX and line[-1:] == " " and line[-2:-1].isalnum() and not line[:1].isspace()


# a record that opens in lower case with its printer's label: a program's or a shell's name
# and a colon (`bash: line 1: ...`, `python3: can't open file`), a C function's (glibc's
# `free(): invalid pointer`, the C++ runtime's `what():`), NCCL's `host:pid:tid`, an MPI
# launcher's or the C++ runtime's own words
SOFT_LABEL = re.compile(r"[\w.\-]+(?:\(\))?:(?: |$)|[\w.\-]+:\d+:\d+ |(?:mpirun|mpiexec|orterun|prterun|terminate called)\b")


# words a sentence cannot end on: a line broken after one goes on on the next
OPEN_ENDED = frozenset("a an the of with to for on in at by from and or as is was than into via".split())


def _soft_rest(line: str, before: str) -> bool:
    """Can `line` be the rest of a sentence a soft wrap broke after `before`: it goes on in
    lower case, right at its start (a record, a message or a sentence of its own opens
    otherwise), and does not open with a printer's label (a record of its own), unless
    `before` ends on a word no sentence ends on (`... terminated with ` / `exception: ...`)?"""
    if not (line[:1].islower() and line[:1].isalpha()):
        return False
    return SOFT_LABEL.match(line) is None or before.rpartition(" ")[0].rpartition(" ")[2] in OPEN_ENDED


def _cr_ended(raw: str) -> bool:
    """Does a physical line holding `\\r`s show an input whose lines end in a lone `\\r`?

    Progress bars redraw themselves with `\\r` (`45%|####  | 45/100 [...]`): most pieces of
    such a line are redraws. An input with `\\r` line ends has several pieces, most of them
    not redraws (its own progress bars, if any, are among many other lines)."""
    pieces = raw.split("\r")
    if len(pieces) < 3:
        return False
    bars = sum(1 for p in pieces if "%|" in p or "it/s" in p or "s/it" in p)
    return len(pieces) - bars >= 3 and bars < len(pieces) - bars


def repair(lines: Iterable[Line], breaks: Optional[list[int]] = None) -> Iterator[Line]:
    """The lines of one input with paste damage undone (see the module's docstring); the
    numbers of its fence lines, which end one pasted excerpt and start another, are added to
    `breaks` (at most MAX_BREAKS)."""
    r = Repair(breaks)
    first = _SUSPECT_FIRST
    stamp_first = _STAMP_FIRST
    for item in lines:
        raw = item[1]
        # the fast path: plain string tests only (a regex call per line would cost more than
        # parsing the line's prefix); a line behind a collector's time is judged as the line
        body = raw[end:] if raw[:1] in stamp_first and ("-" in raw[4:6] or raw[3:4] == " ") and (end := _collector_end(raw)) else raw
        if len(body) < r.fast_below and not r.busy and "\x1b" not in raw and "\r" not in raw and "`" not in raw and "~~~" not in raw and not raw.endswith("cluster]") and raw[-1:] != " ":
            if body[:1] not in first or not _suspect_start(body):
                r.prev = item if body is raw else (item[0], body, item[2])
                yield item
                continue
        yield from r.feed(*item)
    yield from r.flush()


_SUSPECT_FIRST = frozenset('*#F[ 0123456789>\\')
# what a collector's time starts with: a year's digit, `[`, a month's initial (`Nov 27 ...`)
_STAMP_FIRST = frozenset("0123456789[JFMASOND")
_ANY_YEAR = 2000  # where a collector's time ends does not depend on the year supplied


def _collector_end(raw: str) -> int:
    """Where a log collector's time in front of `raw` ends (0: none): the prefix parser's
    reading of it, so the two agree on every line; and a time in brackets with a viewer's
    line-number column after it, which the parser would read as a logging formatter's (a
    viewer numbers whole lines, so a time before its column was put there after the program
    wrote the line). Plain string tests first: most lines start with no time, and a logging
    formatter's (`2025-03-01 12:00:00,123 - `) is told from a collector's by what follows it."""
    c = raw[:1]
    if c.isdigit():
        if raw[4:5] != "-":
            return 0
        i = raw.find(" ", 11, 48)  # where the time ends (`T` or a space at 10 joins date and time)
        if i < 0 or raw[i + 1 : i + 3] in ("- ", "| "):
            return 0  # (the parser's test too, without its regex)
    elif c == "[":
        if raw[5:6] != "-" or not raw[1:2].isdigit():
            return 0
        i = raw.find("] ", 11, 48)
        if i < 0 or raw[i + 2 : i + 3] not in _LABEL_OR_COLUMN:
            return 0  # (an srun label or a column after it, or the time is the program's)
    elif c not in _MONTH_FIRST or raw[3:4] != " ":
        return 0
    end = _collected(raw, _ANY_YEAR)[0]
    if not end and c == "[" and (m := ISO_TS.match(raw)) is not None and raw[m.end() - 1 : m.end() + 1] == "] " and COLUMN.match(raw, m.end() + 1) is not None:
        return m.end() + 1
    return end


_LABEL_OR_COLUMN = frozenset(" 0123456789[")
_CODE_ENDS = frozenset("];m")


def _bracket_code(raw: str) -> bool:
    """May `raw`, which starts with `[`, start with a line-number column (`[123] `) or a colour
    code that lost its escape byte (`[36m`)? Both have digits after the `[` and then `]`, `;`
    or `m`: a bracketed time (`[2025-...`) has not. A plain string test before the regexes."""
    c = raw[1:11].lstrip("0123456789")[:1]
    return c in _CODE_ENDS or not c.isascii()  # (another script's digits: the regex decides)


def _suspect_start(raw: str) -> bool:
    """May this line start with decoration, a line-number column or an unindented frame?"""
    c = raw[0]
    if c == "[":
        return raw[1:2].isdigit() and _bracket_code(raw) and (COLUMN.match(raw) is not None or LOST_ESC_HEAD.match(raw) is not None)
    if c == "#":
        return HEADING_BOLD.match(raw) is not None
    if c == "F":
        return raw.startswith('File "')
    if c == "*":
        return raw.startswith("**")
    if c == "\\":
        return raw.startswith("\\*")
    if c == ">":
        return raw[1:2] in ("", " ")
    return " |" in raw[:12] and COLUMN.match(raw) is not None
