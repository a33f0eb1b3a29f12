"""Collect findings while the input streams by, then name the root cause.

Memory: findings are merged per stream (a multi-line report is one finding), symptoms are
kept as per-rule aggregates (rank set, count, first occurrence) and causes are capped, so
the state grows with the number of ranks and distinct failures, not with the log's size.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Optional

from slurmdoc.diagnosis.attempts import Mark, attempt_of, boundaries, history, who
from slurmdoc.diagnosis.hang import Stall, by_sequence, find_stall
from slurmdoc.diagnosis.ranks import describe, parse_tasks, ranges, to_int
from slurmdoc.engine.loader import Rule
from slurmdoc.engine.matcher import Match
from slurmdoc.engine.template import evaluate, parse
from slurmdoc.ingest.prefix import LAUNCHER_MARKS
from slurmdoc.models import (
    Attempt,
    Diagnosis,
    Event,
    LauncherVerdict,
    RankActivity,
    RankProgress,
    RankRef,
    Remediation,
    RootCause,
    SourceInfo,
    Symptom,
)

MAX_CAUSES = 20_000
JOURNAL_MAX = 5_000  # findings kept to split the job into attempts (beyond: no split)
MAX_LAST = 50_000  # streams whose last finding is kept to merge multi-line reports
MAX_STREAMS_SEEN = 500_000
FRAME = re.compile(r'\s*File "([^"]+)", line (\d+)')
MASK = re.compile(r"0x[0-9a-fA-F]+|\d+")
OPTIONAL = re.compile(r"\[\[(.*?)\]\]")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
HANG_ENDINGS = ("time_limit", "cancelled")  # job-level endings that may hide a hung rank
EXIT_SIGNALS = {-9: "SIGKILL", -15: "SIGTERM", -6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS"}


@lru_cache(maxsize=4096)
def _template(field_: str):
    return parse(field_)


def fill_field(field_: str, values: dict) -> Optional[str]:
    """A placeholder's text: a value, or a helper computed from values (engine.template)."""
    if field_ in values:
        return str(values[field_])
    try:
        return evaluate(_template(field_), values)
    except (ValueError, TypeError, ArithmeticError):
        return None


@dataclass(eq=False)
class Finding:
    rule: Rule
    event: Event
    captures: dict[str, str]
    line_index: int
    refs: list[RankRef]  # who it is about; several for srun task lists
    node: Optional[str]

    @property
    def ts(self) -> Optional[datetime]:
        return self.event.ts

    @property
    def seq(self) -> int:
        return self.event.seq

    def _index(self) -> int:
        """The line that states the error: the matched line if it is an exception line,
        otherwise the traceback's originating exception."""
        ev = self.event
        idx = self.line_index
        if ev.kind == "traceback" and idx not in ev.exception_idx:
            idx = ev.origin()
        return min(idx, len(ev.lines) - 1)

    def message(self) -> str:
        return self.event.lines[self._index()].strip()[:1000]

    def lineno(self) -> int:
        return self.event.linenos[self._index()]

    def frame(self) -> Optional[str]:
        """file:line of the innermost Python frame before the reported exception line."""
        ev = self.event
        if ev.kind != "traceback":
            return None
        for text in reversed(ev.lines[: self._index()]):
            m = FRAME.match(text)
            if m:
                return f"{m.group(1)}:{m.group(2)}"
        return None


@dataclass
class _Group:
    first: Finding
    count: int = 0
    refs: dict = field(default_factory=dict)
    nodes: set = field(default_factory=set)


