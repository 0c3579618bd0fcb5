"""An asyncio event loop on a daemon thread of its own, started on first use: where the
MCP and A2A clients (async SDKs) live, called from any executor thread, or awaited from
another event loop (an executor's call loop) without holding a thread. Example::

    loop = LoopThread("eddies-mcp")
    value = loop.run(session.call_tool(...), timeout=20)   # TimeoutError after 20 s
    value = await loop.run_async(session.call_tool(...), timeout=20)  # from another loop
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any


class LoopThread:
    """One event loop, run forever on a daemon thread named ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def started(self) -> bool:
        """Whether the loop runs (nothing was ever run on it, else)."""
        return self._loop is not None

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True, name=self.name).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        """``coro``'s result, run on the loop (TimeoutError, and ``coro`` cancelled, after
        ``timeout`` s)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running())
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    async def run_async(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        """:meth:`run` awaited from another event loop: the awaiting task waits, no thread
        does (``coro`` is cancelled with it, or after ``timeout`` s)."""
        future = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._running()))
        return await asyncio.wait_for(future, timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(*args)`` on the loop, if it runs (else there is nothing to act on)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(fn, *args)


__all__ = ["LoopThread"]
