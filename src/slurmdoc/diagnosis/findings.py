"""Stage 1 of the diagnosis: findings. Each classified event becomes a Finding while the
input streams by; the Collector keeps what the later stages need (causes, symptom groups,
context lines, exit evidence, and the facts that place ranks: who printed, launcher
summaries, srun task lines, hosts, process ids).

Memory: findings are merged per stream (a multi-line report is one finding), symptoms are
kept as per-rule aggregates (rank set, count, first occurrence) and causes are capped, so
the state grows with the number of ranks and distinct failures, not with the log's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Optional

from slurmdoc import frames
from slurmdoc.diagnosis.attempts import Mark
from slurmdoc.diagnosis.cap import EarliestCauses
from slurmdoc.diagnosis.ranks import parse_tasks, to_int
from slurmdoc.engine.loader import Rule
from slurmdoc.engine.matcher import Match
from slurmdoc.ingest.assemble import SUMMARY_HEAD
from slurmdoc.ingest.prefix import LAUNCHER_MARKS
from slurmdoc.models import Event, RankRef, SourceInfo

MAX_CAUSES = 20_000
JOURNAL_MAX = 5_000  # findings kept to split the job into attempts (beyond: no split)
MAX_LAST = 50_000  # streams whose last finding is kept to merge multi-line reports
MAX_STREAMS_SEEN = 500_000
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")



@dataclass(eq=False)
class Finding:
    rule: Rule
    event: Event
    captures: dict[str, str]
    line_index: int
    refs: list[RankRef]  # who it is about; several for srun task lists
    node: Optional[str]
    # the line of its last repetition, when later lines of its printer repeated the report
    # (merged into it): liveness asks whether the printer outlived that one
    repeated_at: Optional[int] = None
    pattern: int = 0  # the index of the rule's pattern that matched the cited line
    # the finding on the message line its printer printed right below it, of another rule (an
    # uncaught C++ exception's `what(): <message>` that a rule reads): what this report is
    # about, which stands for it when it would lead (diagnosis.order.told)
    inner: Optional["Finding"] = None

    @property
    def ts(self) -> Optional[datetime]:
        return self.event.ts

    @property
    def seq(self) -> int:
        return self.event.seq

    def _index(self) -> int:
        """The line that states the error: the matched line if it is an exception line,
        otherwise the traceback's originating exception; in a launcher summary pasted from
        its `Root Cause` head (no exception line in it), the matched line, not its last."""
        ev = self.event
        idx = self.line_index
        if ev.kind == "traceback" and idx not in ev.exception_idx and (ev.exception_idx or ev.origin_idx >= 0 or not SUMMARY_HEAD.match(ev.lines[0])):
            idx = ev.origin()
        return min(idx, len(ev.lines) - 1)

    def message(self) -> str:
        return self.event.lines[self._index()].strip()[:1000]

    def lineno(self) -> int:
        return self.event.linenos[self._index()]

    def frame(self) -> Optional[str]:
        """file:line of the innermost Python frame before the reported exception line."""
        ev = self.event
        return frames.raised_in(ev.lines, self._index()) if ev.kind == "traceback" else None

    def phase(self) -> Optional[str]:
        """'forward', 'backward' or 'optimizer', when the traceback's frames show it."""
        ev = self.event
        return frames.phase(ev.lines, self._index()) if ev.kind == "traceback" else None

    def user_frame(self) -> Optional[str]:
        """file:line of the innermost frame in the user's code before the reported exception
        line (outside the Python installation and site-packages); in a chain whose first
        exception was raised in library code only, the user's frame of a later exception."""
        ev = self.event
        if ev.kind != "traceback":
            return None
        return frames.raised_at(ev.lines, self._index()) or frames.raised_at(ev.lines)


@dataclass
class Group:
    first: Finding
    count: int = 0
    refs: dict = field(default_factory=dict)
    nodes: set = field(default_factory=set)
    times: dict = field(default_factory=dict)  # rank key -> time of its first occurrence


# times of two lines of one file closer than this are one instant: processes stamping the same
# event (every rank's watchdog firing together) differ by microseconds that say nothing of
# which came first, and the order the file holds them in stands
SAME_INSTANT = timedelta(milliseconds=1)


