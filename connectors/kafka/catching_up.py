"""Catching up with a gained partition's journal before an idempotent call of it starts.

When a partition moves here from another process, that process may still be making its
calls, and journals their outcomes as they return. For a while after the gain
(:data:`GAINED_WINDOW_S`), an idempotent call of the partition first waits until this
executor's journal tail has read the partition to its end as it is then (its high
watermark): an outcome journaled before the call would start is answered from the
journal, not asked again. The calls that come within :data:`SHARED_S` of each other share
one such wait. A partition no other process wrote needs none. Example::

    catch_up = CatchUp(tail)
    catch_up.gained({0, 3})
    catch_up.wait(0)               # on a call thread
    await catch_up.wait_async(3)   # on the call loop
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import Future

from eddies.connectors.kafka.journal_tail import JournalTail

#: For this long after a partition is gained, its idempotent calls catch up first.
GAINED_WINDOW_S = 30.0
#: How long one catch-up may take before the call is made anyway (it is idempotent).
TIMEOUT_S = 2.0
#: Calls within this long of each other share one catch-up.
SHARED_S = 0.1


class CatchUp:
    """The catch-ups of one executor's gained partitions, for its call threads and its
    call loop alike."""

    def __init__(self, tail: JournalTail) -> None:
        self.tail = tail
        self._gained: dict[int, float] = {}  # journal partition -> when it was gained
        self._waits: dict[int, tuple[float, Future[bool]]] = {}  # the latest, by partition
        self._lock = threading.Lock()

    def gained(self, partitions: set[int]) -> None:
        """``partitions`` were just gained from another process (one that may still
        journal outcomes into them)."""
        now = time.monotonic()
        with self._lock:
            self._gained.update(dict.fromkeys(partitions, now))

    def needed(self, jpart: int) -> bool:
        """Whether a call of ``jpart`` catches up first (gained from another process in
        the last :data:`GAINED_WINDOW_S`)."""
        at = self._gained.get(jpart)
        return at is not None and time.monotonic() - at < GAINED_WINDOW_S

    def wait(self, jpart: int) -> None:
        """Catch up with ``jpart`` on this thread (at most :data:`TIMEOUT_S`, or its share
        of a wait begun just before)."""
        mine, done = self._join(jpart)
        if mine:
            self._ask(jpart, done)
            return
        with contextlib.suppress(TimeoutError):  # the asker was held up: the call is idempotent
            done.result(TIMEOUT_S * 2)

    async def wait_async(self, jpart: int) -> None:
        """:meth:`wait` for a task on an event loop: the loop goes on meanwhile."""
        mine, done = self._join(jpart)
        if mine:
            await asyncio.to_thread(self._ask, jpart, done)
        else:  # (shielded: a waiter cancelled must not cancel the others' wait)
            await asyncio.shield(asyncio.wrap_future(done))

    def _join(self, jpart: int) -> tuple[bool, Future[bool]]:
        """The wait to share for ``jpart``: (whether this caller asks it, its end)."""
        now = time.monotonic()
        with self._lock:
            entry = self._waits.get(jpart)
            if entry is not None and now - entry[0] <= SHARED_S:
                return False, entry[1]
            done: Future[bool] = Future()
            self._waits[jpart] = (now, done)
            return True, done

    def _ask(self, jpart: int, done: Future[bool]) -> None:
        try:
            done.set_result(self.tail.caught_up(jpart, TIMEOUT_S))
        except BaseException as err:
            done.set_exception(err)
            raise
