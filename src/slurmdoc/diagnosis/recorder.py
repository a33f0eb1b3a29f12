"""The last stage of the diagnosis: the ranks' flight-recorder dumps (`--traces`) fused with
what the log said.

PyTorch's flight recorder keeps each rank's last collectives; slurmdoc.traces reads the dumps
and lines them up across ranks (TraceVerdict: the first collective of a process group that
not every member entered, or that one member entered differently). That is the strongest
evidence of a hang's rank there is (the `flight_recorder` rung of diagnosis.ladder), and only
of a hang's: the dumps say where every rank was, not why.

  * The log's root is a hang (a collective timeout that leads because nothing else failed, a
    time limit, a cancellation): the rank the dumps name becomes the root rank, with
    `evidence` and `rank_source` `flight_recorder` and `root_cause.collective`.
  * The log holds no cause, only the waiting ranks' own errors (a closed connection, an abort:
    a symptom promoted for want of a cause): the same.
  * The dumps show a mismatch (one rank entered the collective with another op or size) and
    the log's root is a collective or generic error, or no cause at all (an abort, an exit
    status), on a rank that entered that collective (gloo aborts on the receiving neighbour,
    and the launcher names that neighbour): the odd rank out becomes the root; the
    neighbour's error is the echo.
  * Any other root (a crash the log shows earlier) stays the root cause: the dumps confirm it
    (they name the same rank) or add where the others were (`flight_recorder.role`).
  * A run with no failure stays `no_failure`, whatever the dumps say.
  * A culprit named only because its dump is absent (`absent_dump`) is said to rest on weaker
    evidence.
"""

from __future__ import annotations

import re
from typing import Optional

from slurmdoc.diagnosis.explain import NOT_NAMED, verdict_line
from slurmdoc.diagnosis.ladder import RECORDER
from slurmdoc.diagnosis.ranks import describe, ranges
from slurmdoc.errors import InputError
from slurmdoc.models import Collective, Diagnosis, FlightRecorder, Remediation, RootCause

HANG_CATEGORIES = ("nccl_timeout", "time_limit", "cancelled")  # a job that ended waiting
# errors a rank raises when a peer entered the collective differently (an abort on the
# receiving side, a size check, a closed connection): the echo of a mismatch, not its cause
ECHO_CATEGORIES = ("nccl_timeout", "nccl_error", "python_exception", "unknown", "sigterm_cascade", "killed")
FRAMES_SHOWN = 4
FRAME_FILE = re.compile(r"(.*?):\d+(?: in |$)")  # "path:line in func" -> path
ENDINGS = {
    "nccl_timeout": " and timed out",
    "time_limit": " until the job hit its time limit",
    "cancelled": " until the job was cancelled",
}


def read_verdict(path: str):
    """The dumps at `path` (a directory, a `<prefix>` of `<prefix><rank>` files, or one file)
    read and matched across ranks; bad input is an InputError with one line (exit 2)."""
    from slurmdoc.traces import TraceError, analyze, read_traces

    try:
        return analyze(read_traces(path))
    except TraceError as e:
        raise InputError(f"--traces: {' '.join(str(e).split())}") from None


def group_words(v) -> str:
    """'the default group (ranks 0-7)', 'group 1 "tp" (ranks 0-1)'."""
    members = f"ranks {ranges(v.members)}" if v.members else "members unknown"
    if v.pg in ("0", "") or v.pg_desc in ("default_pg", "default"):
        return f"the default group ({members})"
    desc = f' "{v.pg_desc}"' if v.pg_desc and v.pg_desc not in ("undefined", v.pg) else ""
    return f"group {v.pg}{desc} ({members})"


def op_words(v) -> str:
    op = v.op or ("p2p operation" if v.p2p else "collective")
    return f"{op} #{v.seq}" if v.seq is not None else op


def _frames(last: Optional[dict]) -> list[str]:
    """The culprit's last frames, innermost first, the user's own code first: a frame in an
    installed package (torch's collective wrappers) says nothing of where the job's code was."""
    from slurmdoc.frames import is_library

    shown = [str(f) for f in (last or {}).get("frames") or []]
    own = [f for f in shown if not is_library(m.group(1) if (m := FRAME_FILE.match(f)) else f)]
    return (own or shown)[:FRAMES_SHOWN]


def _last_words(v, op: str) -> str:
    """'; it last issued #6 at train.py:96' (the culprit's last recorded collective)."""
    last = v.culprit_last
    if not last or last.get("seq") is None:
        return ""
    what = f"#{last['seq']}" if (last.get("op") or v.op) == v.op else f"{last.get('op')} #{last['seq']}"
    if last.get("pg") is not None and str(last["pg"]) != v.pg:  # its last one was in another group
        what = f"{last.get('op') or 'collective'} #{last['seq']} of " + ("the default group" if str(last["pg"]) in ("0", "") else f"group {last['pg']}")
    frames = _frames(last)
    return f"; it last issued {what}" + (f" at {frames[0]}" if frames else "")


