"""How the report says what a root cause rests on: its rung on the evidence ladder, and
where its rank comes from, in words (shared by the terminal and markdown renderers)."""

from __future__ import annotations

from slurmdoc.models import RootCause

RANK_WORDS = {
    "file": "its rank from the file name",
    "launcher": "its rank from the launcher's report",
    "message": "its rank as named in the error message",
}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def evidence_in_words(rc: RootCause) -> str:
    """One sentence: what this root cause rests on, e.g. "From torchrun's failure summary
    only: the rank's own output is not in this log"."""
    what = _lower_first(rc.title)
    if rc.evidence == "traceback":
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
