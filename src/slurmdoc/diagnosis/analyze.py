"""The diagnosis, stage by stage; each stage is a module of this package:

  findings   classified events become findings while the input streams by (Collector)
  layout     prefixes, file names and launcher lines become global ranks and hosts
  ladder     the evidence ladder: how strong the evidence behind a finding is
  liveness   findings their printer outlived (progress or a clean end after them): handled
  order      root choice: the strongest rung, then the earliest; else the most telling symptom
  straggler  a hang-like root: the rank that stopped first
  explain    the RootCause model, the symptoms, the verdict line
  advice     the root's remediation: templates filled, conditional lines kept by the facts
  launchers  a launcher's named failure held against the root the log shows
  replay     several attempts in one log: one diagnosis per attempt, the last one's wins
"""

from __future__ import annotations

from typing import Optional

from slurmdoc.diagnosis.explain import handled_of, root_model, symptoms_of, verdict_line
from slurmdoc.diagnosis.findings import MAX_STREAMS_SEEN, Collector
from slurmdoc.diagnosis.launchers import reconcile
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.liveness import Liveness
from slurmdoc.diagnosis.order import choose_root
from slurmdoc.diagnosis.replay import split_attempts
from slurmdoc.diagnosis.straggler import look_for_stall, progress_of
from slurmdoc.diagnosis.timeline import timeline
from slurmdoc.models import Diagnosis, RankActivity, RootCause


class Analyzer(Collector):
    """Collects findings (`note_stream`, `add`) while the input streams by; `finish` runs
    the later stages and returns the Diagnosis."""

    def finish(self, lines_read: int, inputs: tuple[str, ...], warnings: list[str], activity: Optional[list[RankActivity]] = None) -> Diagnosis:
        if not self._part and self.journal is not None:
            def make_part() -> Analyzer:
                part = Analyzer(self.sources, skew=self.skew.total_seconds(), _part=True)
                part.facts = self.facts
                return part

            split = split_attempts(self, make_part, lines_read, inputs, warnings, activity)
            if split is not None:
                return split
        lay = Layout(self)
        all_ranks = sorted(set(lay.ranks(self.seen.values())) | self.known_ranks)
        total = len(all_ranks)
        lay.total = total
        rank_host = lay.hosts()
        lay.pids_to_ranks()

        live = Liveness(self, activity)
        choice = choose_root(self, lay, all_ranks, live)
        stall, acts = look_for_stall(self, lay, choice, all_ranks, activity)

        root = choice.root
        root_cause: Optional[RootCause] = None
        root_group_key = None
        if root is not None:
            root_cause, root_group_key = root_model(self, lay, root, choice.promoted, total, all_ranks, rank_host, choice.stragglers, choice.ended_by, stall)

        symptoms = symptoms_of(self, lay, root, root_group_key, set(root_cause.ranks) if root_cause else set(), choice.handled)
        verdicts = reconcile(self, lay, root_cause)
        if self.streams_dropped:
            warnings.append(f"more than {MAX_STREAMS_SEEN} distinct printers: ranks_seen counts the first {MAX_STREAMS_SEEN}")
        if self.causes_dropped:
            warnings.append(f"{self.causes_dropped} further cause findings were counted but not kept")
        return Diagnosis(
            status="failed" if root_cause is not None else "no_failure",
            root_cause=root_cause,
            symptoms=tuple(symptoms),
            ranks_seen=total,
            handled=tuple(handled_of(self, lay, live, choice.handled)),
            verdict=verdict_line(root_cause, symptoms, total, lines=lines_read, files=len(inputs), printers=len(activity or ()),
                                 reached=_reached(activity)),
            inputs=inputs,
            lines_read=lines_read,
            warnings=tuple(warnings),
            launcher_verdicts=tuple(verdicts),
            progress=progress_of(self, acts),
            timeline=timeline(self, lay, root_cause, activity, rank_host),
        )


def _reached(activity: Optional[list[RankActivity]]) -> Optional[str]:
    """'step 4': the furthest progress any printer showed (for a run with no failure)."""
    marks = [m for a in activity or () for m in a.progress.values()]
    if not marks:
        return None
    m = max(marks, key=lambda m: (m.epoch or 0, m.step))
    return (f"epoch {m.epoch}, " if m.epoch is not None else "") + f"{m.label} {m.step}" + (f"/{m.total}" if m.total else "")