def _others(v, culprits: list[int]) -> str:
    waiting = [r for r in v.waiting_ranks if r not in culprits]
    rest = [r for r in v.members if r not in culprits]
    if len(waiting) > 1 and sorted(waiting) == sorted(rest):
        return f"the other {len(waiting)} ranks"
    return describe(waiting) if waiting else "the others"


def sentence(v, category: Optional[str] = None) -> str:
    """The dumps' verdict in words."""
    culprits = sorted(v.culprits)
    where = f"{op_words(v)} of {group_words(v)}"
    if v.kind == "mismatch" and v.mismatch:
        m = v.mismatch
        field = str(m.get("field") or "arguments").replace("_", " ")
        others = _others(v, [m.get("rank")])
        if field == "op":  # a different collective at the same place in the sequence
            return (f"rank {m.get('rank')} called {m.get('got')} as collective #{v.seq} of {group_words(v)}, where "
                    f"{others} called {m.get('expected')}")
        return f"rank {m.get('rank')} entered {where} with {field} {m.get('got')}, where {others} entered it with {m.get('expected')}"
    if v.kind == "missing" and v.evidence == "absent_dump":
        dumped = [r for r in v.ranks_dumped if r in v.members] or v.ranks_dumped
        return (f"{describe(culprits)} left no dump; the dumps of {describe(dumped)} show them waiting in {where}: "
                f"{describe(culprits)} is the suspect, on weaker evidence (only a missing dump names it)")
    if v.kind == "missing":
        return (f"{describe(culprits)} never entered {where}{_last_words(v, v.op)}; "
                f"{_others(v, culprits)} waited there{ENDINGS.get(category or '', '')}")
    if v.kind == "consistent":
        return f"the dumps of {describe(v.ranks_dumped)} agree: every member entered every recorded collective"
    return f"the dumps of {describe(v.ranks_dumped)} do not say which rank held the others up"


def collective_of(v) -> Optional[Collective]:
    if v.kind not in ("missing", "mismatch"):
        return None
    return Collective(
        pg=v.pg, seq=v.seq, op=v.op, sizes=v.sizes, missing_ranks=tuple(v.missing_ranks), mismatch=v.mismatch,
        pg_desc=v.pg_desc, members=tuple(v.members), p2p=v.p2p, waiting_ranks=tuple(v.waiting_ranks),
        culprits=tuple(v.culprits), culprit_last=v.culprit_last, dump_evidence=v.evidence, absent_dumps=tuple(v.absent_dumps),
    )


def _role(rc: Optional[RootCause], v) -> str:
    if rc is None:
        return v.kind if v.kind in ("consistent", "undecided") else "ignored"
    if v.kind in ("consistent", "undecided") or not v.culprits:
        return "consistent" if v.kind == "consistent" else "undecided"
    if rc.category in HANG_CATEGORIES:
        return "root"
    entered = set(v.members) - set(v.culprits)
    own = {rc.rank} if rc.rank is not None else set(rc.ranks)
    echo = not own or own <= entered  # the log's root is a rank that entered the collective
    if v.kind == "mismatch" and echo and (rc.promoted or rc.category in ECHO_CATEGORIES):
        return "root"  # the receiving neighbour's abort or error: the echo of the odd rank out
    if rc.promoted and rc.category in ECHO_CATEGORIES and echo:
        return "root"  # no cause in the log, only the waiting ranks' errors (a peer closed, an abort)
    return "confirms" if own and own <= set(v.culprits) else "context"


def fuse_recorder(d: Diagnosis, v, path: str = "") -> Diagnosis:
    """The diagnosis `d` with the dumps' verdict `v` (a slurmdoc.traces.TraceVerdict) fused in."""
    rc = d.root_cause
    role = _role(rc, v)
    coll = collective_of(v)
    words = sentence(v, rc.category if rc is not None else None)
    if role == "confirms":
        summary = f"The flight-recorder dumps confirm it: {words}."
    elif role == "context":
        summary = f"The failure the log shows stays the root cause; the flight-recorder dumps add: {words}."
    elif role == "ignored":
        summary = f"No failure in the log; the flight-recorder dumps say: {words} (not a failure by itself)."
    else:
        summary = words[:1].upper() + words[1:] + "."
    note = FlightRecorder(
        role=role, kind=v.kind, summary=summary, culprits=tuple(v.culprits), collective=coll, files=v.files,
        ranks_dumped=tuple(v.ranks_dumped), absent_dumps=tuple(v.absent_dumps), path=path, warnings=tuple(v.warnings),
    )
    update: dict = {"flight_recorder": note, "warnings": d.warnings + tuple(f"--traces: {w}" for w in v.warnings)}
    if rc is None:
        return d.model_copy(update=update)
    if role != "root":
        return d.model_copy(update={**update, "root_cause": rc.model_copy(update={"evidence_lines": (summary,) + rc.evidence_lines})})
    new = _as_root(d, rc, v, coll, summary)
    update["root_cause"] = new
    line = verdict_line(new, list(d.symptoms), d.ranks_seen)
    update["verdict"] = f"{d.history}. Last attempt: {line}" if d.history else line
    return d.model_copy(update=update)


