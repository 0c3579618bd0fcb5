"""Calls running with a ``timeout_ms``: which are past it, and which came back too late.

An executor cannot stop a Python call, so at its deadline it abandons it: the call's
outcome becomes a transient ``TimeoutError`` (retried by the call's policy), and whatever
the call returns later is dropped. Example::

    deadlines = CallDeadlines()
    deadlines.start(ref, 5_000, item)      # before the call
    ...
    for item in deadlines.expired():       # the executor's loop: answer these as timed out
        ...
    if not deadlines.finish(ref):          # after the call: False if it was abandoned
        drop_the_result()

A call on an event loop is cancelled at its deadline instead::

    value = await within(coroutine, req)   # or the call's timeout error
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

from eddies.events import DurableCallRequest

T = TypeVar("T")


def timed_out(req: DurableCallRequest) -> TimeoutError:
    """The error a call abandoned at its ``timeout_ms`` ends with (a transient one)."""
    return TimeoutError(f"{req.kind.value} {req.target} did not finish within "
                        f"timeout_ms={req.timeout_ms}; abandoned (a late result is ignored)")


async def within(call: Coroutine[Any, Any, T], req: DurableCallRequest,
                 expired: Callable[[], None] | None = None) -> T:
    """``call``'s result, or the call's timeout error once its ``timeout_ms`` is up (when
    ``expired()`` is called first); a TimeoutError of the call's own stays its own."""
    deadline = asyncio.timeout(req.timeout_ms / 1000 if req.timeout_ms else None)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if not deadline.expired():
            raise
        if expired is not None:
            expired()
        raise timed_out(req) from None


class CallDeadlines(Generic[T]):
    """The running calls that have a deadline (thread-safe: call threads start and
    finish them, the executor's loop expires them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, tuple[float, T]] = {}
        self._abandoned: set[Hashable] = set()

    def start(self, ref: Hashable, timeout_ms: int, item: T) -> None:
        """``ref``'s call starts now and may run ``timeout_ms``."""
        with self._lock:
            self._running[ref] = (time.monotonic() + timeout_ms / 1000, item)

    def finish(self, ref: Hashable) -> bool:
        """``ref``'s call returned: True if its outcome counts, False if it was abandoned."""
        with self._lock:
            if ref in self._abandoned:
                self._abandoned.discard(ref)
                return False
            self._running.pop(ref, None)
            return True

    def expired(self, now: float | None = None) -> list[T]:
        """The calls past their deadline, now abandoned (each returned once)."""
        if not self._running:
            return []
        now = time.monotonic() if now is None else now
        with self._lock:
            late = [ref for ref, (deadline, _) in self._running.items() if deadline <= now]
            items = [self._running.pop(ref)[1] for ref in late]
            self._abandoned.update(late)
        return items

    def __len__(self) -> int:
        return len(self._running)
