"""Stage 3 of the diagnosis: ordering and root choice. The earliest cause leads (with a
clock-skew allowance for a more specific cause on another stream); a cause that only ends
a straggler yields to the straggler; with no cause at all, the most telling symptom or
exit is promoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Optional

from slurmdoc.diagnosis.findings import Collector, Finding, Group, before, nonzero, quotes
from slurmdoc.diagnosis.ladder import rank_in_choice
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.liveness import Liveness
from slurmdoc.diagnosis.ranks import parse_tasks, to_int

# categories that are by definition the consequence of another failure (a launcher stopping
# the processes that survived it)
CONSEQUENCES = frozenset({"sigterm_cascade"})

# a process ended by SIGABRT, in the words launchers and shells use
ABORT_WORDS = re.compile(r"\bAbort(?:ed)?\b|\bSIGABRT\b|\bsignal 6\b|\b6 death signal\b")


@dataclass
class Choice:
    """The root the log points at, and how it was reached."""

    root: Optional[Finding] = None
    promoted: bool = False  # no cause-role finding leads: a symptom or an exit stands in
    stragglers: list[int] = field(default_factory=list)
    ended_by: Optional[Finding] = None  # the cause that only ended the straggler
    handled: list[Finding] = field(default_factory=list)  # failure-like findings their printer outlived


def choose_root(c: Collector, lay: Layout, all_ranks: list[int], live: Optional[Liveness] = None) -> Choice:
    """The root: the strongest rung first, then the earliest; findings that their printer
    outlived (liveness) never lead."""
    # a traceback Python printed for an exception it dropped (`Exception ignored in: ...`) is
    # handled whatever follows it: the process went on
    alive = (lambda f: not f.event.unraised and not live.handled(f)) if live is not None else (lambda f: not f.event.unraised)
    handled = [f for f in c.causes + [g.first for g in c.symptoms.values()] + c.error_lines if not alive(f)]
    # a generic exception whose message was printed below it, where a rule read it: that finding
    # stands for it (findings.Collector._note_announced)
    causes = unquoted([told(f) if f.rule.category == "python_exception" else f for f in c.causes if alive(f)], c.sources)
    waived = [f for f in causes if f.event.waived]
    if waived and (len(waived) < len(causes) or c.symptoms or c.exits):
        # tracebacks their printer introduced as harmless ("... it's safe to ignore this
        # error") yield to any other evidence; alone, they are all the log has
        causes = [f for f in causes if not f.event.waived]
        handled = handled + waived
    symptoms = {k: g for k, g in c.symptoms.items() if alive(g.first)}
    exits = [f for f in c.exits if alive(f)]
    if causes:
        best = strongest(causes)
        if rank_in_choice(best[0]) == 2:
            # only reports of an end (a launcher's, an exit status): the first process to
            # end is the first failure, whatever the rule calls the report (a plain non-zero
            # exit before the kills that followed it)
            best = best + [f for f in exits if nonzero(f) and rank_in_choice(f) == 2 and f.rule.role != "context"]
        root = restated(earliest(best, c.skew), best)
        deferred = _deferred(symptoms, lay, root, all_ranks)
        if deferred is not None:
            return Choice(deferred[0], True, deferred[1], root, handled)
        return Choice(root, promoted=root.rule.role != "cause", handled=handled)
    if symptoms or exits:
        root, stragglers = _promote(symptoms, exits, lay, all_ranks, c.skew)
        lines = [f for f in c.error_lines if alive(f)]
        root = (explained_abort(root, [f for f in c.last_words if alive(f)], lay)
                or explained_exit(root, lines, lay) or explained_cut(root, lines, lay) or root)
        return Choice(root, True, stragglers, handled=handled)
    lines = [f for f in c.error_lines if alive(f)]
    if lines:
        return Choice(earliest(lines, c.skew), True, handled=handled)
    return Choice(handled=handled)


def unquoted(cands: list[Finding], sources: list = ()) -> list[Finding]:
    """Causes without the quotations of errors that the log also shows as records: a sentence
    quoting `OSError: No space left on device` above the pasted log yields to the log's own
    line of that category. A quotation with no such record stays (it is all there is). In a
    paste whose log stands in code fences, a line outside them is the paster's own words
    (`an unexpected bus error occurred during training`): it yields the same way to the
    fenced log's record."""
    said = [quotes(f.event) or _around_fences(f, sources) for f in cands]
    recorded = {f.rule.category for f, q in zip(cands, said) if not q}
    return [f for f, q in zip(cands, said) if not (f.rule.category in recorded and q)]


def _around_fences(f: Finding, sources: list) -> bool:
    """Is `f` a one-line finding outside the code fences of a paste that has them?"""
    if f.event.kind != "line" or not sources:
        return False
    src = sources[f.event.first.source]
    return bool(src.excerpt_breaks) and src.excerpt(f.event.first.lineno) == 0


