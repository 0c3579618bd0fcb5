"""Call timeouts (carried by requests, enforced by executors) and the run deadline
(``request_timeout_ms``): a timer that fails a run still going when it fires."""

from __future__ import annotations

import time
from typing import Any

import pytest

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, action
from eddies.engine import AgentPlan, FunctionTool, ResourceType, SessionMachine
from eddies.engine.plan import PlanError
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
)
from eddies.events.ids import result_event_id

CALLS: list[float] = []


def sometimes_slow(n: int) -> int:
    CALLS.append(time.monotonic())
    if len(CALLS) == 1:
        time.sleep(1.0)  # past the timeout: abandoned
    return n * 2


class Slow(Agent):
    def __init__(self) -> None:
        super().__init__(config={"timeout_ms": {"FUNCTION": 200},
                                 "retry": {"FUNCTION": {"max_attempts": 2, "base_delay_ms": 10}}})

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(sometimes_slow, event.input)))


def test_a_call_past_its_timeout_is_abandoned_as_transient_and_retried() -> None:
    CALLS.clear()
    runner = LocalRunner(Slow())
    assert runner.run([("s", 21)]) == [42]
    results = [e.payload for e in runner.history if isinstance(e.payload, DurableCallResult)]
    assert [r.status for r in results] == [CallStatus.ERROR, CallStatus.OK]
    first = results[0].error
    assert first is not None and first.type == "TimeoutError"
    assert first.category is ErrorCategory.TRANSIENT and "timeout_ms=200" in first.message
    assert results[1].attempt == 2 and len(CALLS) == 2


class _AsyncClient:
    """A model connection with a synchronous and an asynchronous client that answer apart;
    the asynchronous one takes ``delay`` seconds, and notes whether it was cancelled."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.cancelled = False

    def chat(self, messages: Any, **_kw: Any) -> Any:
        from eddies.events import ChatMessage, MessageRole

        return ChatMessage(MessageRole.ASSISTANT, "sync")

    async def chat_async(self, messages: Any, **_kw: Any) -> Any:
        import asyncio

        from eddies.events import ChatMessage, MessageRole

        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ChatMessage(MessageRole.ASSISTANT, "async")


def test_a_local_runner_awaits_an_asynchronous_client_and_cancels_it_at_its_timeout() -> None:
    """LocalRunner makes a call whose client is asynchronous as a worker does (awaited on
    an event loop, not the synchronous client on a thread), and a call past its timeout_ms
    is cancelled there, not left running."""
    from eddies.engine import ChatModelSetup
    from tests.agents import OneCall

    def runner(delay: float, config: dict[str, Any]) -> tuple[LocalRunner, _AsyncClient]:
        conn = _AsyncClient(delay)
        agent = OneCall(config=config)
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
        agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="m"))
        return LocalRunner(agent), conn

    quick, _ = runner(0.0, {})
    assert quick.run([("s", "hi")]) == ["async"]
    slow, conn = runner(5.0, {"timeout_ms": {"CHAT_MODEL": 200},
                              "retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    started = time.monotonic()
    with pytest.raises(Exception, match="timeout_ms=200"):
        slow.run([("s", "hi")])
    assert time.monotonic() - started < 3.0
    deadline = time.monotonic() + 2
    while not conn.cancelled and time.monotonic() < deadline:
        time.sleep(0.01)
    assert conn.cancelled


def test_requests_carry_the_timeout_of_their_resource_or_kind() -> None:
    def lookup(q: str) -> str:
        """Look up q."""
        return q

    agent = Agent(config={"timeout_ms": {"TOOL": 9_000, "CHAT_MODEL": 60_000}})
    agent.add_resource("fast", ResourceType.TOOL, FunctionTool(lookup, name="fast", timeout_ms=500))
    agent.add_resource("plain", ResourceType.TOOL, FunctionTool(lookup, name="plain"))
    plan = AgentPlan.compile(agent)
    assert plan.call_timeout(CallKind.TOOL, "fast") == 500
    assert plan.call_timeout(CallKind.TOOL, "plain") == 9_000
    assert plan.call_timeout(CallKind.FUNCTION, "m:f") is None  # none unless configured
    assert plan.call_timeout(CallKind.TIMER, "sleep") is None


@pytest.mark.parametrize(("config", "named"), [
    ({"timeout_ms": {"TOOL": 0}}, "timeout_ms.TOOL': expected a positive"),
    ({"timeout_ms": {"SLEEP": 5}}, "'SLEEP' is not a call kind"),
    ({"request_timeout_ms": -1}, "request_timeout_ms': expected a positive"),
])
def test_bad_timeouts_fail_the_plan_naming_them(config: Any, named: str) -> None:
    with pytest.raises(PlanError, match=named):
        AgentPlan.compile(Agent(config=config))


class Waits(Agent):
    def __init__(self) -> None:
        super().__init__(config={"request_timeout_ms": 5_000})

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        ctx.sleep(event.input)
        ctx.send_event(OutputEvent(output=f"slept {event.input}"))


def _fire(request: AgentEvent, at: int) -> AgentEvent:
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    return AgentEvent.external(request.session_id, DurableCallResult(
        req.call_id, req.kind, CallStatus.OK, "null", None, req.attempt, req.digest),
        event_id=result_event_id(req.call_id, req.attempt), timestamp=at)


def test_the_run_deadline_fails_a_run_still_going_and_the_next_input_starts() -> None:
    machine = SessionMachine(Waits())
    state, out = machine.apply(machine.new_state("s"), AgentEvent.external(
        "s", InputEvent(60), event_id="i1", timestamp=1_000))
    deadline, sleep = [e for e in out if isinstance(e.payload, DurableCallRequest)]
    assert deadline.payload.target == "run-deadline"  # type: ignore[union-attr]
    assert deadline.payload.not_before == 6_000  # type: ignore[union-attr]
    assert sleep.payload.not_before == 61_000  # type: ignore[union-attr]
    state, out = machine.apply(state, AgentEvent.external(
        "s", InputEvent(1), event_id="i2", timestamp=2_000))  # queued behind the first
    assert machine.resume(state)[1][0].event_id == deadline.event_id  # survives restarts
    state, out = machine.apply(state, _fire(deadline, 6_000))
    [failed] = [e for e in out if isinstance(e.payload, OutputEvent)]
    assert failed.run == 1 and failed.payload.error is not None  # type: ignore[union-attr]
    assert failed.payload.error.type == "RunDeadlineError"  # type: ignore[union-attr]
    assert "request_timeout_ms=5000" in failed.payload.error.message  # type: ignore[union-attr]
    assert state.run is not None and state.run.number == 2  # the next input runs
    # The first run's timer, late, changes nothing.
    state, again = machine.apply(state, _fire(sleep, 61_000))
    assert again == []


def test_a_run_that_finishes_in_time_ignores_its_deadline() -> None:
    runner = LocalRunner(Waits())
    assert runner.run([("s", 1)]) == ["slept 1"]
    assert not any(isinstance(e.payload, OutputEvent) and e.payload.error for e in runner.history)
