"""Typed values that cross module boundaries.

The hot path (one object per log line) uses slotted classes; what leaves the library
(the diagnosis) is a frozen pydantic model that serialises exactly to the JSON contract.
"""

# Annotations are objects, not text (no `from __future__ import annotations`): pydantic and
# dataclasses would otherwise compile and evaluate each field's annotation at import, a share of
# every run's start-up. Names must be defined before a class uses them.

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from slurmdoc.slurm.models import JobVerdict

Origin = Literal["rank", "launcher", "scheduler", "unknown"]


@dataclass(slots=True)
class SourceInfo:
    """One input stream: a file, a member of a directory, or stdin."""

    index: int
    path: str  # as shown to the user in `source` fields
    rank_hint: Optional[int] = None  # per-rank file: rank from the path
    rank_hint_local: bool = False  # the path names a local rank (torchrun --log-dir)
    node_index_hint: Optional[int] = None  # per-node file: node index from the path
    attempt: Optional[int] = None  # torchrun attempt_K
    first_line: int = 1  # the number its first line has in the file (a tail read on its own)
    # the lines that end one pasted excerpt and start another (a code fence of a paste, found
    # while reading): the order of two excerpts is the paster's, not the printer's, so nothing
    # in one shows that a printer went on after a line in another (diagnosis.liveness)
    excerpt_breaks: list[int] = field(default_factory=list)

    def excerpt(self, lineno: int) -> int:
        """The pasted excerpt line `lineno` is in: each fenced block is one (odd numbers: the
        fences open and close them in turn), and every line outside them is excerpt 0, the
        same for all. Outside the fences stand a paster's own words, or a run's log that
        printed a fenced block of its own (a model's sample): its lines around the block are
        one run, in the printer's order."""
        k = bisect_left(self.excerpt_breaks, lineno)
        return k if k % 2 else 0


@dataclass(slots=True)
class RankRef:
    """Who printed a line, before the job's layout is known.

    `label` is an outer srun --label task id; `rank` a global rank; `local` a local rank
    (torchrun [defaultN]:, per-rank files of one node). Resolved to a global rank once the
    whole input has been read (see diagnosis.layout).
    """

    source: int
    label: Optional[int] = None
    rank: Optional[int] = None
    local: Optional[int] = None
    node_index: Optional[int] = None
    hinted: bool = False  # the rank comes from the file name, not from the line
    # where a rank from the text comes from: "launcher" (its report of a failed rank) or
    # "message" (named inside an error message); None: the line's prefix (or file name)
    via: Optional[str] = None

    def source_kind(self) -> str:
        """The trust of the rank: prefix > file > launcher > message (`rank_source`)."""
        if self.via is not None:
            return self.via
        return "file" if self.hinted else "prefix"

    def key(self) -> tuple:
        return (self.source, self.label, self.rank, self.local, self.node_index, self.hinted)


@dataclass(slots=True)
class LogLine:
    """One physical line (or one `\\r` segment of it) after prefix splitting.

    Invariant: raw[offset:] == text. The prefix (raw[:offset]) is what was stripped.
    """

    source: int
    lineno: int
    raw: str
    offset: int
    text: str
    origin: Origin
    who: RankRef
    node: Optional[str]
    tag: Optional[str]
    ts: Optional[datetime]
    stream: tuple