def strongest(cands: list[Finding]) -> list[Finding]:
    """The candidates on the highest rung of the evidence ladder present (ladder.rank_in_choice)."""
    levels = [rank_in_choice(f) for f in cands]
    best = min(levels)
    return [f for f, lv in zip(cands, levels) if lv == best]


def earliest(cands: list[Finding], skew: timedelta) -> Finding:
    ordered = sorted(cands, key=lambda f: f.seq)
    first = ordered[0]
    for f in ordered[1:]:
        if before(f, first):
            first = f
    if first.ts is None:
        return first
    timed = [f for f in cands if f.ts is not None]
    # clock skew: a more specific cause from another stream within the skew window wins
    rivals = [
        f
        for f in timed
        if f.rule.role == "cause"  # (a symptom is an echo: one stamped a moment later is no rival)
        and f.event.first.stream != first.event.first.stream
        and f.ts <= first.ts + skew  # type: ignore[operator]
        and f.rule.spec.priority > first.rule.spec.priority
        and f.rule.category not in first.rule.spec.refine_with  # that one refines `first` instead
    ]
    if rivals:
        return min(rivals, key=lambda f: (-f.rule.spec.priority, f.ts, f.seq))
    return first


def restated(root: Finding, cands: list[Finding]) -> Finding:
    """A one-line error that its printer then raised in a traceback (a program printing the
    message, then the exception with the same words) is that traceback's error: the
    traceback is cited, where it says what was raised and from where."""
    if root.event.kind != "line":
        return root
    words = " ".join(root.message().split())
    if len(words) < 20:
        return root
    for f in sorted(cands, key=lambda f: f.seq):
        if (f.seq > root.seq and f.event.kind == "traceback" and f.rule.category == root.rule.category
                and f.event.first.stream == root.event.first.stream and words in " ".join(f.message().split())):
            return f
    return root


def _promote(symptoms: dict[str, Group], exits: list[Finding], lay: Layout, all_ranks: list[int], skew: timedelta) -> tuple[Finding, list[int]]:
    """No cause-role finding: pick the most telling symptom.

    1. A rank that exited with an error and left nothing else in this log (its output
       went elsewhere, or was filtered) is the likeliest origin of everyone else's echoes.
    2. Otherwise the earliest symptom that may stand alone (a collective timeout); for
       rules that say so, the few ranks that never reported it are named as stragglers.
    3. Otherwise the earliest symptom of any kind, a launcher's stopping of the survivors
       (sigterm_cascade) only when nothing else is there.
    """
    echoed: set[int] = set()
    for g in symptoms.values():
        if not g.first.rule.spec.exit_evidence:
            echoed.update(lay.ranks(g.refs.values()))
    silent = [f for f in exits if (rs := lay.ranks(f.refs)) and not set(rs) & echoed]
    if silent:
        # the exit line itself before a launcher's summary that repeats it
        lines = [f for f in silent if f.rule.role != "context"]
        return earliest(lines or silent, skew), []
    alone = [g for g in symptoms.values() if g.first.rule.spec.root_if_alone and not g.first.rule.spec.exit_evidence]
    if alone:
        root = earliest([told(g.first) for g in alone], skew)
        g = next((x for x in alone if x.first is root), None) or symptoms.get(root.rule.id)
        named = parse_tasks(root.captures.get("straggler") or "")
        if named:
            return root, named  # the text names the rank(s) the others waited for, the first leads
        return root, stragglers_of(g, lay, all_ranks) if g is not None else []
    if symptoms:
        # a launcher ending the surviving processes does so after another failure: any other
        # evidence of that failure leads over it, even printed after it (DeepSpeed's launcher
        # logs `Killing subprocess N` for each worker, then raises with the failed one's status)
        pool = [g for g in symptoms.values() if g.first.rule.category not in CONSEQUENCES] or list(symptoms.values())
        return earliest([told(g.first) for g in pool], skew), []
    # nothing but a launcher's summary of non-zero exits (e.g. only torchrun's output)
    return earliest(exits, skew), []


def told(f: Finding) -> Finding:
    """A report whose message its printer gave on the line below, in words another rule reads
    (the C++ runtime's `terminate called after throwing ...`, then `what(): <a collective
    timeout>`): that finding says what the report is about, and stands for it. A message no
    rule reads leaves the report as it is: the process's own end, first in its process."""
    inner = f.inner
    return inner if inner is not None else f


def aborted(f: Finding) -> bool:
    """A report of a process ended by SIGABRT (exit code -6, a shell's 134, the words)."""
    code = to_int(f.captures.get("exitcode") or f.captures.get("sig") or "")
    if code in (-6, 134):
        return True
    return f.rule.category == "segfault" and ABORT_WORDS.search(f.message()) is not None