def before(a: Finding, b: Finding) -> bool:
    """Did `a` happen before `b`? By time when both carry one (unless they are lines of one
    file at the same instant), else by position."""
    if a.ts is not None and b.ts is not None and a.ts != b.ts:
        if not (a.event.first.source == b.event.first.source and abs(a.ts - b.ts) < SAME_INSTANT):
            return a.ts < b.ts
    return a.seq < b.seq


TAG_PID = re.compile(r"\bpid=(\d+)")
# an uncaught C++ exception's message: `terminate called after throwing an instance of 'T'`,
# then `  what():  <message>`; the process aborts (SIGABRT) right after printing it
WHAT = re.compile(r"(?:^|\s)what\(\):\s")
# an exception line that ends in a colon after at most a few words: its message comes below
ANNOUNCES = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*: (?:[\w'-]+ ){0,5}[\w'-]+:\s*$")
ANNOUNCED_WITHIN = 40  # lines between such an exception line and the message it announced


def inside(rule, prev: Finding) -> bool:
    """Is a finding of `rule` a weaker echo inside the report `prev` began, one that does not
    end it? A symptom of lower priority than the report's rule, printed among its lines (the
    C++ runtime's `terminate called after throwing ...` between the NCCL watchdog's `Some NCCL
    operations have failed` and the `what():` line naming the collective): the report's next
    line still merges into it."""
    return rule is not prev.rule and rule.role == "symptom" and rule.spec.priority < prev.rule.spec.priority


def named(r: RankRef) -> bool:
    """Does the reference name a rank (global, local or an srun label)?"""
    return r.rank is not None or r.local is not None or r.label is not None


def nonzero(f: Finding) -> bool:
    """A finding whose captured exit code is a number other than 0."""
    code = f.captures.get("exitcode", "")
    return to_int(code) not in (None, 0)


class Collector:
    """Every finding of one job (or of one attempt, `_part`), as the input streams by."""

    def __init__(self, sources: list[SourceInfo], skew: float = 1.0, _part: bool = False) -> None:
        self.sources = sources
        # several attempts in one log (restarts, requeues): every finding is kept, bounded,
        # to be replayed into one analyzer per attempt (diagnosis.attempts)
        self.journal: Optional[list[tuple[Event, Match]]] = None if _part else []
        self.marks: list[Mark] = []
        self._part = _part
        self.skew = timedelta(seconds=skew)
        self.seen: dict[tuple, RankRef] = {}  # stream -> who (for ranks_seen and layout)
        self.causes = EarliestCauses(MAX_CAUSES)  # the earliest, whatever order they complete in
        self.causes_dropped = 0
        self.streams_dropped = 0
        self.symptoms: dict[str, Group] = {}
        self.contexts: list[Finding] = []
        self.categories: dict[str, Finding] = {}  # first finding of each category
        self.known_ranks: set[int] = set()  # ranks the text shows exist (launcher summaries)
        self.exits: list[Finding] = []  # findings of exit_evidence rules (non-zero exits), capped
        self.placements: dict[tuple[int, int, int], int] = {}  # (source, node index, local rank) -> rank
        self.named_locals: list[RankRef] = []  # local ranks named by launcher lines
        self._last: dict[tuple, Finding] = {}  # per stream: last finding, to merge reports
        self._heads: dict[tuple, Finding] = {}  # per stream: its latest new finding, echoes included
        # per stream: the latest generic exception whose line only announces its message below
        # (`ResourceExhaustedError: Graph execution error:`), for a rule that reads that message
        self._announced: dict[tuple, list[Finding]] = {}
        self.seqs: dict[tuple, tuple[RankRef, int]] = {}  # rank -> collective it timed out in
        self.host_refs: list[tuple[RankRef, str, int]] = []  # (who, host, how sure) from srun lines, prefixes, summaries
        self.pid_ref: dict[tuple[int, str], RankRef] = {}  # (source, pid) -> the rank that process was
        self._node_host: dict[tuple[int, int], str] = {}  # (source, srun label of an agent) -> host
        # hosts that lines were tagged with (a `host:` prefix: pdsh under DeepSpeed's runner),
        # the first two (the reader notes them, and findings' lines): two of them make a
        # multi-node job, where a local rank whose node has no index is no global rank
        self.line_hosts: set[str] = set()
        # a launcher's summary naming a process by a global rank other than its local rank
        # (torchrun's `rank : 5 (local_rank: 1)`): the job spans nodes, so a local rank alone
        # is no global rank
        self.rank_past_local = False
        self.agent_sources: set[int] = set()  # sources whose srun labels are torchrun agents (nodes)
        self.pid_findings: list[tuple[str, int, str]] = []  # (rule id, source, pid) of findings naming only a pid
        self.error_lines: list[Finding] = []  # the generic lexicon's error-like lines (bottom rung), capped
        self.clean_ends: list[Finding] = []  # lines showing a printer, or the job, ended cleanly, capped
        # findings on an uncaught C++ exception's `what():` line: the message a process
        # aborted with (diagnosis.order: an abort exit after one is explained by it), capped
        self.last_words: list[Finding] = []
        # facts from outside the log (the job's accounting: job id, peak RSS), for remediation
        self.facts: dict[str, object] = {}

    # ---- streaming -------------------------------------------------------------
    def note_stream(self, stream: tuple, who: RankRef) -> None:
        if stream not in self.seen:
            if len(self.seen) >= MAX_STREAMS_SEEN:
                self.streams_dropped += 1
                return
            self.seen[stream] = who

    def _excerpt(self, event: Event) -> int:
        """The pasted excerpt the event's first line is in (SourceInfo.excerpt: 0 outside code
        fences, one odd number per fenced block)."""
        src = self.sources[event.first.source] if event.first.source < len(self.sources) else None
        return src.excerpt(event.first.lineno) if src is not None and src.excerpt_breaks else 0

    def add(self, event: Event, match: Match) -> None:
        rule = match.rule
        if self.journal is not None:
            if len(self.journal) < JOURNAL_MAX:
                self.journal.append((event, match))
            else:
                self.journal = None  # too many findings to replay: one attempt
        if (rule.spec.attempt_start or "attempt_end" in match.captures) and len(self.marks) < 10_000:
            first = event.first
            if rule.spec.attempt_start:
                self.marks.append(Mark(first.source, first.lineno, "start", (), to_int(match.captures.get("restart"))))
            else:
                self.marks.append(Mark(first.source, first.lineno, "end", (first.who.label, match.captures["attempt_end"])))
        stream = event.first.stream
        prev = self._last.get(stream)
        if prev is not None and prev.rule is not rule and (head := self._heads.get(stream)) is not None and head.rule is rule:
            # the next line of an echo printed inside another report (a failed CHECK's stack
            # trace banner after the CHECK line, both below the error they report): the echo's
            # own report goes on, and stays one finding
            prev = head
        if (
            prev is not None
            and prev.rule is rule
            and event.kind == "line"
            and prev.event.kind == "line"
            and prev.captures.get("node") == match.captures.get("node")  # srun lines about other hosts stay apart
            and not (rule.spec.rank_source == "message" and self._refs(event, match) != prev.refs[:1])  # each rank's own message
            and quotes(event) == quotes(prev.event)  # a sentence quoting the error is not the program's record
            and self._excerpt(event) == self._excerpt(prev.event)  # nor a paster's words around a fenced log
        ):
            # one multi-line report (e.g. NCCL watchdog + its C++ trace): one finding, but
            # every rank it names counts (srun prints `tasks 0-3` and `tasks 4-7` in a row)
            refs = self._refs(event, match)
            if event.first.source == prev.event.first.source:
                prev.repeated_at = event.linenos[-1] if event.linenos else event.first.lineno
            names, named_before = any(named(r) for r in refs), any(named(r) for r in prev.refs)
            # the report is cited at a later line that names the rank where the earlier ones
            # did not (mpirun's 'Primary job terminated ...' then 'Process name: [[J,1],R]'), or
            # that a more specific pattern of the rule knows (the watchdog's line naming the
            # collective after its generic 'Some NCCL operations have failed'; the kernel's
            # 'Killed process' after its 'oom-kill:' summary); it keeps what the earlier said too
            if (names and not named_before) or (match.pattern < prev.pattern and names == named_before):
                prev.event, prev.line_index, prev.pattern = event, match.line_index, match.pattern
                prev.captures = {**prev.captures, **match.captures}
            self._note_seq(refs, match.captures)
            self._note_hosts(event, match, refs)
            known = {r.key() for r in prev.refs}
            prev.refs.extend(r for r in refs if r.key() not in known)
            self._note_last_words(prev, event, self._heads.get(stream))
            g = self.symptoms.get(rule.id)
            if g is not None:
                for r in refs:
                    if len(g.refs) < MAX_STREAMS_SEEN:
                        g.refs.setdefault(r.key(), r)
                        if event.ts is not None:
                            g.times.setdefault(r.key(), event.ts)
            return
        who = event.first.who
        if event.kind == "traceback" and who.label is not None and who.rank is None and who.local is None and len(self.agent_sources) < 10_000:
            # the launcher's own traceback (torchrun's) under an srun label: that label is a
            # node's agent, not a rank, even when no worker ever printed under it
            if any(mark in line for line in event.lines[:60] for mark in LAUNCHER_MARKS):
                self.agent_sources.add(event.first.source)
        f = Finding(rule, event, match.captures, match.line_index, self._refs(event, match), self._node(event, match), pattern=match.pattern)
        if len(self._last) >= MAX_LAST:
            # bounded memory whatever the number of printers: a report is merged with the
            # previous line of its stream; past this many streams, start over
            self._last.clear()
            self._heads.clear()
        if prev is None or not inside(rule, prev):
            self._last[stream] = f
        head, self._heads[stream] = self._heads.get(stream), f
        self._note_seq(f.refs, match.captures)
        self._note_hosts(event, match, f.refs)
        for r in f.refs:
            if r.local is not None and len(self.named_locals) < 100_000:
                self.named_locals.append(r)  # local ranks a launcher names count for the layout
        caps = match.captures
        who = event.first.who
        node_idx = who.label if who.label is not None else who.node_index
        grank, lrank = to_int(caps.get("rank")), to_int(caps.get("local_rank"))
        if node_idx is not None and grank is not None and lrank is not None and rule.spec.rank_source == "launcher" and len(self.placements) < 100_000:
            # a launcher summary says which global rank a node's local rank was
            self.placements[(event.first.source, node_idx, lrank)] = grank
        if match.known_ranks and len(self.known_ranks) < 1_000_000:
            self.known_ranks.update(match.known_ranks)
        if rule.spec.clean_end:
            if len(self.clean_ends) < 1000:
                self.clean_ends.append(f)
            return
        if rule.spec.evidence == "error_line":
            # the bottom rung: a candidate only when nothing more specific exists; kept
            # apart from symptoms so that it never counts as a rank's echo of a failure
            # (a rank's own output only: launchers' and Slurm's lines speak through rules)
            if len(self.error_lines) < 1000 and event.first.origin in ("rank", "unknown"):
                self.error_lines.append(f)
            return
        self.categories.setdefault(rule.category, f)
        self._note_last_words(f, event, head)
        self._note_announced(f, event)
        role = rule.role
        if role == "cause":
            if not self.causes.keep(f):
                self.causes_dropped += 1
        elif role == "symptom":
            g = self.symptoms.get(rule.id)
            if g is None:
                g = self.symptoms[rule.id] = Group(f)
            elif before(f, g.first):
                g.first = f  # by time where lines carry one: the same whatever the interleaving
            g.count += 1
            for r in f.refs:
                if len(g.refs) < MAX_STREAMS_SEEN:  # as many ranks as ranks_seen counts
                    g.refs.setdefault(r.key(), r)
                    if f.ts is not None and (r.key() not in g.times or f.ts < g.times[r.key()]):
                        g.times[r.key()] = f.ts
            if f.node:
                g.nodes.add(f.node)
            if rule.spec.exit_evidence and len(self.exits) < 1000:
                self.exits.append(f)
        else:
            if len(self.contexts) < 1000:
                self.contexts.append(f)
            # a launcher's verdict is raised only when a child failed: cut before its exit
            # code (a paste, a tail), it still says that much
            if rule.spec.exit_evidence and len(self.exits) < 1000 and (nonzero(f) or (rule.spec.launcher_verdict and "exitcode" not in f.captures)):
                self.exits.append(f)

    def _note_last_words(self, f: Finding, event: Event, head: Optional[Finding]) -> None:
        """Keep a finding whose line is an uncaught C++ exception's `what():` message; the
        report its printer printed just before it (the runtime's `terminate called after
        throwing ...`, a finding of another rule) is about that message (`inner`)."""
        if (event.kind == "line" and "what()" in event.lines[0] and WHAT.search(event.lines[0]) is not None
                and len(self.last_words) < 1000 and (not self.last_words or self.last_words[-1] is not f)):
            self.last_words.append(f)
            if (head is not None and head is not f and head.rule is not f.rule and head.inner is None
                    and f.rule.role != "context" and head.event.kind == "line" and head.seq < event.seq
                    and head.event.first.source == event.first.source):
                head.inner = f

    def _note_announced(self, f: Finding, event: Event) -> None:
        """An exception that no rule but the generic one read, whose line ends in a colon
        after its class and a few words (TensorFlow 2.10+'s `...Error: Graph execution
        error:`), announces its message on the lines below, past a blank line the traceback
        ends at: the first finding of a more specific cause printed there, in the same file
        and stream, within a few lines, on a line that is no exception line of its own (that
        is another exception), is what it raised (`inner`). Generic exceptions read
        in between are that message's own lines (TensorFlow's `Detected at node ... defined
        at (most recent call last):` frames, closed by `Node: '<name>'`): the same holds for
        them."""
        stream = event.first.stream
        pending = self._announced.get(stream)
        near = pending is not None and (
            pending[0].event.first.source == event.first.source
            and 0 < event.first.lineno - pending[0].lineno() <= ANNOUNCED_WITHIN)
        if f.rule.category == "python_exception":
            if near:
                pending.append(f)  # type: ignore[union-attr]
            elif event.kind == "traceback" and ANNOUNCES.match(f.message()) is not None:
                if len(self._announced) >= MAX_LAST:
                    self._announced.clear()
                self._announced[stream] = [f]
            return
        if pending is None or f.rule.role != "cause":
            return
        # an exception line with a class of its own is another exception (a later raise, a
        # worker's teardown), not the message the first one announced
        if near and event.kind != "traceback":
            for g in pending:
                if g.inner is None and g.seq < event.seq:
                    g.inner = f
        del self._announced[stream]

    def _note_seq(self, refs: list[RankRef], caps: dict[str, str]) -> None:
        """The collective a rank timed out in (NCCL's SeqNum / last enqueued work)."""
        pos = to_int(caps.get("enqueued")) if "enqueued" in caps else to_int(caps.get("seq"))
        if pos is None or pos < 0 or len(self.seqs) >= 100_000:
            return
        for r in refs:
            self.seqs.setdefault(r.key(), (r, pos))

    def _note_hosts(self, event: Event, match: Match, refs: list[RankRef]) -> None:
        """Where ranks ran (srun's `n2: task 2`, a host prefix, a launcher summary's
        `host :`), and which rank a process id was (torchrun's `(pid: P)`)."""
        caps = match.captures
        src = event.first.source
        if len(self.host_refs) >= 200_000 or len(self.pid_ref) >= 100_000:
            return
        host = caps.get("node")
        if host and "tasks" in caps:
            self.host_refs.extend((r, host, 3) for r in refs)
        elif host:
            self.host_refs.extend((r, host, 0) for r in refs)
        first = event.first
        if first.node and len(self.line_hosts) < 2:
            self.line_hosts.add(first.node)
        if first.node and first.origin == "rank":
            self.host_refs.append((first.who, first.node, 2))
        for e in match.entries:
            r = to_int(e.get("rank"))
            if r is None:
                continue
            ref = RankRef(src, rank=r)
            if not self.rank_past_local and (lr := to_int(e.get("local_rank"))) is not None and lr != r:
                self.rank_past_local = True
            if e.get("node"):
                self.host_refs.append((ref, e["node"], 0 if e["node"] in LOCAL_HOSTS else 1))
            if e.get("pid"):
                self.pid_ref[(src, e["pid"])] = ref
        pid = caps.get("pid")
        if pid:
            if refs and ("local_rank" in caps or "rank" in caps):
                self.pid_ref.setdefault((src, pid), refs[0])
            elif not refs and len(self.pid_findings) < 100_000:
                self.pid_findings.append((match.rule.id, src, pid))

    def _refs(self, event: Event, match: Match) -> list[RankRef]:
        who = event.first.who
        caps = match.captures
        src = event.first.source
        if "tasks" in caps:
            # srun task ids live in the same space as srun --label: global ranks for
            # srun-native launches, node indexes when srun starts one torchrun per node
            return [RankRef(src, label=t, via="launcher") for t in parse_tasks(caps["tasks"])[:100_000]]
        rank = to_int(caps.get("rank"))
        local = to_int(caps.get("local_rank"))
        if match.rule.spec.rank_source == "message" and ((rank is not None and rank >= 0) or (local is not None and local >= 0)):
            # a rank named inside an error message: below the line's own prefix or file
            if who.rank is not None or who.label is not None or who.local is not None:
                return [who]
            if rank is not None and rank >= 0:
                return [RankRef(src, rank=rank, via="message")]
            return [RankRef(src, local=local, node_index=who.node_index, via="message")]
        if rank is not None and rank >= 0:
            return [RankRef(src, rank=rank, via="launcher")]
        if local is not None and local >= 0:
            return [RankRef(src, label=who.label, local=local, node_index=who.node_index, via="launcher")]
        if match.rule.spec.attribution == "text" or event.first.origin in ("launcher", "scheduler"):
            return []
        tag = event.first.tag
        if tag and who.rank is None and who.local is None and who.label is None and (m := TAG_PID.search(tag)) is not None:
            # a printer named by its process id (Ray's `(RayTrainWorker pid=1015)`) whose rank a
            # launcher line gave earlier (`(ip=..., pid=1015) world_rank=0`)
            ref = self.pid_ref.get((src, m.group(1)))
            if ref is not None and ref.rank is not None:
                return [RankRef(src, rank=ref.rank, via="launcher")]
        return [who]

    @staticmethod
    def _node(event: Event, match: Match) -> Optional[str]:
        return match.captures.get("node") or event.first.node

    def src(self, f: Finding) -> str:
        """Where a finding was printed, as `path:line`."""
        return f"{self.sources[f.event.first.source].path}:{f.lineno()}"


# letters of scripts that programs' error messages are not written in (CJK, kana, hangul,
# full-width punctuation): a line that has them around an error's words is a person's
# sentence quoting it (an issue, a ticket, a chat), not the program's record. Compiled on
# first use (its character ranges cost about 4 ms of every start-up), and only an ASCII-free
# line can hold one.
PROSE = r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uff01-\uff5e\u3001\u3002]"


@lru_cache(maxsize=1)
def _prose() -> re.Pattern[str]:
    return re.compile(PROSE)


# a line that is a quotation: it opens with a quotation mark and closes with its pair (a
# JSON field, `"key": ...`, opens with a quoted name and is no quotation)
QUOTED = re.compile(r"""\s*(?:'(?!\w+'\s*:)[^\n]*'|"(?!\w+"\s*:)[^\n]*"|\u2018[^\n]*\u2019|\u201c[^\n]*\u201d|\u00ab[^\n]*\u00bb)[\s.,;:!?)]*$""")


def quotes(ev: Event) -> bool:
    """Is the event a person's sentence quoting an error (a one-line event, or an exception
    line alone, in another script around the error's words, or the whole line between
    quotation marks)?"""
    if not (ev.kind == "line" or ev.form == "alone"):
        return False
    head = ev.lines[0][:400]
    if head[:1] in "'\"\u2018\u201c\u00ab " and QUOTED.match(ev.lines[0][:2000]) is not None:
        return True
    return not head.isascii() and _prose().search(head) is not None