@dataclass(slots=True)
class Event:
    """A unit the rules classify: an interesting line, or an assembled traceback."""

    kind: Literal["line", "traceback"]
    first: LogLine  # gives source, line number, attribution
    lines: list[str]  # texts (prefix stripped)
    linenos: list[int]  # line number of each text in its source
    exception_idx: list[int] = field(default_factory=list)  # indexes of exception lines
    ts: Optional[datetime] = None
    seq: int = 0
    truncated: int = 0  # lines dropped to keep the event bounded
    origin_idx: int = -1  # the originating exception line (-1: the first exception line)
    # How much of a traceback the log holds (kind "traceback"): "whole" (header, frames and
    # exception line); "headerless" (frames and exception line, no `Traceback (most recent
    # call last):` above them: a paste that starts mid-traceback); "cut" (no exception line:
    # the log ends, or a gap such as `[... trimmed ...]` follows the frames); "alone" (an
    # exception line with no frames above it). For a line: "reported" when a launcher
    # printed it on a rank's behalf (the `traceback :` field of torchrun's summary).
    form: Literal["whole", "headerless", "cut", "alone", "reported"] = "whole"
    # the line before it said the error is harmless (`... it's safe to ignore this error`):
    # the printer logged it and went on (diagnosis.liveness)
    waived: bool = False
    # Python printed it for an exception that it then dropped (`Exception ignored in: <obj>`
    # above the traceback: raised in a `__del__`, a finalizer, a callback): the process went
    # on, so it is never a failure, only a handled finding (diagnosis.order)
    unraised: bool = False

    def origin(self) -> int:
        """Index of the exception the failure started with: the first of a chain
        ("During handling ...", "... direct cause ..."), or the one inside an embedded
        "Original Traceback" (DataLoader workers re-raise in the main process)."""
        if self.origin_idx >= 0:
            return self.origin_idx
        if self.exception_idx:
            return self.exception_idx[0]
        last = len(self.lines) - 1
        if last > 0 and self.form == "cut" and _frame_piece(self.lines[last]):
            return last - 1  # the paste ended inside a frame line: the last whole line is before it
        return last

    def text(self) -> str:
        return "\n".join(self.lines)

    def partial(self) -> bool:
        """Only part of a traceback (cut before its exception, or an exception line alone):
        the `exception` level of the evidence ladder, below an assembled `traceback`."""
        return self.kind == "traceback" and self.form in ("cut", "alone")


@dataclass(slots=True)
class ProgressMark:
    """The last progress line (iteration, step, batch, ...) a printer was seen at."""

    marker: str  # id of the progress marker that read it (ingest/progress.yaml)
    label: str  # its word for reports: "iteration", "step", ...
    step: int
    epoch: Optional[int]
    total: Optional[int]
    source: int
    lineno: int
    ts: Optional[datetime]
    text: str


@dataclass(slots=True)
class RankActivity:
    """What one printer (one rank's stream) was last seen doing (ingest.activity).

    `who` is resolved to a global rank by the analyzer, once the layout is known. Only the
    lines the reader parsed were observed: there may be gaps.
    """

    who: RankRef
    source: int  # last non-blank line
    lineno: int
    text: str
    line_ts: Optional[datetime]  # that line's own timestamp, if it had one
    last_ts: Optional[datetime]  # the latest timestamp this printer printed
    lines: int = 0
    progress: dict[str, ProgressMark] = field(default_factory=dict)  # marker id -> last mark
    # marker id -> ((epoch, step), source, lineno, moved) of the last mark that went beyond every
    # earlier mark of that marker: a progress bar redrawn over steps already reached is not
    # new progress (diagnosis.liveness), nor is the first mark alone (`moved` False: where the
    # printer stood, not that it moved); in an input pasted as several excerpts, keyed by
    # (marker id, excerpt number) instead: each excerpt's progress is its own
    advanced: dict[str, tuple] = field(default_factory=dict)
    # a printer told apart from the unprefixed stream only by a host or a tag (Ray's
    # `(Worker pid=N)`): its progress says nothing of the unprefixed lines' printer
    tagged: bool = False


# ---- what leaves the library -------------------------------------------------------


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Remediation(_Frozen):
    summary: str
    why: Optional[str] = None
    fix: tuple[str, ...] = ()

    def as_text(self) -> str:
        parts = [self.summary]
        if self.why:
            parts.append(self.why)
        parts.extend(f"- {step}" for step in self.fix)
        return "\n".join(parts)


