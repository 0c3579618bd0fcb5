"""The MCP and A2A clients' own event loop: run from a call thread, or awaited from an
executor's call loop without a thread waiting; a timeout cancels the coroutine there."""

from __future__ import annotations

import asyncio

import pytest

from eddies.connectors.remote.loop_thread import LoopThread


def test_a_coroutine_on_the_loop_thread_is_run_from_a_thread_or_awaited_from_another_loop() -> None:
    there = LoopThread("test-loop")

    async def where() -> str:
        await asyncio.sleep(0.01)
        return "ran"

    assert there.run(where(), timeout=5) == "ran"

    async def from_another_loop() -> list[str]:
        return list(await asyncio.gather(*(there.run_async(where(), timeout=5) for _ in range(50))))

    assert asyncio.run(from_another_loop()) == ["ran"] * 50


def test_a_timeout_cancels_the_coroutine_on_the_loop_thread() -> None:
    there = LoopThread("test-loop")
    ended: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    with pytest.raises(TimeoutError):
        asyncio.run(there.run_async(slow(), timeout=0.1))
    there.run(asyncio.sleep(0.05), timeout=5)  # the loop thread had its turn to cancel it
    assert ended == ["cancelled"]
