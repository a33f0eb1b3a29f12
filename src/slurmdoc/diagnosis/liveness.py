"""Liveness: a failure-like finding that its printer outlived is `handled`, not a failure.

A traceback logged by a retry or a fallback, a worker crash the trainer recovers from, an
error line from a side service: when the same printer then goes on making progress (a
progress mark after it that goes beyond an earlier mark of the printer, ingest.activity: a
first mark alone shows where it stood, not that it moved, as a bar a dying process closes
once at its exit), or reaches a clean end (a `clean_end` rule's line), the finding is
listed as handled and is never the root cause. A clean end said for
the whole job (no rank of its own) covers every printer's earlier findings.

A state rather than an event (a `persists` rule: a loss printed as NaN) that the printer
repeats is outlived only by progress after its last repetition: a run that recovered shows
finite steps after it, a diverged one never does; a clean end does not outlive a state (a run
that says it finished with its loss nan finished diverged). So is a report that a process ended by a
signal (killed, crashed) printed again after progress: a process cannot go on after its end,
so the steps before the repeated report (a thread re-quoting the end with the lines before
it) do not outlive it. Any other report is outlived by progress after its first line (a side
service's error recurring between steps does not stop them).

A paste of several excerpts (code fences between them, SourceInfo.excerpt_breaks) is read
excerpt by excerpt: their order is the paster's, so progress or an end in one does not outlive
a finding in another (a traceback quoted first, the run's progress bars pasted below it). Each
fenced block is an excerpt, and the lines outside the fences are one (SourceInfo.excerpt): a
run's log that prints a fenced block of its own is one run around it.

A log with no prefixes is read as one printer, unless some program (a launcher, Slurm, a
remote-exec wrapper, a runner, an IDE) reports a process that ended with a non-zero status
after the error: then its lines are several processes' (or the erring one ended), and
progress after the error does not show that the one that erred went on.

A report that a process ended by SIGTERM (the request to stop, not a crash or a kill) printed
after a clean end that covers its printer (the job's end, or its own printer's), in the same
excerpt and with no other failure reported between them, is the run's shutdown of what was
left running (a tensorboard, a logger, a GPU monitor the script stops when training is done):
handled, cited at the end it followed. Any other end (SIGKILL, a crash, a non-zero status), the
scheduler's own words (a time limit, a cancellation) and a SIGTERM after a failure stay failures.

Only the same printer counts: a rank's prefix or per-rank file, or the one unprefixed
stream of an input that has no ranked printers (a plain single-process log). Printers told
apart only by a host or a tag (Ray's `(Worker pid=N)`) are neither: their progress does not
outlive an untagged line's finding, nor does any progress outlive theirs. A launcher's
or Slurm's report of a failure is never outlived by a rank's progress.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Iterable, Optional

from slurmdoc.diagnosis.findings import Collector, Finding, named, nonzero
from slurmdoc.diagnosis.ladder import SIGNAL_CATEGORIES
from slurmdoc.engine.template import exit_signal, signum
from slurmdoc.models import RankActivity, SourceInfo

SIGTERM = 15


def stop_request(f: Finding) -> bool:
    """Is `f` a report of a process ended by SIGTERM? The signal it names (a `sig` capture, or an
    exit status that names one), else the one its rule stands for (`signals`) when only one."""
    if "sig" in f.captures:
        return signum(f.captures["sig"]) == SIGTERM
    if "exitcode" in f.captures:
        return exit_signal(f.captures["exitcode"]) == SIGTERM
    return f.rule.signums == frozenset({SIGTERM})


def _by_source(items: Iterable[tuple[Finding, Any]]) -> dict[int, list]:
    """The values of (finding, value) pairs by the source of each finding, each list sorted."""
    out: dict[int, list] = {}
    for f, value in items:
        out.setdefault(f.event.first.source, []).append(value)
    for values in out.values():
        values.sort()
    return out


def after(f: Finding, end: Finding, sources: list[SourceInfo]) -> bool:
    """Was `end` printed after `f`? In one input, by line number (timestamps may be partial or
    dated differently) within one pasted excerpt; across inputs, by time when both carry one."""
    a, b = f.event.first, end.event.first
    if a.source == b.source:
        last = f.event.linenos[-1] if f.event.linenos else a.lineno
        return b.lineno > last and one_excerpt(sources[a.source], last, b.lineno)
    return f.ts is not None and end.ts is not None and end.ts > f.ts


def one_excerpt(src: SourceInfo, a: int, b: int) -> bool:
    """Are lines a < b of one input in the same pasted excerpt (no code fence between them)?
    A paste's excerpts are in the order the paster chose: a traceback quoted first and the
    run's progress bars below it say nothing of which came first."""
    return not src.excerpt_breaks or src.excerpt(a) == src.excerpt(b)