def _as_root(d: Diagnosis, rc: RootCause, v, coll: Optional[Collective], summary: str) -> RootCause:
    """The root cause with the culprit the dumps name as its rank."""
    culprits = sorted(v.culprits)
    if not culprits and v.mismatch and isinstance(v.mismatch.get("rank"), int):
        culprits = [v.mismatch["rank"]]
    rank = culprits[0]
    hosts = {t.rank: t.node for t in d.timeline if t.node}
    node = hosts.get(rank)
    if node is None and (rc.rank == rank or len(set(hosts.values())) <= 1):
        node = rc.node  # the culprit's own host, or the only host the log shows
    frames = _frames(v.culprit_last)
    evidence = [summary]
    if frames:
        evidence.append(f"rank {rank}'s last recorded frames: " + " <- ".join(frames))
    if rc.rank is not None and rc.rank not in culprits:
        evidence.append(f"the log's own pick was rank {rc.rank} ({rc.source}): {rc.message[:200]}")
    elif rc.stragglers and set(rc.stragglers) != set(culprits):
        evidence.append(f"the log alone pointed at {describe(rc.stragglers)}")
    weaker = v.evidence == "absent_dump"
    category, title, label = rc.category, rc.title, rc.label
    mismatch = v.kind == "mismatch"
    if mismatch and category not in HANG_CATEGORIES:
        # no timeout ended it (gloo aborts on a size it did not expect): the ranks disagreed, as
        # the rule pack's collective-mismatch says it
        category, title, label = "nccl_error", "Ranks entered a collective differently", None
    why = ("Every member of a process group must enter the same collectives in the same order with the same "
           "sizes; the others wait for the one that did not, until a timeout or the job's end.")
    where = " <- ".join(frames) if frames else "its last lines in the log"
    after = (f"Start from where rank {rank} last issued a collective ({where}) and look at what it did after it"
             if frames else f"Look at what rank {rank} did after its last collective (its last lines in the log)")
    fix = [(f"Look at where rank {rank} issued it: {where}." if mismatch else after + ": a sleep, a lock, a data-loader or I/O wait, a branch the others did not take."),
           "Find the code path that differs between ranks: a branch on rank or on data (an uneven last batch), "
           "a collective called on some ranks only, a data-loader or I/O stall, a deadlock."]
    if weaker:
        fix.insert(0, f"Check why rank {rank} wrote no dump (killed first, a dump path it could not write, a crash in native code).")
    who, op = describe(culprits), op_words(v)
    if mismatch:
        todo = f"Make rank {rank} enter {op} as the other members do (the same collective, sizes and dtypes, in the same order)."
    elif weaker:
        todo = f"{who[:1].upper()}{who[1:]} is the suspect: find out whether it hung before {op} or died before it could dump."
    else:
        todo = f"Find out why {who} stopped before {op}: the others waited for it."
    # the rule's own steps were written for a log that names no culprit: the dumps' steps replace them
    rem = Remediation(summary=todo, why=why, fix=tuple(fix))
    kept = tuple(e for e in rc.evidence_lines if not e.endswith(NOT_NAMED))
    # the root line's time is another rank's when the log named another rank
    when = rc.timestamp if rc.rank is None or rc.rank in culprits else None
    return rc.model_copy(update={
        "category": category, "title": title, "label": label, "rank": rank, "ranks": tuple(culprits),
        "stragglers": () if mismatch else tuple(culprits), "timestamp": when,
        "node": node, "evidence": RECORDER, "rank_source": RECORDER, "collective": coll, "promoted": False,
        "evidence_lines": tuple(evidence) + kept, "remediation": rem.as_text(), "remediation_parts": rem,
        # the reporter's traceback and frames are not the culprit's (its last frames are evidence)
        "all_ranks": False, "job_level": False, "frame": None, "raised_at": None, "raised_in": None, "traceback": (),
    })
