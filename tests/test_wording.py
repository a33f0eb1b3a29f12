"""How the report says what the root cause rests on (report.wording)."""

from __future__ import annotations

import pytest

from slurmdoc.models import Remediation, RootCause
from slurmdoc.report.wording import evidence_in_words


def root(evidence: str, rank_source=None, title="torchrun's failure summary (ChildFailedError)") -> RootCause:
    rem = Remediation(summary="s")
    return RootCause(
        category="killed", rule_id="r", rank=3 if rank_source else None, node=None, source="j.log:1", message="m", traceback=(),
        timestamp=None, remediation="s", evidence=evidence, rank_source=rank_source, title=title, remediation_parts=rem,
    )


def test_launcher_evidence_says_the_rank_s_output_is_missing():
    text = evidence_in_words(root("launcher", "launcher"))
    assert text.startswith("From a launcher's or Slurm's report only (torchrun's failure summary")
    assert "the rank's own output is not in this log" in text and text.endswith("its rank from the launcher's report.")


@pytest.mark.parametrize(
    "level, words",
    [("traceback", "own traceback"), ("exception", "error line alone"), ("exit", "exit status or signal only"), ("error_line", "error-like line")],
)
def test_each_level_in_words(level, words):
    assert words in evidence_in_words(root(level))


def test_a_rank_from_the_message_is_said_so():
    assert evidence_in_words(root("exception", "message")).endswith("its rank as named in the error message.")


def test_a_prefix_rank_needs_no_words():
    assert evidence_in_words(root("traceback", "prefix")) == "From the rank's own traceback."
