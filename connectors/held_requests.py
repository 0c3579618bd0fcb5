"""Requests held until their due time (``not_before``): timers and signal deadlines.

An executor holds them here instead of on a thread each, and dispatches each when it comes
due; ten thousand waiting timers are ten thousand heap entries. Example::

    held = HeldRequests()
    held.hold(due_ms=5_000, ref=("s1:r1:i1:c0", 1), item=request)
    held.pop_due(now_ms=5_000)   # [request]
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class HeldRequests(Generic[T]):
    """A min-heap of items by due time, with one entry per ``ref`` (a request issued again
    while its first copy is held is not held twice)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable, T]] = []
        self._refs: set[Hashable] = set()
        self._order = itertools.count()  # ties in due time keep arrival order

    def hold(self, due_ms: int, ref: Hashable, item: T) -> bool:
        """Hold ``item`` until ``due_ms``; False if ``ref`` is held already."""
        if ref in self._refs:
            return False
        self._refs.add(ref)
        heapq.heappush(self._heap, (due_ms, next(self._order), ref, item))
        return True

    def __contains__(self, ref: Hashable) -> bool:
        return ref in self._refs

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def next_due(self) -> int | None:
        """The earliest due time held, if any."""
        return self._heap[0][0] if self._heap else None

    def count_by(self, key: Callable[[T], str]) -> dict[str, int]:
        """How many items are held per ``key(item)``: ``held.count_by(kind_of)`` ->
        ``{"TIMER": 3}``. Reads a copy of the heap (one step under the GIL), so a metrics
        thread may call it while the executor's threads hold and pop."""
        counts: dict[str, int] = {}
        for entry in list(self._heap):
            name = key(entry[3])
            counts[name] = counts.get(name, 0) + 1
        return counts

    def pop_due(self, now_ms: float) -> list[T]:
        """The items due at ``now_ms``, earliest first, no longer held."""
        heap, out = self._heap, []
        while heap and heap[0][0] <= now_ms:
            _, _, ref, item = heapq.heappop(heap)
            self._refs.discard(ref)
            out.append(item)
        return out

    def pop_first(self) -> tuple[int, T] | None:
        """The earliest item and its due time, whenever it is due (a runner with a virtual
        clock moves its time there)."""
        if not self._heap:
            return None
        due, _, ref, item = heapq.heappop(self._heap)
        self._refs.discard(ref)
        return due, item
