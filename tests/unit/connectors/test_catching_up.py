"""Catching up with a gained partition's journal: only where another process worked, one
wait shared by the calls that come together, on call threads and the call loop alike."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from eddies.connectors.kafka.catching_up import CatchUp


class _Tail:
    """A journal tail whose catch-up takes ``takes`` seconds and is counted."""

    def __init__(self, takes: float) -> None:
        self.takes = takes
        self.asked: list[int] = []

    def caught_up(self, partition: int, timeout: float) -> bool:
        self.asked.append(partition)
        time.sleep(self.takes)
        return True


def _catch_up(takes: float = 0.05) -> tuple[CatchUp, _Tail]:
    tail = _Tail(takes)
    return CatchUp(tail), tail  # type: ignore[arg-type]


def test_only_the_partitions_gained_from_another_process_catch_up() -> None:
    catch_up, _ = _catch_up()
    catch_up.gained({1})
    assert [catch_up.needed(p) for p in range(3)] == [False, True, False]


def test_call_threads_that_come_together_share_one_catch_up() -> None:
    catch_up, tail = _catch_up(takes=0.3)
    threads = [threading.Thread(target=catch_up.wait, args=(0,)) for _ in range(5)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert tail.asked == [0]
    assert time.monotonic() - began < 1.0  # the others waited for that one, not in turn
    catch_up.wait(1)  # another partition asks for itself
    assert tail.asked == [0, 1]


def test_calls_on_the_loop_share_one_catch_up_and_a_cancelled_one_stops_no_other() -> None:
    catch_up, tail = _catch_up(takes=0.3)

    async def run() -> list[Any]:
        tasks = [asyncio.ensure_future(catch_up.wait_async(0)) for _ in range(4)]
        await asyncio.sleep(0.05)
        tasks[1].cancel()  # (a call cut off at its timeout, say)
        return await asyncio.gather(*tasks, return_exceptions=True)

    done = asyncio.run(run())
    assert tail.asked == [0]
    assert [type(d).__name__ for d in done] == ["NoneType", "CancelledError", "NoneType", "NoneType"]


def test_a_later_call_asks_again() -> None:
    """An outcome journaled since the last catch-up is past that end: asked anew."""
    catch_up, tail = _catch_up(takes=0.0)
    catch_up.wait(0)
    time.sleep(0.15)
    catch_up.wait(0)
    assert tail.asked == [0, 0]
