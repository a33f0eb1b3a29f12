"""Rank lists: srun task-list parsing and compact range formatting."""

from __future__ import annotations

import re
from typing import Iterable, Optional

MAX_TASKS = 1_000_000
_INT = re.compile(r"-?[0-9]{1,12}")


def to_int(text: Optional[str]) -> Optional[int]:
    """An ASCII integer, or None (captures from user rules may hold any text, e.g. '²')."""
    if text and _INT.fullmatch(text):
        return int(text)
    return None


def parse_tasks(spec: str) -> list[int]:
    """'2,4-5,7' -> [2, 4, 5, 7]. Malformed parts are ignored; huge ranges are capped."""
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part:
            a, _, b = part.partition("-")
            lo, hi = to_int(a), to_int(b)
            if lo is not None and hi is not None and 0 <= lo <= hi and hi - lo < MAX_TASKS:
                out.extend(range(lo, hi + 1))
        elif (n := to_int(part)) is not None and n >= 0:
            out.append(n)
    return out


def ranges(ranks: Iterable[int]) -> str:
    """[0,1,2,3,5,7,8,9] -> '0-3, 5, 7-9'."""
    nums = sorted(set(ranks))
    if not nums:
        return ""
    parts = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n == prev + 1:
            prev = n
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = n
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ", ".join(parts)


def describe(ranks: Iterable[int], total: int | None = None) -> str:
    """Human wording: 'rank 3', 'ranks 0-2, 5', 'all 16 ranks'."""
    nums = sorted(set(ranks))
    if not nums:
        return "no known rank"
    if total and len(nums) == total and len(nums) > 1:
        return f"all {total} ranks"
    if len(nums) == 1:
        return f"rank {nums[0]}"
    return f"ranks {ranges(nums)}"
