"""Requests held until their due time (``not_before``): timers and signal deadlines.

An executor holds them here instead of on a thread each, and dispatches each when it comes
due; ten thousand waiting timers are ten thousand heap entries. Example::

    held = HeldRequests()
    held.hold(due_ms=5_000, ref=("s1:r1:i1:c0", 1), item=request)
    held.pop_due(now_ms=5_000)   # [request]
    held.drop([("s1:r1:i1:c0", 1)])  # or, before then: no longer held
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class HeldRequests(Generic[T]):
    """A min-heap of items by due time, with one entry per ``ref`` (a request issued again
    while its first copy is held is not held twice). Items can be dropped before they are
    due (their call got its outcome otherwise: a signal came, its run ended)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        # ref -> (its heap entry's number, item); a heap entry whose number is not here
        # was dropped, and is skipped when it comes to the top.
        self._held: dict[Hashable, tuple[int, T]] = {}
        self._order = itertools.count()  # ties in due time keep arrival order

    def hold(self, due_ms: int, ref: Hashable, item: T) -> bool:
        """Hold ``item`` until ``due_ms``; False if ``ref`` is held already."""
        if ref in self._held:
            return False
        n = next(self._order)
        self._held[ref] = (n, item)
        heapq.heappush(self._heap, (due_ms, n, ref))
        return True

    def drop(self, refs: Iterable[Hashable]) -> list[T]:
        """Stop holding ``refs`` (those held); their items. The heap is rebuilt once most
        of its entries are dropped ones, so memory follows what is held."""
        out = [entry[1] for ref in refs if (entry := self._held.pop(ref, None)) is not None]
        heap = self._heap
        if out and len(heap) > 64 and len(self._held) < len(heap) // 2:
            held = self._held
            self._heap = [e for e in heap if (h := held.get(e[2])) is not None and h[0] == e[1]]
            heapq.heapify(self._heap)
        return out

    def __contains__(self, ref: Hashable) -> bool:
        return ref in self._held

    def __len__(self) -> int:
        return len(self._held)

    def _top(self) -> tuple[int, int, Hashable] | None:
        """The earliest entry still held (dropped ones at the top are discarded)."""
        heap, held = self._heap, self._held
        while heap:
            entry = heap[0]
            h = held.get(entry[2])
            if h is not None and h[0] == entry[1]:
                return entry
            heapq.heappop(heap)
        return None

    @property
    def next_due(self) -> int | None:
        """When the next item may be due, if any is held: the earliest due time, or a
        dropped item's before it (never later). It changes nothing, so another thread may
        read it while the owner holds, drops and pops under its lock."""
        return self._heap[0][0] if self._held and self._heap else None

    def count_by(self, key: Callable[[T], str]) -> dict[str, int]:
        """How many items are held per ``key(item)``: ``held.count_by(kind_of)`` ->
        ``{"TIMER": 3}``. Reads a copy (one step under the GIL), so a metrics thread may
        call it while the executor's threads hold and pop."""
        counts: dict[str, int] = {}
        for _, item in list(self._held.values()):
            name = key(item)
            counts[name] = counts.get(name, 0) + 1
        return counts

    def pop_due(self, now_ms: float) -> list[T]:
        """The items due at ``now_ms``, earliest first, no longer held."""
        out = []
        while (top := self._top()) is not None and top[0] <= now_ms:
            heapq.heappop(self._heap)
            out.append(self._held.pop(top[2])[1])
        return out

    def pop_first(self) -> tuple[int, T] | None:
        """The earliest item and its due time, whenever it is due (a runner with a virtual
        clock moves its time there)."""
        top = self._top()
        if top is None:
            return None
        heapq.heappop(self._heap)
        return top[0], self._held.pop(top[2])[1]