class Collective(_Frozen):
    """The collective the flight-recorder dumps name (root_cause.collective): the first one of
    a process group that not every member entered, or entered alike. `seq` as the dump numbers
    it (collective_seq_id; p2p_seq_id when `p2p`)."""

    pg: str
    seq: Optional[int]
    op: Optional[str]
    sizes: Optional[list] = None
    missing_ranks: tuple[int, ...] = ()
    mismatch: Optional[dict] = None  # {"rank", "field", "expected", "got"}
    # extensions
    pg_desc: str = ""
    members: tuple[int, ...] = ()
    p2p: bool = False
    waiting_ranks: tuple[int, ...] = ()
    culprits: tuple[int, ...] = ()
    culprit_last: Optional[dict] = None  # {"rank", "seq", "op", "frames"}: the culprit's last recorded collective
    dump_evidence: Literal["dump", "absent_dump"] = "dump"  # absent_dump: named only because its dump is missing (weaker)
    absent_dumps: tuple[int, ...] = ()


class FlightRecorder(_Frozen):
    """What the flight-recorder dumps (`--traces`) said, and what the diagnosis made of it.

    `role`: "root" (they named the root rank of a hang), "confirms" (the log's root cause, on
    the rank the dumps name), "context" (a crash the log shows earlier stays the root; the
    dumps add where the others were), "consistent" (every member entered every recorded
    collective), "undecided" (not enough to say), "ignored" (a run with no failure)."""

    role: Literal["root", "confirms", "context", "consistent", "undecided", "ignored"]
    kind: Literal["missing", "mismatch", "consistent", "undecided"]
    summary: str
    culprits: tuple[int, ...] = ()
    collective: Optional[Collective] = None
    files: int = 0
    ranks_dumped: tuple[int, ...] = ()
    absent_dumps: tuple[int, ...] = ()
    path: str = ""
    warnings: tuple[str, ...] = ()


class RootCause(_Frozen):
    category: str
    rule_id: str
    rank: Optional[int]
    node: Optional[str]
    source: str
    message: str
    traceback: tuple[str, ...]
    timestamp: Optional[str]
    remediation: str
    # the strongest kind of evidence behind it (the evidence ladder, strongest first):
    # traceback > exception > launcher > exit > error_line; flight_recorder: a hang's rank
    # named by the ranks' flight-recorder dumps (diagnosis.recorder)
    evidence: Literal["flight_recorder", "traceback", "exception", "launcher", "exit", "error_line"]
    # where its rank comes from: the line's prefix, a per-rank file's name, a launcher's
    # report, the error message's text, or the flight-recorder dumps (None: no rank)
    rank_source: Optional[Literal["prefix", "file", "launcher", "message", "flight_recorder"]] = None
    # extensions beyond the contract
    title: str
    ranks: tuple[int, ...] = ()
    all_ranks: bool = False
    remediation_parts: Remediation
    captures: dict[str, str] = {}
    evidence_lines: tuple[str, ...] = ()  # other lines that support or refine it (was `evidence`)
    promoted: bool = False  # a symptom-role finding chosen because no cause was found
    frame: Optional[str] = None  # file:line of the innermost Python frame
    raised_at: Optional[str] = None  # file:line of the innermost frame in the user's code (not the Python installation, not site-packages)
    raised_in: Optional[str] = None  # file:line of the innermost frame overall (where the error was raised)
    processes: int = 1  # how many processes raised this same error
    stragglers: tuple[int, ...] = ()  # ranks that never reported a collective timeout
    job_level: bool = False  # a scheduler/launcher event about the whole job, not one rank
    traceback_lines_dropped: int = 0  # frames left out of a very long traceback
    label: Optional[str] = None  # the rule's words for this kind of end ("SIGBUS, bus error"), for the verdict
    collective: Optional[Collective] = None  # the collective the flight-recorder dumps name (with --traces)


