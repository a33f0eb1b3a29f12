"""Stage 5 of the diagnosis: launcher reconciliation. A launcher's summary names a failed
rank (torchrun's `Root Cause`, its exit code); hold it against the root the log shows, and
say why they differ when they do (the named rank was killed after another failure, or only
echoed it).
"""

from __future__ import annotations

from typing import Optional

from slurmdoc.diagnosis.findings import Collector
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.ranks import to_int
from slurmdoc.models import LauncherVerdict, RootCause

EXIT_SIGNALS = {-9: "SIGKILL", -15: "SIGTERM", -6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS"}


def reconcile(c: Collector, lay: Layout, root: Optional[RootCause]) -> list[LauncherVerdict]:
    out = []
    by_rank: dict[int, list[tuple[str, str, str]]] = {}  # rank -> (role, category, title) of its own findings
    if any(f.rule.spec.launcher_verdict for f in c.contexts):
        for f in c.causes:
            for r in lay.ranks(f.refs):
                by_rank.setdefault(r, []).append((f.rule.role, f.rule.category, f.rule.spec.title))
        for g in c.symptoms.values():
            if g.first.rule.spec.exit_evidence or g.first.event.first.origin != "rank":
                continue  # a launcher's or Slurm's line about the rank, not the rank's own output
            for r in lay.ranks(g.refs.values()):
                by_rank.setdefault(r, []).append((g.first.rule.role, g.first.rule.category, g.first.rule.spec.title))
    for f in c.contexts:
        if not f.rule.spec.launcher_verdict:
            continue
        ranks = lay.ranks(f.refs)
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
        out.append(LauncherVerdict(source=c.src(f), node=f.node, rank=rank, exitcode=exitcode, agrees=agrees, note=note, first_failure=root.rank if agrees is False and root is not None else None))
    return out