class Analyzer:
    def __init__(self, sources: list[SourceInfo], skew: float = 1.0, _part: bool = False) -> None:
        self.sources = sources
        # several attempts in one log (restarts, requeues): every finding is kept, bounded,
        # to be replayed into one analyzer per attempt (diagnosis.attempts)
        self._journal: Optional[list[tuple[Event, Match]]] = None if _part else []
        self._marks: list[Mark] = []
        self._part = _part
        self.skew = timedelta(seconds=skew)
        self.seen: dict[tuple, RankRef] = {}  # stream -> who (for ranks_seen and layout)
        self.causes: list[Finding] = []
        self.causes_dropped = 0
        self.streams_dropped = 0
        self.symptoms: dict[str, _Group] = {}
        self.contexts: list[Finding] = []
        self.categories: dict[str, Finding] = {}  # first finding of each category
        self.known_ranks: set[int] = set()  # ranks the text shows exist (launcher summaries)
        self.exits: list[Finding] = []  # findings of exit_evidence rules (non-zero exits), capped
        self.placements: dict[tuple[int, int, int], int] = {}  # (source, node index, local rank) -> rank
        self.named_locals: list[RankRef] = []  # local ranks named by launcher lines
        self._last: dict[tuple, Finding] = {}  # per stream: last finding, to merge reports
        self.seqs: dict[tuple, tuple[RankRef, int]] = {}  # rank -> collective it timed out in
        self.host_refs: list[tuple[RankRef, str, int]] = []  # (who, host, how sure) from srun lines, prefixes, summaries
        self.pid_ref: dict[tuple[int, str], RankRef] = {}  # (source, pid) -> the rank that process was
        self._node_host: dict[tuple[int, int], str] = {}  # (source, srun label of an agent) -> host
        self.agent_sources: set[int] = set()  # sources whose srun labels are torchrun agents (nodes)
        self.pid_findings: list[tuple[str, int, str]] = []  # (rule id, source, pid) of findings naming only a pid
        # the job's layout, worked out once the input has been read (_layout)
        self.nested_sources: set[int] = set()
        self.node_order: dict[int, int] = {}
        self.ranks_per_node: Optional[int] = None
        self.bad_hints: set[int] = set()
        self.multi_node = False
        self._total = 0

    # ---- streaming -------------------------------------------------------------
    def note_stream(self, stream: tuple, who: RankRef) -> None:
        if stream not in self.seen:
            if len(self.seen) >= MAX_STREAMS_SEEN:
                self.streams_dropped += 1
                return
            self.seen[stream] = who

    def add(self, event: Event, match: Match) -> None:
        rule = match.rule
        if self._journal is not None:
            if len(self._journal) < JOURNAL_MAX:
                self._journal.append((event, match))
            else:
                self._journal = None  # too many findings to replay: one attempt
        if (rule.spec.attempt_start or "attempt_end" in match.captures) and len(self._marks) < 10_000:
            first = event.first
            if rule.spec.attempt_start:
                self._marks.append(Mark(first.source, first.lineno, "start", (), to_int(match.captures.get("restart"))))
            else:
                self._marks.append(Mark(first.source, first.lineno, "end", (first.who.label, match.captures["attempt_end"])))
        stream = event.first.stream
        prev = self._last.get(stream)
        if (
            prev is not None
            and prev.rule is rule
            and event.kind == "line"
            and prev.event.kind == "line"
            and prev.captures.get("node") == match.captures.get("node")  # srun lines about other hosts stay apart
        ):
            # one multi-line report (e.g. NCCL watchdog + its C++ trace): one finding, but
            # every rank it names counts (srun prints `tasks 0-3` and `tasks 4-7` in a row)
            refs = self._refs(event, match)
            self._note_seq(refs, match.captures)
            self._note_hosts(event, match, refs)
            known = {r.key() for r in prev.refs}
            prev.refs.extend(r for r in refs if r.key() not in known)
            g = self.symptoms.get(rule.id)
            if g is not None:
                for r in refs:
                    if len(g.refs) < MAX_STREAMS_SEEN:
                        g.refs.setdefault(r.key(), r)
            return
        who = event.first.who
        if event.kind == "traceback" and who.label is not None and who.rank is None and who.local is None and len(self.agent_sources) < 10_000:
            # the launcher's own traceback (torchrun's) under an srun label: that label is a
            # node's agent, not a rank, even when no worker ever printed under it
            if any(mark in line for line in event.lines[:60] for mark in LAUNCHER_MARKS):
                self.agent_sources.add(event.first.source)
        f = Finding(rule, event, match.captures, match.line_index, self._refs(event, match), self._node(event, match))
        if len(self._last) >= MAX_LAST:
            # bounded memory whatever the number of printers: a report is merged with the
            # previous line of its stream; past this many streams, start over
            self._last.clear()
        self._last[stream] = f
        self._note_seq(f.refs, match.captures)
        self._note_hosts(event, match, f.refs)
        for r in f.refs:
            if r.local is not None and len(self.named_locals) < 100_000:
                self.named_locals.append(r)  # local ranks a launcher names count for the layout
        caps = match.captures
        who = event.first.who
        node_idx = who.label if who.label is not None else who.node_index
        grank, lrank = to_int(caps.get("rank")), to_int(caps.get("local_rank"))
        if node_idx is not None and grank is not None and lrank is not None and len(self.placements) < 100_000:
            # a launcher summary says which global rank a node's local rank was
            self.placements[(event.first.source, node_idx, lrank)] = grank
        if match.known_ranks and len(self.known_ranks) < 1_000_000:
            self.known_ranks.update(match.known_ranks)
        self.categories.setdefault(rule.category, f)
        role = rule.role
        if role == "cause":
            if len(self.causes) < MAX_CAUSES:
                self.causes.append(f)
            else:
                self.causes_dropped += 1
        elif role == "symptom":
            g = self.symptoms.get(rule.id)
            if g is None:
                g = self.symptoms[rule.id] = _Group(f)
            elif self._before(f, g.first):
                g.first = f  # by time where lines carry one: the same whatever the interleaving
            g.count += 1
            for r in f.refs:
                if len(g.refs) < MAX_STREAMS_SEEN:  # as many ranks as ranks_seen counts
                    g.refs.setdefault(r.key(), r)
            if f.node:
                g.nodes.add(f.node)
            if rule.spec.exit_evidence and len(self.exits) < 1000:
                self.exits.append(f)
        else:
            if len(self.contexts) < 1000:
                self.contexts.append(f)
            if rule.spec.exit_evidence and len(self.exits) < 1000 and self._nonzero(f):
                self.exits.append(f)

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
        if first.node and first.origin == "rank":
            self.host_refs.append((first.who, first.node, 2))
        for e in match.entries:
            r = to_int(e.get("rank"))
            if r is None:
                continue
            ref = RankRef(src, rank=r)
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

    def _hosts(self) -> dict[int, str]:
        """rank -> host, the surest evidence first; under `srun torchrun` srun's task ids are
        nodes, so their host goes to every rank printed under that srun label."""
        best: dict[int, tuple[int, str]] = {}
        node_host: dict[tuple[int, int], tuple[int, str]] = {}
        for ref, host, sure in self.host_refs:
            if ref.label is not None and ref.rank is None and ref.local is None and ref.source in self.nested_sources:
                if (ref.source, ref.label) not in node_host or sure > node_host[(ref.source, ref.label)][0]:
                    node_host[(ref.source, ref.label)] = (sure, host)
                continue
            r = self.resolve(ref)
            if r is not None and (r not in best or sure > best[r][0]):
                best[r] = (sure, host)
        if node_host:
            for ref in self.seen.values():
                got = node_host.get((ref.source, ref.label)) if ref.label is not None else None
                r = self.resolve(ref) if got is not None else None
                if got is not None and r is not None and (r not in best or got[0] > best[r][0]):
                    best[r] = got
        self._node_host = {k: h for k, (_, h) in node_host.items()}
        return {r: h for r, (_, h) in best.items()}

    def _pids_to_ranks(self) -> None:
        """Findings that name only a process id (`Sending process P closing signal SIGTERM`)
        count for the rank that process was, when a launcher line or summary says so."""
        for rule_id, src, pid in self.pid_findings:
            ref = self.pid_ref.get((src, pid))
            g = self.symptoms.get(rule_id)
            if ref is None or g is None:
                continue
            r = self.resolve(ref)
            if r is not None:
                g.refs.setdefault(("pid", src, r), RankRef(src, rank=r))

    def _refs(self, event: Event, match: Match) -> list[RankRef]:
        who = event.first.who
        caps = match.captures
        src = event.first.source
        if "tasks" in caps:
            # srun task ids live in the same space as srun --label: global ranks for
            # srun-native launches, node indexes when srun starts one torchrun per node
            return [RankRef(src, label=t) for t in parse_tasks(caps["tasks"])[:100_000]]
        if (rank := to_int(caps.get("rank"))) is not None and rank >= 0:
            return [RankRef(src, rank=rank)]
        if (local := to_int(caps.get("local_rank"))) is not None and local >= 0:
            return [RankRef(src, label=who.label, local=local, node_index=who.node_index)]
        if match.rule.spec.attribution == "text" or event.first.origin in ("launcher", "scheduler"):
            return []
        return [who]

    @staticmethod
    def _node(event: Event, match: Match) -> Optional[str]:
        return match.captures.get("node") or event.first.node

    # ---- layout: turning prefixes into global ranks -----------------------------
    def _layout(self) -> None:
        refs = list(self.seen.values())
        # srun labels are node indexes when srun started one torchrun per node: the inner
        # prefix then names another rank than the label, or a local rank. (srun-native jobs
        # print `3: [rank3]:`, label and rank agreeing.)
        self.nested_sources = {
            r.source for r in refs if r.label is not None and (r.local is not None or (r.rank is not None and r.rank != r.label))
        } | self.agent_sources
        # per-node files named after hosts (slurm-node017.out): number the nodes 0, 1, ...
        self.node_order = {n: i for i, n in enumerate(sorted({r.node_index for r in refs if r.node_index is not None}))}
        # ranks per node: stated by a launcher summary, else inferred from the local ranks
        # seen, but only when every node shows the same complete set (a --local-ranks-filter
        # run shows a few local ranks and would give wrong global ranks)
        per_node: dict[tuple[int, int], set[int]] = {}
        for r in refs + self.named_locals:
            node = self._node_of(r)
            if r.local is not None and node is not None:
                per_node.setdefault((r.source, node), set()).add(r.local)
        sets = list(per_node.values())
        full = bool(sets) and all(s == set(range(len(s))) for s in sets) and len({len(s) for s in sets}) == 1
        locals_ = [r.local for r in refs if r.local is not None]
        self.ranks_per_node = (max(locals_) + 1) if locals_ and (full or not sets) else None
        for (_, node, loc), rank in self.placements.items():
            if node > 0 and (rank - loc) % node == 0 and (rank - loc) // node > loc:
                self.ranks_per_node = (rank - loc) // node  # stated by the launcher: trust it
                break
        # a file named after one rank whose lines carry other ranks' prefixes is not per-rank
        hinted = {r.source: r.rank if r.rank is not None else r.local for r in refs if r.hinted}
        self.bad_hints = {
            r.source for r in refs if not r.hinted and r.source in hinted and (r.rank is not None or r.local is not None)
            and (r.rank if r.rank is not None else r.local) != hinted[r.source]
        }
        node_ids = {r.label for r in refs if r.label is not None and r.source in self.nested_sources}
        node_ids |= {r.node_index for r in refs if r.node_index is not None}
        self.multi_node = len(node_ids) > 1

    def _node_of(self, r: RankRef) -> Optional[int]:
        if r.label is not None:
            return r.label
        if r.node_index is not None:
            return self.node_order.get(r.node_index, r.node_index)
        return None

    def resolve(self, r: RankRef) -> Optional[int]:
        if r.hinted and r.source in self.bad_hints:
            return None
        if r.rank is not None:
            return r.rank
        if r.local is not None:
            raw_node = r.label if r.label is not None else r.node_index
            if raw_node is not None and (r.source, raw_node, r.local) in self.placements:
                return self.placements[(r.source, raw_node, r.local)]
            node = self._node_of(r)
            if node == 0:
                return r.local
            if node is not None and self.ranks_per_node:
                return node * self.ranks_per_node + r.local
            if not self.multi_node:
                return r.local
            return None
        if r.label is not None and r.source not in self.nested_sources:
            return r.label
        return None

    def _ranks(self, refs) -> list[int]:
        out = {self.resolve(r) for r in refs}
        out.discard(None)
        return sorted(out)  # type: ignore[arg-type]

    # ---- ordering -------------------------------------------------------------
    @staticmethod
    def _before(a: Finding, b: Finding) -> bool:
        """Did `a` happen before `b`? By time when both carry one, else by position."""
        if a.ts is not None and b.ts is not None and a.ts != b.ts:
            return a.ts < b.ts
        return a.seq < b.seq

    def _earliest(self, cands: list[Finding]) -> Finding:
        ordered = sorted(cands, key=lambda f: f.seq)
        first = ordered[0]
        for f in ordered[1:]:
            if self._before(f, first):
                first = f
        if first.ts is None:
            return first
        timed = [f for f in cands if f.ts is not None]
        # clock skew: a more specific cause from another stream within the skew window wins
        rivals = [
            f
            for f in timed
            if f.event.first.stream != first.event.first.stream
            and f.ts <= first.ts + self.skew  # type: ignore[operator]
            and f.rule.spec.priority > first.rule.spec.priority
            and f.rule.category not in first.rule.spec.refine_with  # that one refines `first` instead
        ]
        if rivals:
            return min(rivals, key=lambda f: (-f.rule.spec.priority, f.ts, f.seq))
        return first

    # ---- the result -----------------------------------------------------------
    def finish(self, lines_read: int, inputs: tuple[str, ...], warnings: list[str], activity: Optional[list[RankActivity]] = None) -> Diagnosis:
        if not self._part and self._journal is not None:
            split = self._attempts(lines_read, inputs, warnings, activity)
            if split is not None:
                return split
        self._layout()
        all_ranks = sorted(set(self._ranks(self.seen.values())) | self.known_ranks)
        total = len(all_ranks)
        self._total = total
        rank_host = self._hosts()
        self._pids_to_ranks()

        root: Optional[Finding] = None
        promoted = False
        stragglers: list[int] = []
        ended_by: Optional[Finding] = None
        if self.causes:
            root = self._earliest(self.causes)
            deferred = self._deferred(root, all_ranks)
            if deferred is not None:
                ended_by = root
                root, stragglers = deferred
                promoted = True
        elif self.symptoms or self.exits:
            root, stragglers = self._promote(all_ranks)
            promoted = True

        stall: Optional[Stall] = None
        acts: dict[int, RankActivity] = {}
        if root is not None and self._hang_like(root, promoted):
            acts = self._activity_by_rank(activity or [])
            stall = self._stall(root, stragglers, all_ranks, acts)
            if stall is not None and stall.kind != "known":
                stragglers = stall.ranks

        root_model: Optional[RootCause] = None
        root_group_key = None
        if root is not None:
            root_model, root_group_key = self._root_model(root, promoted, total, all_ranks, rank_host, stragglers, ended_by, stall)

        symptoms = self._symptoms(root, root_group_key, set(root_model.ranks) if root_model else set())
        verdicts = self._verdicts(root_model)
        if self.streams_dropped:
            warnings.append(f"more than {MAX_STREAMS_SEEN} distinct printers: ranks_seen counts the first {MAX_STREAMS_SEEN}")
        if self.causes_dropped:
            warnings.append(f"{self.causes_dropped} further cause findings were counted but not kept")
        verdict = self._verdict_line(root_model, symptoms, total)
        return Diagnosis(
            status="failed" if root_model is not None else "no_failure",
            root_cause=root_model,
            symptoms=tuple(symptoms),
            ranks_seen=total,
            verdict=verdict,
            inputs=inputs,
            lines_read=lines_read,
            warnings=tuple(warnings),
            launcher_verdicts=tuple(verdicts),
            progress=self._progress(acts),
        )

    # ---- several attempts in one log ---------------------------------------------
    def _attempts(self, lines_read: int, inputs: tuple[str, ...], warnings: list[str], activity: Optional[list[RankActivity]]) -> Optional[Diagnosis]:
        """One diagnosis per attempt when the log holds several; the last one's, with the
        history of all, is the job's."""
        journal = self._journal or []
        hinted = {s.index: s.attempt for s in self.sources if s.attempt is not None}
        bounds: dict[int, list[int]] = {}
        if self._marks:
            failures: dict[int, list[int]] = {}
            closers: dict[int, list[int]] = {}
            for ev, m in journal:
                if m.rule.spec.launcher_verdict or m.rule.spec.exit_evidence:
                    # a launcher's summary or a process's exit status: the job was failing
                    closers.setdefault(ev.first.source, []).append(ev.first.lineno)
                # what makes an attempt: a failure a worker printed, or a cause that ends the
                # attempt itself (a requeue); a launcher's or Slurm's other lines about a
                # failure, such as an OOM-kill notice, belong to the attempt they end
                if (m.rule.role in ("cause", "symptom") and ev.first.origin in ("rank", "unknown")) or (m.rule.role == "cause" and "attempt_end" in m.captures):
                    failures.setdefault(ev.first.source, []).append(ev.first.lineno)
            ran: dict[int, list[int]] = {}
            for a in activity or []:
                ran.setdefault(a.source, []).append(a.lineno)
            bounds = boundaries(self._marks, {k: sorted(v) for k, v in failures.items()}, {k: sorted(v) for k, v in ran.items()}, closers)
        if not bounds and len(set(hinted.values())) < 2:
            return None
        bounds = {k: v for k, v in bounds.items() if k not in hinted}

        def index(ev: Event) -> int:
            src = ev.first.source
            return hinted[src] if src in hinted else attempt_of(bounds, src, ev.first.lineno)

        n = max([index(ev) for ev, _ in journal] + [len(b) for b in bounds.values()] + list(hinted.values())) + 1
        parts = [Analyzer(self.sources, skew=self.skew.total_seconds(), _part=True) for _ in range(n)]
        for p in parts:
            p.seen = self.seen
        for ev, m in journal:
            parts[index(ev)].add(ev, m)
        diags = [p.finish(lines_read, inputs, warnings if i == n - 1 else [], activity if i == n - 1 else None) for i, p in enumerate(parts)]
        starts: dict[int, list[str]] = {}
        for src, b in bounds.items():
            for k, line in enumerate(b, 1):
                starts.setdefault(k, []).append(f"{self.sources[src].path}:{line}")
        attempts = []
        items = []
        for k, d in enumerate(diags):
            rc = d.root_cause
            w = "" if rc is None or (rc.job_level and rc.rank is None) else who(rc.rank, rc.ranks, d.ranks_seen, rc.all_ranks)
            items.append((rc.category if rc is not None else None, w))
            attempts.append(
                Attempt(
                    index=k,
                    status=d.status,
                    category=rc.category if rc else None,
                    rank=rc.rank if rc else None,
                    ranks=rc.ranks if rc else (),
                    source=rc.source if rc else None,
                    message=rc.message[:300] if rc else None,
                    starts_at=(starts.get(k) or [None])[0],
                    verdict=d.verdict,
                )
            )
        hist = history(items)
        last = diags[-1]
        return last.model_copy(update={"attempts": tuple(attempts), "history": hist, "verdict": f"{hist}. Last attempt: {last.verdict}"})

    # ---- hangs: the rank that stopped first -------------------------------------
    @staticmethod
    def _hang_like(root: Finding, promoted: bool) -> bool:
        """A job that ended without an error of its own: time limit, cancellation, or a
        collective timeout that leads because nothing else failed."""
        if root.rule.category in HANG_ENDINGS and root.rule.role == "cause":
            return True
        return promoted and root.rule.spec.missing_rank_is_root

    def _activity_by_rank(self, activity: list[RankActivity]) -> dict[int, RankActivity]:
        out: dict[int, RankActivity] = {}
        for a in activity:
            r = self.resolve(a.who)
            if r is None:
                continue
            have = out.get(r)
            if have is None:
                out[r] = a
                continue
            # one rank seen in several streams (a prefix and a per-rank file): keep the
            # busier record, and the later mark of each progress marker
            keep, other = (have, a) if have.lines >= a.lines else (a, have)
            merged = RankActivity(keep.who, keep.source, keep.lineno, keep.text, keep.line_ts, max((t for t in (keep.last_ts, other.last_ts) if t is not None), default=None), keep.lines + other.lines, dict(other.progress))
            for mid, m in keep.progress.items():
                o = merged.progress.get(mid)
                if o is None or (m.ts or datetime.min, m.source, m.lineno) >= (o.ts or datetime.min, o.source, o.lineno):
                    merged.progress[mid] = m
            out[r] = merged
        return out

    def _stall(self, root: Finding, stragglers: list[int], all_ranks: list[int], acts: dict[int, RankActivity]) -> Optional[Stall]:
        def where(src: int, lineno: int) -> str:
            return f"{self.sources[src].path}:{lineno}"

        if not stragglers and root.rule.category in HANG_ENDINGS:
            # a collective timeout the others reported before the job was stopped
            for g in self.symptoms.values():
                missing = self._stragglers(g, all_ranks)
                if missing and g.first.rule.spec.root_if_alone:
                    reporters = self._ranks(g.refs.values())
                    st = find_stall(acts, where, only=missing) or Stall(missing, reporters, "known")
                    st.kind = "collective"
                    st.others = reporters
                    st.evidence.insert(0, f"{describe(reporters)} reported {g.first.rule.spec.title.lower()} (first at {self._src(g.first)}); {describe(missing)} never did")
                    st.values.setdefault("progress", st.evidence[0])
                    return st
        if stragglers:
            return find_stall(acts, where, only=stragglers)
        positions: dict[int, int] = {}
        for ref, pos in self.seqs.values():
            r = self.resolve(ref)
            if r is not None:
                positions[r] = min(pos, positions.get(r, pos))
        st = by_sequence(positions, {})
        if st is not None:
            known = find_stall(acts, where, only=st.ranks)
            if known is not None:
                st.evidence.extend(known.evidence)
                st.values.update({k: v for k, v in known.values.items() if k != "progress"})
            return st
        return find_stall(acts, where)

    def _progress(self, acts: dict[int, RankActivity]) -> tuple[RankProgress, ...]:
        out = []
        for r in sorted(acts)[:4096]:
            a = acts[r]
            mark = max(a.progress.values(), key=lambda m: (m.ts or datetime.min, m.source, m.lineno), default=None)
            out.append(
                RankProgress(
                    rank=r,
                    last_source=f"{self.sources[a.source].path}:{a.lineno}",
                    last_time=a.last_ts.isoformat() if a.last_ts else None,
                    last_line=a.text.strip(),
                    step=mark.step if mark else None,
                    epoch=mark.epoch if mark else None,
                    unit=mark.label if mark else None,
                    step_source=f"{self.sources[mark.source].path}:{mark.lineno}" if mark else None,
                    step_time=mark.ts.isoformat() if mark and mark.ts else None,
                )
            )
        return tuple(out)

    def _promote(self, all_ranks: list[int]) -> tuple[Finding, list[int]]:
        """No cause-role finding: pick the most telling symptom.

        1. A rank that exited with an error and left nothing else in this log (its output
           went elsewhere, or was filtered) is the likeliest origin of everyone else's echoes.
        2. Otherwise the earliest symptom that may stand alone (a collective timeout); for
           rules that say so, the few ranks that never reported it are named as stragglers.
        3. Otherwise the earliest symptom of any kind.
        """
        echoed: set[int] = set()
        for g in self.symptoms.values():
            if not g.first.rule.spec.exit_evidence:
                echoed.update(self._ranks(g.refs.values()))
        silent = [f for f in self.exits if (rs := self._ranks(f.refs)) and not set(rs) & echoed]
        if silent:
            # the exit line itself before a launcher's summary that repeats it
            lines = [f for f in silent if f.rule.role != "context"]
            return self._earliest(lines or silent), []
        alone = [g for g in self.symptoms.values() if g.first.rule.spec.root_if_alone and not g.first.rule.spec.exit_evidence]
        if alone:
            root = self._earliest([g.first for g in alone])
            g = next(x for x in alone if x.first is root)
            named = to_int(root.captures.get("straggler"))
            if named is not None and named >= 0:
                return root, [named]  # the text names the rank the others waited for
            return root, self._stragglers(g, all_ranks)
        if self.symptoms:
            return self._earliest([g.first for g in self.symptoms.values()]), []
        # nothing but a launcher's summary of non-zero exits (e.g. only torchrun's output)
        return self._earliest(self.exits), []

    def _stragglers(self, g: _Group, all_ranks: list[int]) -> list[int]:
        """The few known ranks that did not report what (nearly) all others did."""
        if not g.first.rule.spec.missing_rank_is_root:
            return []
        reporters = set(self._ranks(g.refs.values()))
        missing = [r for r in all_ranks if r not in reporters]
        if reporters and 0 < len(missing) <= max(1, len(all_ranks) // 8):
            return missing
        return []

    def _deferred(self, root: Finding, all_ranks: list[int]) -> Optional[tuple[Finding, list[int]]]:
        """A cause that only ends a straggler (Slurm killing the hung rank after everyone
        else timed out waiting for it) yields to the straggler finding."""
        if not root.rule.spec.defer_to_straggler:
            return None
        own = set(self._ranks(root.refs))
        for g in self.symptoms.values():
            stragglers = self._stragglers(g, all_ranks)
            if stragglers and own and own <= set(stragglers) and self._before(g.first, root):
                return g.first, stragglers
        return None

    def _named_elsewhere(self, root: Finding) -> Optional[tuple[int, Finding]]:
        """The one rank that other evidence of this failure names: findings of the same
        category, or processes that exited with an error. None when they name 0 or 2+."""
        found: dict[int, Finding] = {}
        # srun under torchrun: srun's task ids are the torchrun agents (nodes), not ranks;
        # when a torchrun line names the local rank, srun's task list says nothing more
        torchrun = {f.event.first.source for f in self.exits if "local_rank" in f.captures}
        for f in self.causes + self.exits:
            if f is root or (f.rule.category != root.rule.category and not f.rule.spec.exit_evidence):
                continue
            if "tasks" in f.captures and f.event.first.source in torchrun:
                continue
            for r in self._ranks(f.refs):
                found.setdefault(r, f)
        if len(found) == 1:
            return next(iter(found.items()))
        return None

    @staticmethod
    def _nonzero(f: Finding) -> bool:
        code = f.captures.get("exitcode", "")
        return to_int(code) not in (None, 0)

    def _group_key(self, f: Finding) -> tuple:
        return (f.rule.id, MASK.sub("#", f.message()))

    def _root_model(self, root: Finding, promoted: bool, total: int, all_ranks: list[int], rank_host: dict[int, str], stragglers: list[int], ended_by: Optional[Finding] = None, stall: Optional[Stall] = None):
        key = self._group_key(root)
        group = [f for f in self.causes if self._group_key(f) == key] if not promoted else [root]
        ranks = self._ranks(r for f in group for r in f.refs)
        own = self._ranks(root.refs)
        rank = own[0] if own else None
        evidence: list[str] = []
        reporters: list[int] = []
        if stragglers:
            if stall is not None and stall.kind != "known":
                reporters = stall.others
                evidence.extend(stall.evidence)
            else:
                reporters = self._ranks(self.symptoms[root.rule.id].refs.values()) if root.rule.id in self.symptoms else []
                evidence.append(
                    f"{describe(reporters)} reported it (first at {self._src(root)}); {describe(stragglers)} never did"
                )
                if stall is not None:
                    evidence.extend(stall.evidence)
            ranks = stragglers
            rank = stragglers[0]
            if ended_by is not None:
                evidence.append(f"then {self._src(ended_by)}: {ended_by.message()[:200]}")
        if promoted and not stragglers and root.rule.spec.missing_rank_is_root and own:
            # the reporters of a timeout are not its cause; no rank stalled visibly
            evidence.append(f"reported by {describe(own)}; the rank they waited for is not named in the log")
            rank, ranks = None, []
        elif rank is None and not stragglers and len(group) == 1:
            # the error text names no rank (printed before torch set up its prefix, or by
            # native code): take it from the exit evidence when that names exactly one
            named = self._named_elsewhere(root)
            if named is not None:
                rank, by = named
                ranks = [rank]
                evidence.append(f"rank {rank} from {self._src(by)}: {by.message()[:200]}")
        node = root.node or (rank_host.get(rank) if rank is not None else None)
        if node is None and rank is None and root.event.first.who.label is not None:
            node = self._node_host.get((root.event.first.source, root.event.first.who.label))  # an agent's node
        if stragglers and rank is not None:
            # the straggler's own host, not the host of the line that revealed it (a
            # reporter's prefix, the job's batch host in a CANCELLED line)
            hosts = set(rank_host.values())
            node = rank_host.get(rank) or (root.node if len(hosts) <= 1 and (not hosts or root.node in hosts or root.rule.spec.attribution == "text") else None)
        rule = root.rule
        caps = dict(root.captures)
        # refine: a bare SIGKILL next to OOM-killer evidence is a host OOM, and so on
        for cat in rule.spec.refine_with:
            other = self.categories.get(cat)
            if other is not None and other is not root:
                evidence.append(f"{self._src(other)}: {other.message()}")
                for k, v in other.captures.items():
                    caps.setdefault(k, v)
                rule = other.rule
                break
        # context that explains this kind of failure (NCCL on TCP sockets behind a timeout)
        explained = [f for f in self.contexts if rule.category in f.rule.spec.explains][:3]
        for f in explained:
            evidence.append(f"{self._src(f)}: {f.message()[:200]}")
        frame = root.frame() if not stragglers else None  # the reporter's frame says nothing of the straggler
        if frame:
            caps.setdefault("frame", frame)
        rem = self._remediation(
            rule, caps, rank=rank, ranks=ranks, node=node, source=self._src(root), message=root.message(), count=len(group),
            stragglers=ranges(stragglers) if stragglers else None, reporters=ranges(reporters) if reporters else None,
            progress=stall.values.get("progress") if stall else None, last_line=stall.values.get("last_line") if stall else None,
        )
        for f in explained:
            extra = self._remediation(f.rule, dict(f.captures), rank=rank, ranks=ranks, node=node, source=self._src(f), message=f.message(), count=1)
            rem = rem.model_copy(update={"fix": rem.fix + (extra.summary,) + extra.fix})
        processes = len(group)
        every = False
        if not ranks and processes > 1 and processes == total:
            ranks = list(all_ranks)  # as many identical failures as the job has ranks: all of them
            every = True
        elif not ranks and processes > 1 and total == 0:
            # no prefixes at all (per-node files), but the scheduler names the tasks that
            # failed: as many identical errors as failed tasks means every one of them
            failed = sorted({r for f in self.exits if self._nonzero(f) for r in self._ranks(f.refs)})
            if len(failed) == processes:
                ranks, every = failed, True
        ev = root.event
        tb = tuple(ev.lines)
        model = RootCause(
            category=rule.category,
            rule_id=rule.id,
            rank=rank,
            node=node,
            source=self._src(root),
            message=root.message(),
            traceback=tb,
            timestamp=root.ts.isoformat() if root.ts else None,
            remediation=rem.as_text(),
            title=rule.spec.title,
            ranks=tuple(ranks),
            all_ranks=(total > 1 and len(ranks) == total) or (every and len(ranks) > 1),
            remediation_parts=rem,
            captures={k: v for k, v in sorted(caps.items())},
            evidence=tuple(evidence),
            promoted=promoted,
            frame=frame,
            processes=processes,
            stragglers=tuple(stragglers),
            job_level=rank is None and not ranks and rule.spec.attribution == "text",
            traceback_lines_dropped=ev.truncated,
        )
        return model, key

    def _src(self, f: Finding) -> str:
        return f"{self.sources[f.event.first.source].path}:{f.lineno()}"

    def _remediation(self, rule: Rule, caps: dict[str, str], **builtins) -> Remediation:
        values = {k: v for k, v in builtins.items() if v is not None and v != []}
        values["ranks"] = describe(values["ranks"], self._total) if "ranks" in values else "a process (rank unknown)"
        values.update({k: v for k, v in caps.items() if v is not None})

        def fill(text: str, drop_if_missing: bool) -> Optional[str]:
            out = []
            for lit, name, spec, conv in string.Formatter().parse(text):
                out.append(lit)
                if name is None:
                    continue
                got = fill_field(name, values)
                if got is not None:
                    out.append(got)
                elif drop_if_missing:
                    return None
                else:
                    out.append("?")
            return "".join(out).strip()

        def fill_text(text: str) -> str:
            # [[ ... ]] is left out when a placeholder inside it has no value
            text = OPTIONAL.sub(lambda m: fill(m.group(1), True) is not None and m.group(1) or "", text)
            done = fill(text, False) or ""
            return done[:1].upper() + done[1:]

        spec = rule.spec.remediation
        def fill_fix(text: str) -> Optional[str]:
            # [[ ... ]] is left out when a value inside is missing; any other missing value
            # drops the whole line
            text = OPTIONAL.sub(lambda m: fill(m.group(1), True) is not None and m.group(1) or "", text)
            return fill(text, True)

        fixes = [t for t in (fill_fix(x) for x in spec.fix) if t]
        summary = spec.straggler if (spec.straggler and "stragglers" in values) else spec.summary
        return Remediation(summary=fill_text(summary), why=fill_text(spec.why) if spec.why else None, fix=tuple(fixes))

    def _symptoms(self, root: Optional[Finding], root_key, root_ranks: set[int]) -> list[Symptom]:
        out: list[Symptom] = []
        # other causes that are not the root: they happened, but after it
        by_rule: dict[str, _Group] = {}
        for f in self.causes:
            if f is root or (root_key is not None and self._group_key(f) == root_key):
                continue
            g = by_rule.get(f.rule.id)
            if g is None:
                g = by_rule[f.rule.id] = _Group(f)
            g.count += 1
            for r in f.refs:
                g.refs.setdefault(r.key(), r)
            if f.node:
                g.nodes.add(f.node)
        groups = list(by_rule.items()) + [
            (rid, g) for rid, g in self.symptoms.items() if not (root is not None and g.first is root and g.count == 1)
        ]
        for rid, g in groups:
            ranks = self._ranks(g.refs.values())
            f = g.first
            if f.rule.spec.exit_evidence and ranks and set(ranks) <= root_ranks:
                continue  # the root rank's own exit status, reported by its launcher
            out.append(
                Symptom(
                    category=f.rule.category,
                    rule_id=rid,
                    ranks=tuple(ranks),
                    count=g.count,
                    first_source=self._src(f),
                    title=f.rule.spec.title,
                    role=f.rule.role,
                    rank_ranges=ranges(ranks),
                    nodes=tuple(sorted(g.nodes)[:64]),
                    message=f.message()[:300],
                )
            )
        out.sort(key=lambda s: (0 if s.role == "cause" else 1, -len(s.ranks), -s.count, s.rule_id))
        return out

    def _verdicts(self, root: Optional[RootCause]) -> list[LauncherVerdict]:
        out = []
        by_rank: dict[int, list[tuple[str, str, str]]] = {}  # rank -> (role, category, title) of its own findings
        if any(f.rule.spec.launcher_verdict for f in self.contexts):
            for f in self.causes:
                for r in self._ranks(f.refs):
                    by_rank.setdefault(r, []).append((f.rule.role, f.rule.category, f.rule.spec.title))
            for g in self.symptoms.values():
                if g.first.rule.spec.exit_evidence or g.first.event.first.origin != "rank":
                    continue  # a launcher's or Slurm's line about the rank, not the rank's own output
                for r in self._ranks(g.refs.values()):
                    by_rank.setdefault(r, []).append((g.first.rule.role, g.first.rule.category, g.first.rule.spec.title))
        for f in self.contexts:
            if not f.rule.spec.launcher_verdict:
                continue
            ranks = self._ranks(f.refs)
            rank = ranks[0] if ranks else None
            code = f.captures.get("exitcode")
            exitcode = to_int(code)
            agrees: Optional[bool] = None
            if root is not None and rank is not None and root.rank is not None:
                agrees = rank == root.rank or rank in root.ranks
                if root.promoted and not agrees and not root.stragglers:
                    agrees = None  # no error text in the log to hold against the launcher
            sig = EXIT_SIGNALS.get(exitcode or 0)
            what = f"exitcode {exitcode}" + (f" ({sig})" if sig else "") if exitcode is not None else "unknown exit"
            if agrees is False:
                assert root is not None
                why = ""
                if sig in ("SIGTERM", "SIGKILL"):
                    why = f"{what} means it was killed, by the launcher or Slurm, after another failure"
                else:
                    mine = by_rank.get(rank, [])  # type: ignore[arg-type]
                    if mine and all(role == "symptom" for role, _, _ in mine):
                        _, cat, title = mine[0]
                        why = f"it only printed {cat} ({title[:1].lower() + title[1:]}), an echo of another rank's failure"
                first = (
                    f"rank {root.rank} stalled first (the straggler the others waited for)"
                    if root.stragglers
                    else f"rank {root.rank} failed first ({root.category} at {root.source})"
                )
                note = f"named rank {rank} ({what}) as the first failure; that rank was a downstream symptom: " + (f"{why}; " if why else "") + first
            elif agrees:
                note = f"named rank {rank} ({what}), in agreement with the log"
            else:
                note = f"named rank {rank} ({what})"
            out.append(LauncherVerdict(source=self._src(f), node=f.node, rank=rank, exitcode=exitcode, agrees=agrees, note=note, first_failure=root.rank if agrees is False and root is not None else None))
        return out

    @staticmethod
    def _verdict_line(root: Optional[RootCause], symptoms: list[Symptom], total: int) -> str:
        if root is None:
            return f"No failure found ({total} ranks seen)."
        if root.stragglers:
            who = f"{describe(root.stragglers)} (straggler)"
        elif len(root.ranks) > 1:
            who = describe(root.ranks, total)
        elif root.rank is not None:
            who = f"rank {root.rank}"
        elif root.processes > 1:
            who = f"{root.processes} processes alike (ranks not shown in the log)"
        elif root.job_level:
            who = "the whole job"
        else:
            who = "an unknown rank"
        where = (f" ({root.node})" if root.job_level else f" on {root.node}") if root.node else ""
        head = f"{root.category} on {who}{where} at {root.source}"
        if root.promoted:
            head = f"No root-cause error found; earliest failure evidence: {head}"
        sym = [s for s in symptoms if s.role != "context"]
        if sym:
            own = set(root.ranks) | ({root.rank} if root.rank is not None else set())
            affected = {r for s in sym for r in s.ranks} - own
            parts = ", ".join(f"{s.category} x{s.count}" for s in sym[:4])
            others = f"{len(affected)} other rank{'s' if len(affected) != 1 else ''}" if affected else "the launcher"
            head += f"; {others} then failed or showed symptoms ({parts}{', ...' if len(sym) > 4 else ''})"
        return head + "."
