"""Hand-written logs of the forms real jobs take (tests/forms/README.md), against the
diagnosis written for each before slurmdoc ran on it."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from slurmdoc.api import diagnose

FORMS = Path(__file__).resolve().parent / "forms"
ROWS = list(csv.DictReader(open(FORMS / "EXPECTED.tsv"), delimiter="\t"))
MTIMES = {"40_glog_vs_iso_year.log": 1767312000}  # 2026-01-02: when that job's log was written


def _param(row):
    marks = [pytest.mark.xfail(strict=True, reason=row["note"])] if row["note"].startswith("todo") else []
    return pytest.param(row, id=row["case"], marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in ROWS])
def test_form(row, tmp_path):
    path = FORMS / row["case"]
    if row["case"] in MTIMES:
        copy = tmp_path / row["case"]
        copy.write_bytes(path.read_bytes())
        os.utime(copy, (MTIMES[row["case"]], MTIMES[row["case"]]))
        path = copy
    d = diagnose([str(path)])
    rc = d.root_cause
    if row["category"] == "no_failure":
        assert d.status == "no_failure", rc
        return
    assert rc is not None and rc.category == row["category"], rc
    want = row["rank"]
    if want.startswith("all"):
        assert rc.all_ranks, rc
    elif want == "none":  # no rank may be named
        assert rc.rank is None, rc
    elif want != "null":  # (null: not checked)
        assert rc.rank == int(want), rc
    if row["node"] not in ("-", ""):
        assert rc.node == row["node"], rc


def test_benign_lines_are_no_failure():
    assert diagnose([str(FORMS / "benign_lines.txt")]).status == "no_failure"
