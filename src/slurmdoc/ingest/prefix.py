"""Split a log line into who printed it (prefix) and what it says (text).

Prefixes handled (outer to inner, any combination):
  srun --label ``3: `` / `` 7: ``; a host ``node-3: `` or ``10.0.0.3: `` (pdsh, DeepSpeed);
  accelerate ``[host:5]:``; NeMo-style tags ``i.pretrain/0 ``; a leading timestamp;
  torchrun ``[rankN]:`` (global) and ``[defaultN]:`` (local); Lightning ``[rank: N]`` and
  ``[RANK N]`` / ``[Rank N]`` (global); Ray ``(Actor pid=1, ip=...)``, ``(pid=1)``,
  ``(raylet)`` (a process, not a rank); a wrapper's ``stderr: `` / ``stdout: `` tag;
  Determined ``[ts] id || ``; TorchX's ``role/replica [local]:`` (a replica read as a node).
Ranks inside messages (``[PG 0 Rank 1]``, NCCL's ``[3]`` device index, ``comm ... rank 11``)
are never taken: only the line's prefix decides.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Optional

from slurmdoc.ingest.stamps import GLOG_TS, ISO_TS, LEADING_TS_BEFORE_RANK, _logging_head, _nearest_year, _stamp, _year_not_after, parse_ts
from slurmdoc.models import LogLine, RankRef, SourceInfo

SRUN_LABEL = re.compile(r" {0,8}(\d{1,6}):(?: |$)")
RANK_CHAIN = re.compile(r"((?:\[(?:rank|default)\d{1,7}\]:)+) ?")
CHAIN_ITEM = re.compile(r"\[(rank|default)(\d{1,7})\]:")
# Lightning's `[rank: 0] ` and wrappers' `[RANK 1] `: global ranks
# (`[Rank N] Watchdog ...` at the start is a process group's message, not a prefix)
BRACKET_RANK = re.compile(r"\[(?:rank: |RANK |Rank )(\d{1,7})\](?! ?(?:Watchdog|ProcessGroupNCCL|NCCL)) ?")
ACCEL = re.compile(r"\[([A-Za-z0-9][\w.\-]*):(\d{1,5})\]: ?")
# a host name or IPv4 address used as a line prefix: must end in a digit (node-12, gpu003,
# 10.0.0.3) so that `RuntimeError: ...` or `c10d: ...` are not taken for hosts
HOST_NAME = r"(?:\d{1,3}\.){3}\d{1,3}|(?![\w.\-]*\.(?:py|log|out|err|txt|sh|yaml|json)\b)[A-Za-z][A-Za-z0-9\-]*\d(?:\.[A-Za-z0-9\-]+)*"
HOST = re.compile(rf"(?!slurmstepd)({HOST_NAME}): (?=\S)")
HOST_ONLY = re.compile(HOST_NAME)
# Ray: `(ActorName pid=N, ip=...)`, `(pid=N)`, `(raylet)`; a colour code's remnant may follow
RAY = re.compile(
    r"\((?:(\w[\w.:\-]*) )?pid=(\d+)(?:, ip=([\d.]+))?\)(?:\[[\d;]*m)? ?"
    r"|\((raylet|gcs_server|autoscaler|monitor|log_monitor|dashboard_agent|runtime_env_agent)(?:, ip=([\d.]+))?\)(?:\[[\d;]*m)? ?"
)
# an MPI launcher's output tag, naming the rank and the stream: Open MPI's `--tag-output`
# (`[1,3]<stderr>:`, the job and the rank; `[1,mpirank:3,algo-1]<stdout>:` where a platform
# adds the host), horovodrun's `[3]<stderr>:`
MPI_TAG = re.compile(r"\[(?:\d{1,9},)?(?:mpirank:)?(\d{1,7})(?:,[\w.\-]{1,64})?\]<(?:stdout|stderr)>:")
# MPICH's and Intel MPI's `-prepend-rank` (`-l`): `[3] ` (not a shell's `[1] <pid>`, and a
# log viewer's line-number column is taken off before: damage.py)
HYDRA_TAG = re.compile(r"\[(\d{1,7})\] ")
# a shell's job table after `[N]`: a job started (`[1] 51877`), a job's end (zsh's
# `[1]  + 51877 killed  python ...`), a job's state in bash's words, padded to a column (`[3]
# Killed   python ...`: a job neither current nor previous has a blank for its `+`/`-` mark);
# the blanks are bounded and the optional mark comes with those before it, so a long run of
# blanks is split one way only (`\s+[+-]?\s*` tried every split of it: quadratic in a line of
# `[1]` and blanks)
JOB_STATE = (r"(?:Running|Stopped(?: \([\w ]{1,24}\))?|Done(?:\(\d{1,3}\))?|Exit \d{1,3}|Killed|Terminated|Hangup|Interrupt|Quit"
             r"|Aborted|Segmentation fault|Bus error|Illegal instruction|Floating point exception|Broken pipe|Alarm clock"
             r"|User defined signal [12]|CPU time limit exceeded|File size limit exceeded|Trace/breakpoint trap)")
SHELL_JOB = re.compile(rf"\[\d{{1,7}}\](?:\s{{1,8}}[+-])?\s{{1,8}}(?:\d{{1,10}}(?:\s|$)|{JOB_STATE}(?= {{2,}}\S| *\(core dumped\)|\s*$))")
# kubectl's `--prefix` (`[pod/<pod>/<container>] `): one printer per pod and container
KUBE_TAG = re.compile(r"\[(pod/[\w.\-]{1,253}/[\w.\-]{1,63})\] ")
# SkyPilot's, one printer per node of the cluster: `(head, rank=0, pid=N) `,
# `(node-0, worker1, rank=1, pid=N, ip=...) ` (its rank is the node's, not a process rank)
SKY = re.compile(r"\(((?:[\w.\-]{1,64}, ){0,3}[\w.\-]{1,64}), rank=(\d{1,6}), pid=(\d+)(?:, ip=([\d.]{7,15}))?\) ?")
# TorchX's (`torchx run ... dist.ddp`): `<role>/<replica id> ` before each line of a replica,
# then torchrun's `[<local rank>]:` (its tee with no role name): `trainer/1 [0]:Traceback ...`.
# A replica is one node of the job, as an srun task id is under `srun torchrun`: the replica
# is read as the label, the bracket as the local rank (a global rank only once the ranks per
# replica are known: diagnosis.layout)
TORCHX = re.compile(r"([A-Za-z_][\w.\-]{0,63})/(\d{1,6}) \[(\d{1,5})\]:")
STD_TAG = re.compile(r"(std(?:err|out))(?::|\s*\|) ?")
DETERMINED = re.compile(r"\[?(\d{4}-\d\d-\d\dT[\d:.]+Z?)\]? ([0-9a-f]{6,12}) \|\| ")

# what follows `[` at a prefix's place, tried in this order: a bracketed rank, accelerate's
# `[host:N]:`, Determined's `[time] id || ` (the groups of each, in turn)
BRACKETED = re.compile(f"(?:{BRACKET_RANK.pattern})|(?:{ACCEL.pattern})|(?:{DETERMINED.pattern})")
_DET_TS = 1 + BRACKET_RANK.groups + ACCEL.groups  # Determined's first group in BRACKETED
_LABEL_START = frozenset(" 0123456789")  # what an srun label can start with

# what may stand before a [rankN]: prefix and still be a prefix: a launcher's tag such as
# NeMo's `i.pretrain/0` or `<name>.<host> [stderr]`
TAG_SHAPE = re.compile(r"[\w.\-/<>@]+(?: \[(?:stdout|stderr)\])?")
TB_HEADER_TEXT = "Traceback (most recent call last):"
# a tool's own tag in front of each line of the program's output (a job runner's
# `name/0 `, docker compose's `svc-1  | `): a first word and a gap, learnt from lines whose
# rest is a traceback's structure (header, frame, exception line), then taken off every line
# that starts with a tag of the same shape
LEARN_TAG = re.compile(r"([A-Za-z0-9][\w.\-/@]{0,63})( +\| ?(?=\s*\S)| +(?=\S))")
TAG_REST = re.compile(r'\s*(?:Traceback \(most recent call last\):|File "[^"]*", line \d+|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b)')
TAG_WORD = re.compile(r"[\w.\-/@]*[\d./@][\w.\-/@]*")  # a tag has a digit or a `.`, `/`, `@` in it
TAG_CONFIRM = 2  # lines of one tag shape with a traceback's structure after it
_TAG_DIGITS = re.compile(r"\d+")
GLUED_SCHEDULER = re.compile(r"(?<=[^\s:])(?:slurmstepd(?:-[\w.\-]+)?: error: |srun: error: )")
NOT_GLUED_TB = ("Original ", "Exception Group ", "traceback : ", "+ ")
# the end of a progress bar's time-and-rate field (tqdm's `[01:06<03:59,  3.06it/s]`,
# `[00:00<?, ?it/s]`, `[00:02, 1.20s/it, loss=0.3]`) with text right after it: a bar prints
# no newline, so the next message (the shell's, the C library's, a traceback) starts there
BAR_GLUED = re.compile(
    r"\[(?:\d+:)?\d\d:\d\d(?:<(?:(?:\d+:)?\d\d:\d\d|\?)(?:, [^\]\n]{0,160})?"  # elapsed<remaining[, rate, postfix]
    r"|, [^\]\n]{0,80}?(?:/s|s/it)\b[^\]\n]{0,80})\](?=\S)"  # elapsed, rate[, postfix] (no total known)
)
# Keras's bar (`165376/296960 [=====>.....] - ETA: 365s - loss: 2.1371`, Keras 3's
# `64/64 ━━━━━━━━━━ 3s 54ms/step - loss: 4.0454e-04`) ends in a value, not a bracket: what is
# glued on starts with a letter right after its last value (and its unit) or its step time
# (searched as two parts, the bar and then its end after it: one expression with a lazy run
# between them ran on to the end of the line from every bar-like piece, quadratic in a long
# line; a metric's name is at most 80 characters)
KERAS_BAR = re.compile(r"/\d+ (?:\[[=>.]*\]|\u2501+)")
KERAS_END = re.compile(
    # (the value taken whole, as an atomic group would, written as a lookahead and its
    # backreference: Python 3.10's re has no atomic groups)
    r"(?: - [\w ]{1,80}: (?=(?P<value>-?\d[\d.:]*(?:e[-+]?\d+)?(?:[mu]?s)?))(?P=value)| \d+[mu]?s/step)(?=[A-Za-z])"
)
# records cut out of one physical line at most: each cut searches the rest of the line again,
# so a line of thousands of glued pieces (1 MiB of bars glued to text) would take time
# quadratic in its length; past the bound the rest of the line stays one piece
MAX_GLUED_PIECES = 64
SCHEDULER_STARTS = ("srun: ", "slurmstepd", "sbatch: ", "salloc: ")
LAUNCHER_MARKS = (
    "torch/distributed/elastic/",
    "torch.distributed.elastic",
    "torch/distributed/run.py",
    "torch.distributed.run",
    "[launch.py:",
    "deepspeed/launcher/",
)
# every launcher mark holds one of these (tests/test_prefix.py checks it): a line without
# any of them in its head is no launcher's record, and one that starts with none of the
# scheduler's first letters is no scheduler's
LAUNCHER_WORDS = ("torch", "launch")
_SCHEDULER_FIRST = frozenset(s[0] for s in SCHEDULER_STARTS)


def _names_launcher(text: str) -> bool:
    for w in LAUNCHER_WORDS:  # (a loop, not any(): this runs for most parsed lines)
        if text.find(w, 0, 160) >= 0:
            return True
    return False


def _may_have_origin(text: str) -> bool:
    """Could classify_origin name an origin for `text` (its cheap tests, before the call)?"""
    return text[:1] in _SCHEDULER_FIRST or _names_launcher(text)


LOG_RECORD = re.compile(r"\[?[IWEF]\d{3,4} |\[|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):")


def classify_origin(text: str, logged: bool = False) -> Optional[str]:
    """'scheduler' for srun/slurmstepd lines, 'launcher' for torchrun/DeepSpeed launcher log
    records (not for an exception line that merely names a launcher module). `logged`: a
    logging formatter's time was taken off in front of `text`, so it is a log record whatever
    it starts with (`torch.distributed.elastic.multiprocessing.api: [ERROR] failed ...`)."""
    if text.startswith(SCHEDULER_STARTS):
        return "scheduler"
    if text and _names_launcher(text) and (logged or LOG_RECORD.match(text)):
        for mark in LAUNCHER_MARKS:
            if text.find(mark, 0, 160) >= 0:
                return "launcher"
    return None




def _dated_collector_end(raw: str, year: int) -> int:
    """Where a log collector's time in front of the line ends (0: none). A collector (a
    container runtime's or a CI runner's timestamps, a log shipper's) writes a full date and
    time and one blank before every line it passes on, whatever the line is: a rank's
    prefix, a traceback's frame with its indentation, a launcher's record. The line behind it
    is read as it would be without it. A logging formatter's head (the time, then ` - ` or
    ` | `; or the time in brackets, unless an srun label follows it) is not one: the parser
    reads it off the program's text as a log record's, as it always did."""
    if raw[4 + (raw[:1] == "[") : 5 + (raw[:1] == "[")] != "-":  # (cheap: most lines start otherwise)
        return 0
    when, end = _stamp(raw, year)
    if when is None or end <= 0 or raw[end : end + 1] != " ":
        return 0
    if raw[0] == "[":
        return end + 1 if SRUN_LABEL.match(raw, end + 1) is not None else 0
    if raw[end : end + 3] in (" - ", " | ") or DETERMINED.match(raw) is not None:  # (Determined's `time id || `)
        return 0
    return end + 1


# a collector's time with no year (moreutils' `ts`, syslog's and journald's short form:
# `Nov 27 13:40:01 `), and journald's `host ident[pid]: ` after it: one printer per process
SYSLOG_HEAD = re.compile(r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([ \d]\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? "
                         r"(?:([\w.\-]{1,64}) ([\w.\-/@]{1,64}\[\d{1,10}\]): )?")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_MONTH_FIRST = frozenset("JFMASOND")


def _collected(raw: str, year: int) -> tuple[int, Optional[re.Match]]:
    """Where a collector's time in front of the line ends (0: none), dated (`_dated_collector_end`) or
    year-less; for a year-less one, its SYSLOG_HEAD match (time, and journald's process)."""
    end = _dated_collector_end(raw, year)
    if not end and raw[3:4] == " " and raw[:1] in _MONTH_FIRST and (m := SYSLOG_HEAD.match(raw)) is not None:
        return m.end(), m
    return end, None


def _syslog_time(m: re.Match, year: int) -> Optional[datetime]:
    try:
        return datetime(year, _MONTHS[m[1]], int(m[2]), int(m[3]), int(m[4]), int(m[5]), int((m[6] or "0").ljust(6, "0")[:6]))
    except ValueError:  # 30 February; 29 February of the placeholder year (dated later)
        return None


ZONE_STEP = timedelta(minutes=15)  # zones are whole quarter hours from UTC
MAX_ZONE = timedelta(hours=14, minutes=1)  # the furthest a zone is from UTC, and a minute's delay
ZONE_SLACK = timedelta(minutes=2)  # how far the program's time may be from the collector's, besides the zone


def _zone(own: datetime, collected: datetime) -> timedelta:
    """The zone offset between a program's own time `own` and the collector's time of the same
    line: where the two are a zone's offset apart (whole quarter hours, up to a day's, give or
    take the delay of passing the line on), that offset; else none (one clock, or two clocks
    that say nothing of each other)."""
    gap = collected - own
    if abs(gap) > MAX_ZONE:
        return timedelta(0)
    zone = round(gap / ZONE_STEP) * ZONE_STEP
    return zone if abs(gap - zone) <= ZONE_SLACK else timedelta(0)


def _is_prefix_head(pre: str) -> bool:
    """Can `pre` stand before a [rankN]:/[defaultN]: chain as part of the line's prefix?"""
    return bool(
        LEADING_TS_BEFORE_RANK.match(pre)
        or ACCEL.fullmatch(pre)
        or (pre.endswith(":") and HOST_ONLY.fullmatch(pre[:-1]))
        or TAG_SHAPE.fullmatch(pre)
        or MPI_TAG.fullmatch(pre)
        or TORCHX.fullmatch(pre)
        or (pre[:1] == "(" and (RAY.fullmatch(pre) is not None or SKY.fullmatch(pre) is not None))
    )


def _has_bar(raw: str) -> bool:
    """Might `raw` hold a progress bar's time field (`<03:59`) or rate (`it/s]`, `s/it,`), or
    Keras's bar (`[====>...] - `, `━━━ 3s 54ms/step`)? Cheap."""
    return ("/s]" in raw or "/s," in raw or "s/it" in raw or ("<" in raw and "]" in raw)
            or ("] - " in raw and "/" in raw) or "\u2501" in raw)


class PrefixParser:
    """Stateless per line, except for dating glog timestamps, which carry no year.

    A glog time is dated per printer (its stream): the first one of a printer takes the year
    that puts it nearest the latest full timestamp (its printer's own, else any printer's);
    with none, the latest year that does not put it after `until` (the inputs' newest
    modification time, UTC: a line is written before its file last changes; a day of slack
    for the printer's local time). After that, a month going backwards on that printer is
    a new year. Nothing depends on the process's time zone.
    """

    MAX_PRINTERS = 100_000  # printers whose glog year is remembered (beyond: start over)

    def __init__(self, year: int, until: Optional[datetime] = None) -> None:
        self.year = year
        self.until = until
        self._glog: dict[tuple, tuple[int, int]] = {}  # printer -> (year, month) of its last glog time
        self._full: dict[tuple, datetime] = {}  # printer -> its latest full timestamp
        self._latest: Optional[datetime] = None  # the latest full timestamp of any printer
        self._peeking = False
        self._tags: dict[str, str] = {}  # learnt tag shape (numbers masked) -> the gap after it
        self._tag_votes: dict[str, int] = {}
        self._printers: dict[tuple, tuple[RankRef, tuple]] = {}  # see _printer
        self._hydra: dict[int, object] = {}  # input -> True (MPICH's `[N] ` tags confirmed), or the numbers seen once
        # printers (stream, who) known only once MPICH's tags were confirmed: the ranks whose
        # lines came before, read then as untagged; the reader takes them (`take_late`)
        self.late: list[tuple[tuple, RankRef]] = []
        self._zones: dict[int, timedelta] = {}  # input -> its program's zone offset from the collector's clock

    def _printer(self, stream: tuple, src: SourceInfo, label: Optional[int], rank: Optional[int], local: Optional[int], hinted: bool) -> tuple[RankRef, tuple]:
        """The RankRef of a stream's printer, and the stream: one pair per stream, shared by
        its lines (RankRefs are not changed once made)."""
        got = self._printers.get(stream)
        if got is None or got[0].node_index != src.node_index_hint:
            if len(self._printers) >= self.MAX_PRINTERS:
                self._printers.clear()
            got = self._printers[stream] = (RankRef(src.index, label, rank, local, src.node_index_hint, hinted), stream)
        return got

    def take_late(self) -> list[tuple[tuple, RankRef]]:
        """The printers learnt late (see `late`), once each."""
        got, self.late = self.late, []
        return got

    def _hydra_tag(self, src: SourceInfo, n: str, raw: str, end: int) -> bool:
        """Is `[n] ` at the head of `raw` MPICH's rank tag? It stands before every line of its
        rank, so it recurs, and before a traceback's lines; a program's numbered list (`[1]
        Preparing data`) names each number once. A number seen before in the input, or one
        before a traceback's header, frame or exception line, is a rank's tag, and from then on
        every `[N] ` of the input is; a number seen once before a program's words is not. The
        numbers seen once before that are ranks too (their lines, already read, stay untagged):
        they count among the printers (`late`)."""
        source = src.index
        seen = self._hydra.get(source)
        if seen is True:
            return True
        if (seen is not None and n in seen) or TAG_REST.match(raw, end) is not None:
            if not self._peeking:
                self._hydra[source] = True
                for num in sorted(seen or (), key=int):
                    if num != n and len(self.late) < 1024:
                        rank = int(num)
                        self.late.append(self._printer((source, "rank", None, rank, None, None, None, False), src, None, rank, None, False)[::-1])
            return True
        if not self._peeking:
            if seen is None:
                if len(self._hydra) >= self.MAX_PRINTERS:
                    self._hydra.clear()
                seen = self._hydra[source] = set()
            if len(seen) < 1024:
                seen.add(n)
        return False

    def _learnt_tag(self, raw: str) -> Optional[tuple[str, int]]:
        """(tag, where the program's line starts) when `raw` starts with a tag whose shape is
        learnt (or is learnt now). The gap after a tag is learnt with it: a frame's own two
        spaces of indentation are not part of it."""
        if not self._tags and not ('File "' in raw or "Traceback" in raw or "Error" in raw or "Exception" in raw):
            return None  # nothing learnt, and no traceback structure to learn from: plain tests only
        m = LEARN_TAG.match(raw)
        if m is None:
            return None
        word, gap = m.group(1), m.group(2)
        piped = gap.strip() == "|"
        if not piped and not TAG_WORD.fullmatch(word):
            return None
        shape = _TAG_DIGITS.sub("0", word)
        known = self._tags.get(shape)
        if known is not None:
            end = len(word) + len(known)
            return (word, end) if raw.startswith(known, len(word)) else None
        if self._peeking or TAG_REST.match(raw, m.end()) is None:
            return None
        if not piped and raw.startswith('File "', m.end()):
            gap = gap[:-2] if len(gap) > 2 else gap[:1]  # `tag   File`: the frame's indentation was `  `
        votes = self._tag_votes.get(shape, 0) + 1
        if len(self._tag_votes) < 1000:
            self._tag_votes[shape] = votes
        if votes < TAG_CONFIRM or len(self._tags) >= 100:
            return None
        self._tags[shape] = gap
        return word, len(word) + len(gap)

    def _date(self, ts: datetime, text: str, key: tuple = (), glog: Optional[bool] = None) -> datetime:
        """`ts` with its year resolved when `text` starts with a year-less glog time (`glog`:
        whether it does, when the caller already knows)."""
        if glog is None:
            glog = (text[:1] in "IWEF" or text[:2] in ("[I", "[W", "[E", "[F")) and GLOG_TS.match(text) is not None and ISO_TS.match(text.lstrip("[")) is None
        if glog:
            last = self._glog.get(key)
            if last is not None:
                year = last[0] + 1 if ts.month < last[1] else last[0]  # the month went back: a new year
            else:
                ref = self._full.get(key) or self._latest
                if ref is not None:
                    year = _nearest_year(ts, ref)
                elif self.until is not None:
                    year = _year_not_after(ts, self.until + timedelta(days=1))
                else:
                    year = self.year
            if not self._peeking:
                if len(self._glog) >= self.MAX_PRINTERS:
                    self._glog.clear()
                self._glog[key] = (year, ts.month)
            try:
                return ts.replace(year=year)
            except ValueError:  # 29 February of a year that has none
                return ts
        if not self._peeking:
            if len(self._full) >= self.MAX_PRINTERS:
                self._full.clear()
            self._full[key] = ts
            self._glog.pop(key, None)  # its next glog time is dated against this one
            self._latest = ts
        return ts

    def split_glued(self, raw: str) -> list[str]:
        """Cut a physical line where a second record was glued onto the first.

        Progress bars print without a newline, so the next record lands on the same line:
        `...| 12/100 [00:12<01:30][rank1]:Traceback (most recent call last):`. The cuts are
        where a rank prefix follows text that is not a prefix, or where a traceback header
        follows other text; the pieces concatenate back to `raw`.
        """
        pieces: list[str] = []
        while len(pieces) < MAX_GLUED_PIECES - 2:
            cut = self._glue_point(raw)
            if cut is None:
                pieces.append(raw)
                return pieces
            pieces.append(raw[:cut])
            raw = raw[cut:]
        # past the bound the rest stays together, but for the text after its last progress
        # bar: what ended the run (`...it/s]Killed`) is a line of its own (one linear search)
        last = None
        if _has_bar(raw):
            for last in BAR_GLUED.finditer(raw, 1):
                pass
        if last is not None:
            pieces.append(raw[: last.end()])
            raw = raw[last.end() :]
        pieces.append(raw)
        return pieces

    def glued(self, raw: str) -> bool:
        """Does `raw` hold more than one record? Cheap for the lines that cannot."""
        if not ("[rank" in raw or "[default" in raw or "Traceback (most" in raw or "slurmstepd" in raw or "srun: error" in raw or "]<std" in raw or _has_bar(raw)):
            return False
        return self._glue_point(raw) is not None

    def parse_one(self, src: SourceInfo, lineno: int, raw: str) -> Optional[LogLine]:
        """parse() of a line with no `\\r` in it, or None when it holds more than one record
        (see split_glued); the line is searched for a rank chain once for both."""
        chain = "[rank" in raw or "[default" in raw
        if (chain or "Traceback (most" in raw or "slurmstepd" in raw or "srun: error" in raw or "]<std" in raw or _has_bar(raw)) and self._glue_point(raw) is not None:
            return None
        return self.parse(src, lineno, raw, None, chain)

    def _glue_point(self, raw: str) -> Optional[int]:
        """Where the first record glued onto another starts in `raw`, if one does."""
        cut = self._record_glue_point(raw)
        if _has_bar(raw):
            # the text after a progress bar is a line of its own
            if (m := BAR_GLUED.search(raw, 1, cut if cut is not None else len(raw))) is not None:
                cut = m.end()
            end = cut if cut is not None else len(raw)
            if (bar := KERAS_BAR.search(raw, 1, end)) is not None and (m := KERAS_END.search(raw, bar.end(), end)) is not None:
                cut = m.end()  # Keras's: the end of the first bar's values (any later bar's are after it)
        return cut

    def _record_glue_point(self, raw: str) -> Optional[int]:
        # a collector's time in front (with a year or without: parse reads both), then the
        # line's own prefixes, as parse reads them: what stands there is no record glued on
        pos = _collected(raw, self.year)[0]
        m = SRUN_LABEL.match(raw, pos)
        pos = m.end() if m else pos
        if "[rank" in raw or "[default" in raw:
            if raw.startswith(("[rank", "[default"), pos):
                # the line starts with its own prefix: a second chain later in it is a
                # record glued on (`[rank0]: 12%|#| 12/100 [..][rank1]:Traceback ...`)
                first = RANK_CHAIN.match(raw, pos)
                if first is not None and ("[rank" in raw[first.end() :] or "[default" in raw[first.end() :]):
                    m = RANK_CHAIN.search(raw, first.end())
                    if m is not None and raw[first.end() : m.start()].strip():
                        return m.start()
            else:
                m = RANK_CHAIN.search(raw, pos, pos + 200)
                if m and m.start() > pos:
                    pre = raw[pos : m.start()].strip()
                    if pre and not _is_prefix_head(pre):
                        return m.start()
        if "]<std" in raw:
            # an MPI launcher's tagged line glued onto another's unfinished one
            # (`[1,0]<stdout>:---- train end ----[1,1]<stdout>:step 3`)
            own = MPI_TAG.match(raw, pos)
            start = own.end() if own is not None else pos
            if raw.find("]<std", start) >= 0 and (m := MPI_TAG.search(raw, start + 1)) is not None and raw[start : m.start()].strip():
                return m.start()
        m = GLUED_SCHEDULER.search(raw, 1) if ("slurmstepd" in raw or "srun: error" in raw) else None
        if m is not None:
            # `...| 31/67 [29:02<35:12]slurmstepd: error: *** STEP ...`: a scheduler line
            # glued to a progress bar
            return m.start()
        i = raw.find(TB_HEADER_TEXT, 1)
        if i > 0 and not raw[:i].endswith(NOT_GLUED_TB):
            self._peeking = True  # a look-ahead must not date later lines
            try:
                ll = self.parse(SourceInfo(index=0, path=""), 0, raw)
            finally:
                self._peeking = False
            head = ll.text[: len(ll.text) - (len(raw) - i)]
            if head.strip():
                return i
        return None

    def parse(self, src: SourceInfo, lineno: int, raw: str, inherit: Optional[LogLine] = None, chain: Optional[bool] = None) -> LogLine:
        """`chain`: does `raw` hold `[rank` or `[default` (None: not known yet)."""
        pos = 0
        label: Optional[int] = None
        rank: Optional[int] = None
        local: Optional[int] = None
        host: Optional[str] = None
        tag: Optional[str] = None
        ts: Optional[datetime] = None

        # a log collector's time in front of the whole line (the program's prefixes after it)
        collected: Optional[datetime] = None
        yearless = False
        pos, m = _collected(raw, self.year)
        if m is not None:
            collected, yearless = _syslog_time(m, self.year), True
            if m.group(7) is not None:
                host, tag = m.group(7), m.group(8)
        elif pos:
            collected = _stamp(raw, self.year)[0]
        if raw[pos : pos + 1] in _LABEL_START and (m := SRUN_LABEL.match(raw, pos)) is not None:
            label = int(m.group(1))
            pos = m.end()

        if chain is None:
            chain = "[rank" in raw or "[default" in raw
        if chain:
            m = RANK_CHAIN.search(raw, pos, pos + 200)
            if m:
                pre = raw[pos : m.start()].strip()
                if pre:
                    if LEADING_TS_BEFORE_RANK.match(pre):
                        ts = parse_ts(pre, self.year)
                    elif pre.endswith(">:") and MPI_TAG.fullmatch(pre):
                        pass  # an MPI launcher's tag: the chain after it names the same rank
                    elif pre.endswith("]:") and (mx := TORCHX.fullmatch(pre)) is not None:
                        tag, label, local = f"{mx.group(1)}/{mx.group(2)}", int(mx.group(2)), int(mx.group(3))
                    elif pre[:1] == "(" and (RAY.fullmatch(pre) is not None or SKY.fullmatch(pre) is not None):
                        tag = pre  # a Ray worker's or a SkyPilot node's: the chain names the rank
                    else:
                        mh = ACCEL.fullmatch(pre.rstrip()) or ACCEL.fullmatch(pre.rstrip() + " ")
                        if mh:
                            host = mh.group(1)
                        elif pre.endswith(":") and HOST_ONLY.fullmatch(pre[:-1]):
                            host = pre[:-1]
                        else:
                            tag = pre
                for kind, num in CHAIN_ITEM.findall(m.group(1)):
                    if kind == "rank":
                        rank = int(num)
                    else:
                        local = int(num)
                pos = m.end()

        if rank is None and local is None:
            c = raw[pos : pos + 1]
            if c == "[" and raw.find("]<std", pos, pos + 96) >= 0 and (m := MPI_TAG.match(raw, pos)) is not None:
                rank, pos = int(m.group(1)), m.end()
            elif (c == "[" and raw[pos + 1 : pos + 2].isdigit() and (m := HYDRA_TAG.match(raw, pos)) is not None and SHELL_JOB.match(raw, pos) is None
                  and self._hydra_tag(src, m.group(1), raw, m.end())):
                rank, pos = int(m.group(1)), m.end()
            elif c == "[" and raw.startswith("pod/", pos + 1) and (m := KUBE_TAG.match(raw, pos)) is not None:
                tag, pos = m.group(1), m.end()
            elif c == "[":
                # one match tries, in this order: a bracketed rank, accelerate's host, Determined
                m = BRACKETED.match(raw, pos)
                g = _DET_TS
                if m is not None and m.group(1) is not None:
                    rank, pos = int(m.group(1)), m.end()
                elif m is not None and m.group(2) is not None and not m.group(2).isdigit():
                    host, local, pos = m.group(2), int(m.group(3)), m.end()
                else:
                    if m is not None and m.group(2) is not None:  # `[12:3]:` names no host
                        m, g = DETERMINED.match(raw, pos), 1
                    if m is not None:
                        ts = parse_ts(m.group(g), self.year)
                        tag = m.group(g + 1)
                        pos = m.end()
            elif c == "(":
                m = RAY.match(raw, pos)
                if m:
                    if m.group(2):
                        tag = f"{m.group(1)} pid={m.group(2)}" if m.group(1) else f"pid={m.group(2)}"
                        host = m.group(3) or host
                    else:
                        tag, host = m.group(4), m.group(5) or host
                    pos = m.end()
                    if (m := BRACKET_RANK.match(raw, pos)) is not None:
                        rank, pos = int(m.group(1)), m.end()  # Lightning inside a Ray worker
                elif (m := SKY.match(raw, pos)) is not None:
                    tag, host, pos = f"{m.group(1)} pid={m.group(3)}", m.group(4) or m.group(1).rsplit(", ", 1)[-1], m.end()
            elif c.isalnum() and label is None and raw.find("/", pos, pos + 66) >= 0 and (m := TORCHX.match(raw, pos)) is not None:
                tag, label, local, pos = f"{m.group(1)}/{m.group(2)}", int(m.group(2)), int(m.group(3)), m.end()
            elif c.isalnum() and label is None:
                m = HOST.match(raw, pos)
                if m:
                    host, pos = m.group(1), m.end()
            elif c.isdigit():
                m = DETERMINED.match(raw, pos)
                if m:
                    ts = parse_ts(m.group(1), self.year)
                    tag = m.group(2)
                    pos = m.end()

        if pos == 0 and label is None and rank is None and local is None and host is None and tag is None and raw[:1].isalnum() and (learnt := self._learnt_tag(raw)) is not None:
            tag, pos = learnt

        if raw.startswith("std", pos) and (m := STD_TAG.match(raw, pos)) is not None:
            tag = tag or m.group(1)  # a wrapper's `stderr: ` before the printer's own line
            pos = m.end()

        text = raw[pos:]
        logged = False
        glog: Optional[bool] = None  # does `text` start with a glog time (None: not known yet)
        if ts is None:
            ts, form = _stamp(text, self.year)
            if ts is not None:
                glog = form < 0
                # a logging formatter's time in front of the program's own line: a prefix, so
                # a traceback behind it is a traceback (the stream stays the printer's)
                if form > 0 and text[:1] in "[12" and (end := _logging_head(text, form)):
                    pos += end
                    text = raw[pos:]
                    logged = True
                    glog = None
        if ts is None and collected is not None:
            ts = collected
            glog = yearless  # a year-less time is dated as a glog time is
        if ts is not None:
            ts = self._date(ts, text, inherit.stream if inherit is not None and pos == 0 else
                            (src.index, label, rank, local) if rank is not None or local is not None else (src.index, label, host, tag), glog)
            if collected is not None and not yearless and ts is not collected:
                # the program's own time, on the collector's clock: the collector writes its
                # zone, the program often its local time with none. The offset is learnt from
                # an input's first line that has both times and moves all of its own times
                # alike, so that their order and spacing stay the program's
                zone = self._zones.get(src.index)
                if zone is None:
                    zone = _zone(ts, collected)
                    if not self._peeking and len(self._zones) < self.MAX_PRINTERS:
                        self._zones[src.index] = zone
                if zone:
                    ts += zone

        if inherit is not None and pos == 0:
            # a `\r` segment with no prefix of its own belongs to the line it is part of
            who = inherit.who
            origin = inherit.origin
            return LogLine(src.index, lineno, raw, 0, text, origin, who, inherit.node, inherit.tag, ts, inherit.stream)

        origin = classify_origin(text, logged) if _may_have_origin(text) else None  # (most lines spared the call)
        if origin is not None:
            # launcher/scheduler lines name ranks in their text; the prefix only gives the node
            who, stream = self._printer((src.index, origin, label, host), src, label, None, None, False)
        else:
            if rank is not None or local is not None or label is not None:
                origin = "rank"
            elif src.rank_hint is not None:
                origin = "rank"
            else:
                origin = "unknown"
            hinted = False
            if rank is None and local is None and label is None and src.rank_hint is not None:
                hinted = True
                if src.rank_hint_local:
                    local = src.rank_hint
                else:
                    rank = src.rank_hint
            if rank is not None or local is not None:
                # the rank prefix identifies the printer; words before it (a per-line
                # timestamp, a host) must not split one rank's lines into many streams
                stream = (src.index, origin, label, rank, local, None, None, hinted)
            else:
                stream = (src.index, origin, label, rank, local, host, tag, hinted)
            who, stream = self._printer(stream, src, label, rank, local, hinted)
        return LogLine(src.index, lineno, raw, pos, text, origin, who, host, tag, ts, stream)  # type: ignore[arg-type]
