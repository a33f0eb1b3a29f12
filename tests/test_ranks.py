"""Rank lists: srun task specs and compact ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slurmdoc.diagnosis.ranks import describe, parse_tasks, ranges


def test_parse_tasks():
    assert parse_tasks("2,4-5,7") == [2, 4, 5, 7]
    assert parse_tasks("0-3") == [0, 1, 2, 3]
    assert parse_tasks("3") == [3]
    assert parse_tasks("5-2,x,,9") == [9]  # malformed parts are dropped, not fatal


def test_ranges_and_describe():
    assert ranges([0, 1, 2, 3, 5, 7, 8, 9]) == "0-3, 5, 7-9"
    assert ranges(r for r in range(512) if r != 137) == "0-136, 138-511"
    assert describe([3]) == "rank 3"
    assert describe([0, 1, 2], total=3) == "all 3 ranks"
    assert describe([0, 2], total=3) == "ranks 0, 2"
    assert describe([]) == "no known rank"


@given(st.sets(st.integers(min_value=0, max_value=5000), max_size=300))
def test_ranges_round_trip(nums):
    assert parse_tasks(ranges(nums).replace(" ", "")) == sorted(nums)