class Liveness:
    def __init__(self, c: Collector, activity: Optional[list[RankActivity]]) -> None:
        self.c = c
        self.ranked = ranked = {stream[0] for stream in c.seen}  # sources with ranked printers
        # printer -> (source, excerpt) -> line of its last progress mark that went beyond all
        # earlier ones there (a bar redrawn over steps it had already reached is not progress)
        self.progress: dict[tuple, dict[tuple[int, int], int]] = {}
        for a in activity or []:
            if a.who.rank is None and a.who.label is None and a.who.local is None and a.who.source in ranked:
                continue  # unprefixed lines among ranked ones: any rank's, not one printer's
            if a.tagged:
                continue  # told apart only by a host or a tag: one of several printers that
                # share the unprefixed stream's key, never the unprefixed printer itself
            if a.advanced:
                marks = self.progress.setdefault(a.who.key(), {})
                for k, (_, src, line, moved) in a.advanced.items():
                    if not moved:
                        continue  # one mark alone shows where the printer was, not that it went on
                    at = (src, k[1] if isinstance(k, tuple) else 0)
                    marks[at] = max(marks.get(at, 0), line)
        self.job_ends = [f for f in c.clean_ends if f.event.first.origin != "rank"]
        self.rank_ends: dict[tuple, list[Finding]] = {}
        for f in c.clean_ends:
            if f.event.first.origin == "rank":
                self.rank_ends.setdefault(f.event.first.who.key(), []).append(f)
        # source -> the lines where a program reports a process that failed (a non-zero exit
        # status): a launcher, Slurm, a remote-exec wrapper, an IDE, a subprocess call
        self.failed_exit = _by_source((e, e.event.first.lineno) for e in c.exits if nonzero(e))
        # source -> (line, rule id) of the failures reported in it (causes, and each symptom's
        # first), in line order: a report of a failed process is the end of the failure
        # nearest before it, not of an earlier one
        self.failures = _by_source(
            (f, (f.event.first.lineno, f.rule.id))
            for f in list(c.causes) + [g.first for g in c.symptoms.values() if not g.first.rule.spec.exit_evidence])
        # source -> the lines of every failure-like finding but a SIGTERM report, in order: a
        # SIGTERM after one of them (between a clean end and it) is that failure's echo
        self.not_stops = _by_source(
            (f, f.event.first.lineno)
            for f in list(c.causes) + [g.first for g in c.symptoms.values()] + list(c.exits) + list(c.error_lines)
            if not stop_request(f) and f.rule.role != "context")
        self._memo: dict[int, Optional[str]] = {}

    def resumed(self, f: Finding) -> Optional[str]:
        """Where the printer of `f` went on after it (`path:line`), or None."""
        got = self._memo.get(id(f), "")
        if got != "":
            return got
        out = self._resumed(f)
        self._memo[id(f)] = out
        return out

    def _resumed(self, f: Finding) -> Optional[str]:
        first = f.event.first
        if stop_request(f):
            end = self._shutdown(f)
            if end is not None:
                return self.c.src(end)
        if first.origin in ("launcher", "scheduler") or f.rule.spec.exit_evidence or f.rule.spec.launcher_verdict:
            return None
        # a state (a loss printed as nan) is outlived by steps after its last repetition, never
        # by a clean end: a run that ends in that state ended diverged, however it says it ended
        ends = () if f.rule.spec.persists else self.job_ends
        for end in ends:
            if after(f, end, self.c.sources):
                if end.event.first.origin == "unknown" and not named(first.who) and self._exit_after(f):
                    continue  # an unprefixed end line may be another process's (see above)
                return self.c.src(end)
        key = first.who.key()
        if first.origin == "unknown" and (first.source in self.ranked or first.node is not None or first.tag is not None):
            # unprefixed lines among ranked ones, or printers told apart only by a host or
            # a tag (Ray's `(Worker pid=N)`): not one printer whose progress can be read
            return None
        last = f.event.linenos[-1] if f.event.linenos else first.lineno
        if f.repeated_at is not None and (f.rule.spec.persists or f.rule.category in SIGNAL_CATEGORIES):
            # a state repeated up to here, or a process's end reported again here, is outlived
            # only after it
            last = max(last, f.repeated_at)
        src = self.c.sources[first.source]
        mark = self.progress.get(key, {}).get((first.source, src.excerpt(last)))
        if mark is not None and mark > last and not (not named(first.who) and self._exit_after(f)):
            return f"{src.path}:{mark}"
        for end in () if f.rule.spec.persists else self.rank_ends.get(key, ()):
            if after(f, end, self.c.sources):
                return self.c.src(end)
        return None

    def _shutdown(self, f: Finding) -> Optional[Finding]:
        """The clean end that a SIGTERM report `f` follows as the shutdown of what was left
        running: the job's end, or its own printer's, before it in the same excerpt, with no
        failure of another kind reported between them."""
        key = f.event.first.who.key()
        for end in [*self.job_ends, *self.rank_ends.get(key, ())]:
            if not after(end, f, self.c.sources):
                continue
            a, b = end.event.first, f.event.first
            if a.source == b.source:
                lines = self.not_stops.get(a.source, [])
                i = bisect_right(lines, a.lineno)
                if i < len(lines) and lines[i] < b.lineno:
                    continue  # a failure between the end and the SIGTERM: its echo
            return end
        return None

    def _exit_after(self, f: Finding) -> bool:
        """Does any program's report of a process that failed (a non-zero exit) come after
        `f`, with no failure of another rule reported between them? Then the unprefixed lines
        are several processes', and the progress after the error may be another's: it does
        not show that the erring one went on. A failure of another kind between them is what
        that report ends (an error the program handled, then the one that ended it)."""
        source = f.event.first.source
        exits = self.failed_exit.get(source)
        if not exits:
            return False
        at = f.lineno()  # (an event's lines may reach past a report printed inside it)
        i = bisect_right(exits, at)
        if i == len(exits):
            return False
        found = self.failures.get(source, [])
        j = bisect_right(found, (at, "\uffff"))
        while j < len(found) and found[j][0] < exits[i]:
            if found[j][1] != f.rule.id:
                return False
            j += 1
        return True

    def handled(self, f: Finding) -> bool:
        return self.resumed(f) is not None