def explained_abort(root: Finding, last_words: list[Finding], lay: Layout) -> Optional[Finding]:
    """A process that aborted right after printing an uncaught C++ exception's message
    (`terminate called after throwing ...`, `what(): <message>`) aborted because of what the
    message says: the finding on that message stands for the abort when nothing else in the
    log failed (a collective timeout on a rank the watchdog then took down). The message must
    come before the abort, in the same file, on the same rank or with a rank unknown on either
    side; the latest such message is the one that process printed."""
    if not aborted(root) or root.rule.category not in ("segfault", "unknown"):
        return None
    return _said_last(root, last_words, ("segfault", "unknown"), lay)


def explained_exit(root: Finding, lines: list[Finding], lay: Layout) -> Optional[Finding]:
    """A process whose end is reported only as a plain non-zero exit status (no signal, no
    words: `Exited with exit code 1`) after its last output was an error a rule names on the
    bottom rung (a retried try that never succeeded, a loss printed as nan): that error is why
    it exited, so it stands for the exit. It must come before the exit, in the same file, on
    the same rank or with a rank unknown on either side; the latest such error is the one that
    process printed last. An error line the generic lexicon alone knows (`unknown`) explains
    nothing more than the exit does."""
    if root.rule.category != "unknown" or not nonzero(root) or aborted(root):
        return None
    return _said_last(root, lines, ("unknown",), lay)


def explained_cut(root: Finding, lines: list[Finding], lay: Layout) -> Optional[Finding]:
    """A traceback cut before its exception line (a paste or a tail that stops inside it) says
    where a process failed, not what it raised. When that process's last output before it was
    an error a rule names on the bottom rung (values or a loss printed as NaN, a retried try
    that never succeeded), that error is what the lost exception line would have said: it
    stands for the traceback. Same file, same rank or a rank unknown on either side, as for a
    plain exit; an error line the generic lexicon alone knows (`unknown`) says no more than
    the frames do."""
    if root.rule.category not in ("python_exception", "unknown") or root.event.kind != "traceback" or root.event.form != "cut":
        return None
    return _said_last(root, lines, ("unknown",), lay)


def _said_last(root: Finding, said: list[Finding], vague: tuple[str, ...], lay: Layout) -> Optional[Finding]:
    """The latest of `said` (outside the `vague` categories) that the process whose end
    `root` reports printed before it: in the same file, on the same rank or with a rank
    unknown on either side."""
    own = set(lay.ranks(root.refs))
    told = [
        w for w in said
        if w is not root and w.rule.category not in vague
        and w.event.first.source == root.event.first.source and before(w, root)
        and (not own or not (theirs := set(lay.ranks(w.refs))) or own & theirs)
    ]
    return max(told, key=lambda w: w.seq) if told else None


def stragglers_of(g: Group, lay: Layout, all_ranks: list[int]) -> list[int]:
    """The few known ranks that did not report what (nearly) all others did."""
    if not g.first.rule.spec.missing_rank_is_root:
        return []
    reporters = set(lay.ranks(g.refs.values()))
    missing = [r for r in all_ranks if r not in reporters]
    if reporters and 0 < len(missing) <= max(1, len(all_ranks) // 8):
        return missing
    return []


def _deferred(symptoms: dict[str, Group], lay: Layout, root: Finding, all_ranks: list[int]) -> Optional[tuple[Finding, list[int]]]:
    """A cause that only ends a straggler (Slurm killing the hung rank after everyone
    else timed out waiting for it) yields to the straggler finding."""
    if not root.rule.spec.defer_to_straggler:
        return None
    own = set(lay.ranks(root.refs))
    for g in symptoms.values():
        stragglers = stragglers_of(g, lay, all_ranks)
        if stragglers and own and own <= set(stragglers) and before(g.first, root):
            return g.first, stragglers
    return None


def named_elsewhere(c: Collector, lay: Layout, root: Finding) -> Optional[tuple[int, Finding]]:
    """The one rank that other evidence of this failure names: findings of the same
    category, or processes that exited with an error. None when they name 0 or 2+."""
    found: dict[int, Finding] = {}
    # srun under torchrun: srun's task ids are the torchrun agents (nodes), not ranks;
    # when a torchrun line names the local rank, srun's task list says nothing more
    torchrun = {f.event.first.source for f in c.exits if "local_rank" in f.captures}
    for f in c.causes + c.exits:
        if f is root or (f.rule.category != root.rule.category and not f.rule.spec.exit_evidence):
            continue
        if "tasks" in f.captures and f.event.first.source in torchrun:
            continue
        for r in lay.ranks(f.refs):
            found.setdefault(r, f)
    if len(found) == 1:
        return next(iter(found.items()))
    return None
