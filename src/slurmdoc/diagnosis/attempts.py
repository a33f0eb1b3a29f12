"""Several attempts of one job in one log: torchrun restarts, Slurm requeues.

A restarting launcher ends each attempt with a line of its own (torchrun's `failed
(exitcode: 1) local_rank: 0 ...`, printed once per attempt by each node's agent after its
workers have exited; Slurm's `CANCELLED ... DUE TO JOB REQUEUE`), and a new attempt may
announce itself (`restart_count=1`, `SLURM_RESTART_COUNT=2`). Rules mark such lines (a
capture group `attempt_end` holding the launcher's identity, or `attempt_start: true` with
an optional `restart` number); this module turns the marks into line boundaries, per input.

Attempt k of a multi-node torchrun ends when the last agent has reported it (the next
attempt cannot start before every agent re-joined the rendezvous), so per input the k-th
boundary is after the latest of the agents' k-th end lines, and only when some launcher
ended a later attempt too (without a start mark, a launcher's last end is the job's end). Boundaries that separate
nothing (no failure before them: start-up banners, a first `restart_count=0`) are dropped,
and so is a last boundary followed by no failure and no sign of a new run (only the
launcher's closing summary).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Optional

from slurmdoc.diagnosis.ranks import describe


@dataclass(frozen=True)
class Mark:
    source: int
    lineno: int
    kind: str  # "start" | "end"
    agent: tuple  # who ended the attempt (one launcher process); starts: ()
    restart: Optional[int] = None


def boundaries(
    marks: list[Mark],
    failures: dict[int, list[int]],
    after_ok: dict[int, list[int]],
    closers: Optional[dict[int, list[int]]] = None,
) -> dict[int, list[int]]:
    """Per source, the sorted first lines of attempts 1, 2, ...

    `failures`: per source, sorted line numbers of failure findings (causes, symptoms).
    `after_ok`: per source, sorted line numbers that show a run going on (ranks' last
    lines); a last attempt with no failure counts when it begins with a start mark, or
    when ranks printed in it and nothing follows that says the job was failing
    (`closers`: torchrun's ChildFailedError, srun's exit codes): a job that succeeded after a restart. Ranks'
    output flushed after the last failure (torchrun --tee copies) is not a new attempt.
    """
    out: dict[int, list[int]] = {}
    for src in sorted({m.source for m in marks}):
        mine = [m for m in marks if m.source == src]
        ends: dict[tuple, list[int]] = {}
        for m in mine:
            if m.kind == "end":
                ends.setdefault(m.agent, []).append(m.lineno)
        cands: set[int] = {m.lineno for m in mine if m.kind == "start"}
        depth = max((len(v) for v in ends.values()), default=0)
        # the k-th ends separate attempts only when a launcher ended another attempt after
        # them (it restarted); after the last ones, a failure on another node (an agent that
        # never ended an attempt, e.g. one that failed its rendezvous) is the same attempt
        for k in range(depth - 1):
            cands.add(max(sorted(v)[k] for v in ends.values() if len(v) > k) + 1)
        fails = failures.get(src, [])
        kept: list[int] = []
        prev = 0
        for b in sorted(cands):
            # keep a boundary only if a failure lies between it and the previous one
            i = bisect_left(fails, prev)
            if i < len(fails) and fails[i] < b:
                kept.append(b)
                prev = b
        if kept:
            last = kept[-1]
            failed_after = bisect_left(fails, last) < len(fails)
            closed = any(c >= last for c in (closers or {}).get(src, []))
            ran_after = not closed and bisect_left(after_ok.get(src, []), last) < len(after_ok.get(src, []))
            started_after = any(m.kind == "start" and m.lineno >= last for m in mine)
            if not failed_after and not ran_after and not started_after:
                kept.pop()
        if kept:
            out[src] = kept
    return out


def attempt_of(bounds: dict[int, list[int]], source: int, lineno: int) -> int:
    b = bounds.get(source)
    return bisect_right(b, lineno) if b else 0


def who(rank: Optional[int], ranks: tuple[int, ...], total: int, all_ranks: bool) -> str:
    if all_ranks or len(ranks) > 1:
        return describe(ranks, total)
    if rank is not None:
        return f"rank {rank}"
    return "an unknown rank"


def history(items: list[tuple[Optional[str], str]]) -> str:
    """'3 attempts: cuda_oom on rank 12 each time', '2 attempts: import_error on rank 0,
    then cuda_oom on rank 3'. `items`: (category or None for no failure, who: '' for the
    whole job, e.g. a requeue) per attempt."""
    n = len(items)
    words = [("no failure" if c is None else f"{c} on {w}" if w else c) for c, w in items]
    if n > 1 and len(set(words)) == 1 and items[0][0] is not None:
        return f"{n} attempts: {words[0]} each time"
    parts: list[str] = []
    i = 0
    while i < n:
        j = i
        while j + 1 < n and words[j + 1] == words[i]:
            j += 1
        times = j - i + 1
        parts.append(words[i] + ("" if times == 1 else " (twice)" if times == 2 else f" ({times} times)"))
        i = j + 1
    return f"{n} attempts: " + ", then ".join(parts)