class Symptom(_Frozen):
    category: str
    rule_id: str
    ranks: tuple[int, ...]
    count: int
    first_source: str
    title: str
    role: str
    rank_ranges: str
    nodes: tuple[str, ...] = ()
    message: str = ""
    first_time: Optional[str] = None  # ISO 8601 time of its first occurrence, when the line carried one


class RankTime(_Frozen):
    """One rank on the job's timeline (times ISO 8601): its first failure evidence, its last
    progress mark, its last timestamped output."""

    rank: int
    node: Optional[str] = None
    failed_at: Optional[str] = None
    category: Optional[str] = None
    role: Optional[Literal["root", "cause", "symptom"]] = None
    progress_at: Optional[str] = None
    step: Optional[int] = None
    last_output: Optional[str] = None


class Handled(_Frozen):
    """A failure-like finding that its printer outlived (it went on making progress, or
    reached a clean end): listed, never the root cause."""

    category: str
    rule_id: str
    rank: Optional[int]
    source: str
    message: str
    evidence: str  # its rung on the evidence ladder
    resumed_at: str  # path:line of the progress or clean end after it


class LauncherVerdict(_Frozen):
    """A torchrun ChildFailedError summary's "Root Cause" block, checked against the rest."""

    source: str
    node: Optional[str]
    rank: Optional[int]
    exitcode: Optional[int]
    agrees: Optional[bool]
    note: str
    first_failure: Optional[int] = None  # when the summary names a symptom: the rank that really failed first


class RankProgress(_Frozen):
    """One rank's last activity: its last line, and the last progress step it printed."""

    rank: int
    last_source: str
    last_time: Optional[str]
    last_line: str
    step: Optional[int] = None
    epoch: Optional[int] = None
    unit: Optional[str] = None  # "iteration", "step", "batch", ...
    step_source: Optional[str] = None
    step_time: Optional[str] = None


class Attempt(_Frozen):
    """One attempt of a job that ran several times in one log (torchrun restarts, requeues)."""

    index: int  # 0 = the first run
    status: Literal["failed", "no_failure"]
    category: Optional[str] = None
    rank: Optional[int] = None
    ranks: tuple[int, ...] = ()
    source: Optional[str] = None  # path:line of that attempt's root cause
    message: Optional[str] = None
    starts_at: Optional[str] = None  # path:line where the attempt begins (None: the start)
    verdict: str = ""


class Diagnosis(_Frozen):
    schema_version: Literal[1] = 1
    status: Literal["failed", "no_failure"]
    root_cause: Optional[RootCause]
    symptoms: tuple[Symptom, ...]
    ranks_seen: int
    # failure-like findings that their printer outlived (never the root cause)
    handled: tuple[Handled, ...] = ()
    # extensions
    verdict: str
    inputs: tuple[str, ...] = ()
    lines_read: int = 0
    warnings: tuple[str, ...] = ()
    launcher_verdicts: tuple[LauncherVerdict, ...] = ()
    progress: tuple[RankProgress, ...] = ()  # per-rank last activity, when the job ended in a hang
    attempts: tuple[Attempt, ...] = ()  # when the log holds several attempts; the report is the last one's
    history: Optional[str] = None  # "3 attempts: cuda_oom on rank 12 each time"
    job: Optional[JobVerdict] = None  # `diagnose --job` / epilog: the log joined with Slurm's accounting
    flight_recorder: Optional[FlightRecorder] = None  # with --traces: what the dumps said and what became of it
    # per-rank timeline for the pictures (terminal strip, HTML page); one record per rank,
    # so it stays out of the JSON
    timeline: tuple[RankTime, ...] = Field(default=(), exclude=True)


def _frame_piece(line: str) -> bool:
    """Is `line` a traceback frame line cut inside its path (`  File "/usr/lib/pyth`)?"""
    s = line.lstrip()
    return s.startswith('File "') and '", line ' not in s
