"""A provider's gate: calls wait, in order, for its limits (this executor's share of them)
and its Retry-After, before they start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from eddies.connectors.execution.provider_gates import ProviderGate, ProviderGates
from eddies.connectors.models.provider_limits import ProviderBusyError, ProviderLimits


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


async def _enter_all(gate: ProviderGate, n: int, tokens: int = 1, hold_s: float = 0.0,
                     used: int | None = None) -> list[tuple[int, float]]:
    """``n`` calls arriving together; (call, when it was let through), in the order let through."""
    began = time.monotonic()
    through: list[tuple[int, float]] = []

    async def one(i: int) -> None:
        waited = await gate.enter(tokens, lambda: True)
        assert waited is not None
        through.append((i, time.monotonic() - began))
        await asyncio.sleep(hold_s)
        gate.leave(tokens, used)

    await asyncio.gather(*(one(i) for i in range(n)))
    return through


def test_requests_per_minute_are_spaced_in_the_order_the_calls_came() -> None:
    gate = ProviderGate("llm", ProviderLimits(requests_per_minute=3000))  # one every 20 ms
    through = _run(lambda: _enter_all(gate, 26))
    assert [i for i, _ in through] == list(range(26))
    assert through[-1][1] >= 25 * 0.02 * 0.95  # no burst: 25 gaps of 20 ms
    assert through[-1][1] < 25 * 0.02 + 0.3
    assert gate.waits == 25 and gate.waited_s > 0 and gate.running == 0


def test_a_share_of_the_fleet_limit_is_the_rate_here() -> None:
    gate = ProviderGate("llm", ProviderLimits(requests_per_minute=6000))
    gate.share = 0.25  # this worker owns a quarter of the partitions: 25/s, 40 ms apart
    through = _run(lambda: _enter_all(gate, 11))
    assert through[-1][1] >= 10 * 0.04 * 0.95


def test_calls_at_once_hold_the_others_until_one_leaves() -> None:
    gate = ProviderGate("llm", ProviderLimits(calls_at_once=2))
    peak = 0

    async def main() -> None:
        nonlocal peak

        async def one() -> None:
            nonlocal peak
            assert await gate.enter(1, lambda: True) is not None
            peak = max(peak, gate.running)
            await asyncio.sleep(0.05)
            gate.leave(1, None)

        began = time.monotonic()
        await asyncio.gather(*(one() for _ in range(6)))
        assert time.monotonic() - began >= 3 * 0.05 * 0.9  # three rounds of two

    _run(main)
    assert peak == 2


def test_tokens_per_minute_count_the_estimate_then_what_the_reply_used() -> None:
    # 60,000 tokens a minute: 1,000 a second, a second's worth let through early.
    gate = ProviderGate("llm", ProviderLimits(tokens_per_minute=60_000))
    through = _run(lambda: _enter_all(gate, 4, tokens=500))
    # 2,000 tokens: the first three within the second ahead, the fourth half a second later.
    assert through[2][1] < 0.35 and 0.4 <= through[3][1] < 1.0
    # A reply that used four times its estimate pushes the next calls back.
    gate2 = ProviderGate("llm", ProviderLimits(tokens_per_minute=60_000))

    async def main() -> float:
        assert await gate2.enter(100, lambda: True) == 0.0
        gate2.leave(100, 1600)  # 1.6 s of tokens spent, 0.1 s estimated
        began = time.monotonic()
        await gate2.enter(100, lambda: True)
        gate2.leave(100, None)
        return time.monotonic() - began

    assert 0.4 <= _run(main) < 1.2


def test_a_retry_after_holds_every_call_to_the_provider() -> None:
    gate = ProviderGate("llm")  # no limits: only the provider's word holds calls back
    gate.hold(0.3)
    through = _run(lambda: _enter_all(gate, 3))
    assert all(at >= 0.28 for _, at in through)
    assert gate.held_calls == 3


def test_a_call_that_waits_past_max_wait_is_refused_not_made() -> None:
    gate = ProviderGate("llm", ProviderLimits(calls_at_once=1, max_wait_s=0.1))

    async def main() -> None:
        assert await gate.enter(1, lambda: True) == 0.0  # holds the only place
        with pytest.raises(ProviderBusyError, match=r"'llm'.*max_wait_s=0.1.*calls_at_once=1"):
            await gate.enter(1, lambda: True)
        assert gate.running == 1 and gate.waiting == 0

    _run(main)


def test_a_call_not_wanted_any_more_leaves_the_queue_without_taking_a_turn() -> None:
    gates = ProviderGates()
    gate = gates.gate("llm", ProviderLimits(requests_per_minute=600))  # 100 ms apart
    owned = {"p0": True, "p1": True}

    async def main() -> list[float | None]:
        assert await gate.enter(1, lambda: True) == 0.0
        waiting = [asyncio.ensure_future(gate.enter(1, lambda p=p: owned[p]))
                   for p in ("p1", "p0", "p0")]
        await asyncio.sleep(0.01)
        owned["p1"] = False  # its partition went to another worker
        gates.recut(0.5)
        return list(await asyncio.gather(*waiting))

    first, second, third = _run(main)
    assert first is None  # dropped: its new owner makes it
    # the next one took the turn it left; the one after at the new share's spacing (200 ms)
    assert second is not None and 0.08 < second < 0.25
    assert third is not None and 0.28 < third < 0.6


def test_limits_read_from_a_mapping_name_what_is_wrong() -> None:
    assert ProviderLimits.of({"requests_per_minute": "600", "calls_at_once": 8.0}) == \
        ProviderLimits(calls_at_once=8, requests_per_minute=600.0)
    with pytest.raises(ValueError, match=r"limits.request_per_minute: not a provider limit"):
        ProviderLimits.of({"request_per_minute": 600})
    with pytest.raises(ValueError, match=r"limits.tokens_per_minute: a positive number, got -1"):
        ProviderLimits(tokens_per_minute=-1)
    with pytest.raises(ValueError, match=r"limits.calls_at_once: a whole number"):
        ProviderLimits.of({"calls_at_once": 2.5})


def test_limits_on_a_connection_without_an_asynchronous_client_fail_at_start_naming_it() -> None:
    """Limits hold the calls made on the call loop; a connection with chat only would have
    its calls made on threads, unlimited: the worker refuses to start, naming it."""
    from eddies.connectors.execution.provider_gates import unenforced
    from eddies.connectors.execution.warming import every_resource
    from eddies.connectors.models.litellm import LiteLLMChatModel
    from eddies.engine import AgentPlan, ChatModelSetup, ResourceType
    from tests.agents import OneCall

    class SyncOnly:
        limits = ProviderLimits(requests_per_minute=60)

        def chat(self, messages: Any, **kwargs: Any) -> Any:
            raise AssertionError("not called")

    agent = OneCall()
    agent.add_resource("fine", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(limits={"requests_per_minute": 60}))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, SyncOnly())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="m"))
    why = unenforced(every_resource(AgentPlan.compile(agent)))
    assert why is not None and why.startswith("conn: limits: SyncOnly has no asynchronous client")
    SyncOnly.limits = ProviderLimits()  # none declared: nothing to hold
    assert unenforced(every_resource(AgentPlan.compile(agent))) is None
