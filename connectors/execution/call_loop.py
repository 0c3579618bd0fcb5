"""Calls whose clients are asynchronous (a model connection's ``chat_async``), run as tasks
on an event loop of their own thread: a call that waits seconds on a provider holds a task
(some kilobytes), not a thread, so one process holds thousands at once. Sync calls keep the
executor's call threads.

At most ``limit`` are made at once (``max_calls_in_flight``): a call takes a place
first; the others wait in order, as tasks. Example::

    calls = CallLoop(limit=4096)

    async def perform() -> None:
        ...                                       # wait for the provider, then:
        async with calls.place():
            await make_the_call()

    calls.submit(perform)                         # from any thread
    calls.running                                 # how many hold a place now
    calls.close()                                 # waits for those submitted, then stops

The HTTP clients under it pool connections per host: litellm's (aiohttp) holds 500 per
host unless ``AIOHTTP_CONNECTOR_LIMIT_PER_HOST`` says more, read when litellm is imported:
:func:`size_pools` makes both of its limits the loop's, unless the environment set them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

#: What makes the coroutine of one call; it handles its own errors (an error that escapes
#: it is a bug: ``failed`` is told).
CallFactory = Callable[[], Coroutine[Any, Any, None]]


def size_pools(limit: int) -> None:
    """Let litellm's connection pool hold ``limit`` connections (in all, and to one host:
    a fleet usually talks to one provider), unless the environment says otherwise. Read
    at litellm's import: called before it."""
    for name in ("AIOHTTP_CONNECTOR_LIMIT", "AIOHTTP_CONNECTOR_LIMIT_PER_HOST"):
        os.environ.setdefault(name, str(limit))


class CallLoop:
    """An event loop on a daemon thread running call coroutines, ``limit`` at once."""

    def __init__(self, limit: int, failed: Callable[[BaseException], None],
                 name: str = "eddies-call-loop") -> None:
        if limit < 1:
            raise ValueError(f"limit: at least 1, got {limit}")
        self.limit = limit
        self.failed = failed
        self.running = 0  # coroutines holding a place now (read from other threads)
        self._loop = asyncio.new_event_loop()
        self._places: asyncio.Semaphore | None = None  # made on the loop's own thread
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: CallFactory) -> None:
        """Run ``call()`` on the loop when a place is free (thread-safe; returns at once)."""
        self._loop.call_soon_threadsafe(self._start, call)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the loop's thread soon (thread-safe; returns at once). After
        :meth:`close`, nothing (a partition released as the worker stops: no call is left)."""
        try:
            self._loop.call_soon_threadsafe(fn)
        except RuntimeError:  # closed meanwhile
            if not self._loop.is_closed():
                raise

    def _start(self, call: CallFactory) -> None:
        task = self._loop.create_task(self._guarded(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, call: CallFactory) -> None:
        try:
            await call()
        except asyncio.CancelledError:  # the loop stops
            raise
        except BaseException as err:  # the loop goes on; its owner decides
            self.failed(err)

    @contextlib.asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` places while the call is made (waits for one)."""
        if self._places is None:
            self._places = asyncio.Semaphore(self.limit)
        async with self._places:
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1

    def close(self, timeout: float | None = None) -> None:
        """Wait for the submitted calls to end (``timeout``: seconds at most), then stop the
        loop and its thread."""
        if self._loop.is_closed():
            return

        async def drained() -> None:
            while self._tasks:
                await asyncio.wait(list(self._tasks))

        waited = asyncio.run_coroutine_threadsafe(drained(), self._loop)
        try:
            waited.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
