"""How the report says what a root cause rests on: its rung on the evidence ladder, and
where its rank comes from, in words (shared by the terminal and markdown renderers)."""

from __future__ import annotations

from slurmdoc.diagnosis.ranks import describe
from slurmdoc.models import Diagnosis, RootCause

RANK_WORDS = {
    "file": "its rank from the file name",
    "launcher": "its rank from the launcher's report",
    "message": "its rank as named in the error message",
    "flight_recorder": "its rank from the flight-recorder dumps",
}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def evidence_in_words(rc: RootCause) -> str:
    """One sentence: what this root cause rests on, e.g. "From torchrun's failure summary
    only: the rank's own output is not in this log"."""
    what = _lower_first(rc.title)
    if rc.evidence == "flight_recorder":
        weaker = rc.collective is not None and rc.collective.dump_evidence == "absent_dump"
        text = ("from the flight-recorder dumps, on weaker evidence: the rank is named only because its dump is missing"
                if weaker else "from the flight-recorder dumps: where each rank was when the job stopped")
        text += f"; the log's line behind it: {rc.source}"
    elif rc.evidence == "traceback":
        text = "from the rank's own traceback"
    elif rc.evidence == "exception":
        text = "from an error line alone: no whole traceback of it in this log"
    elif rc.evidence == "launcher":
        text = f"from a launcher's or Slurm's report only ({what}): the rank's own output is not in this log"
    elif rc.evidence == "exit":
        text = f"from an exit status or signal only ({what}): no error text in this log"
    else:
        text = "from an error-like line in the last output only: nothing more specific in this log"
    if rc.rank_source in RANK_WORDS:
        text += f"; {RANK_WORDS[rc.rank_source]}"
    return text[:1].upper() + text[1:] + "."


def recorder_lines(d: Diagnosis) -> list[str]:
    """The flight-recorder section (`--traces`): what the dumps said, when the root cause does
    not already say it, and what was read."""
    fr = d.flight_recorder
    if fr is None:
        return []
    out = []
    if fr.role != "root":
        out.append(fr.summary)
        last = fr.collective.culprit_last if fr.collective is not None else None
        frames = [str(f) for f in (last or {}).get("frames") or []][:4]
        if frames:
            out.append(f"rank {last.get('rank')}'s last recorded frames: " + " <- ".join(frames))
    read = f"{fr.files} dump file{'s' if fr.files != 1 else ''}" + (f" from {fr.path}" if fr.path else "")
    if fr.ranks_dumped:
        read += f" ({describe(fr.ranks_dumped)})"
    if fr.absent_dumps:
        read += f"; no dump from {describe(fr.absent_dumps)}"
    out.append(read)
    return out
