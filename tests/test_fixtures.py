"""Golden test: every fixture case made by a real program, diagnosed, compared with its truth.

A case is a directory under fixtures/ holding a truth.yaml and the logs the run produced.
The truth was written from what the program was told to do (see each truth.yaml's
`how_made` and `real_vs_planted`), not from slurmdoc's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmdoc.api import diagnose

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# the torchrun runs; fixtures/slurm/ and fixtures/documented/ are tests/test_corpus.py's
CASES = sorted(p.parent for p in (FIXTURES / "torchrun").rglob("truth.yaml"))


def test_there_are_real_cases():
    assert len(CASES) >= 10


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_case_matches_truth(case: Path):
    truth = yaml.safe_load((case / "truth.yaml").read_text())
    d = diagnose([str(case)])
    rc = d.root_cause
    if truth.get("expect_status") == "no_failure":
        assert d.status == "no_failure" and rc is None, rc
        return
    assert d.status == "failed" and rc is not None
    if truth.get("root_source_line") is None:
        # the root rank's own error never reached these logs (filtered, or a silent hang):
        # the honest answer names the rank with the evidence there is
        assert rc.category in (truth["category"], "unknown"), rc
    else:
        assert rc.category == truth["category"], rc
        path, _, _ = rc.source.rpartition(":")
        assert Path(path) == case / truth["root_file"]
        assert truth["root_line_contains"] in rc.message or any(truth["root_line_contains"] in t for t in rc.traceback)
    if truth["root_rank"] == "all":
        assert rc.all_ranks, rc
    else:
        assert rc.rank == truth["root_rank"], rc
