"""A bounded set of cause findings that keeps the earliest, not the first to arrive.

Findings arrive in the order their events complete, not the order they happened: a rank
that goes quiet after its traceback has it completed only at the end of the input, after
every other rank's findings. A cap that kept the first arrivals would drop exactly that
rank's (often the root's) finding. So the cap keeps the findings that come first in the
order the diagnosis chooses the root by (diagnosis.order.earliest: by time where findings
carry one, else by position):

- the `limit` earliest timed findings by (time, position),
- the `limit` earliest untimed findings by position,
- and the finding earliest by position, whatever it is (the order starts from it).

With these, the earliest cause of everything seen is among those kept; only rivals within
the clock-skew window can be lost, and only past `limit` timed findings in that window.
Iteration gives the kept findings in arrival order, as the uncapped list would.
"""

from __future__ import annotations

import heapq
from typing import Any, Iterator, Optional


class _Latest:
    """Heap entry ordered so that heapq's smallest is the latest finding (the one to evict)."""

    __slots__ = ("key", "n")

    def __init__(self, key: tuple, n: int) -> None:
        self.key = key
        self.n = n

    def __lt__(self, other: "_Latest") -> bool:
        return other.key < self.key


class EarliestCauses:
    """Cause findings, at most about 2 x `limit` of them, the earliest kept (see above).

    `keep(f)` adds one; False when the cap dropped one for it (this one, or a later one
    that arrived before). Reads like the list it replaces: iteration, len, truth, `+ list`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: dict[int, Any] = {}  # arrival number -> finding
        self._timed: list[_Latest] = []
        self._untimed: list[_Latest] = []
        self._in_heaps: set[int] = set()  # arrival numbers held by either heap
        self._first: Optional[tuple[int, int]] = None  # (position, arrival) of the earliest by position
        self._n = 0
        self._order: Optional[list] = None  # kept findings in arrival order (cache)

    def keep(self, f) -> bool:
        n = self._n
        self._n += 1
        self._items[n] = f
        self._order = None
        if self._first is None or f.seq < self._first[0]:
            old = self._first
            self._first = (f.seq, n)
            if old is not None and old[1] not in self._in_heaps:
                del self._items[old[1]]  # kept only for being first by position, no longer
        heap = self._untimed if f.ts is None else self._timed
        heapq.heappush(heap, _Latest((f.seq,) if f.ts is None else (f.ts, f.seq), n))
        self._in_heaps.add(n)
        if len(heap) <= self.limit:
            return True
        gone = heapq.heappop(heap).n
        self._in_heaps.discard(gone)
        if self._first is not None and gone == self._first[1]:
            return False  # out of its heap, still kept as the first by position
        del self._items[gone]
        return False

    def _list(self) -> list:
        if self._order is None:
            self._order = [self._items[n] for n in sorted(self._items)]
        return self._order

    def __iter__(self) -> Iterator:
        return iter(self._list())

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __add__(self, other: list) -> list:
        return self._list() + list(other)
