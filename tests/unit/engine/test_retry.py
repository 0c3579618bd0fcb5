"""Retries of transient failures, with back-off on durable timers: the policy, its
configuration, and the machine asking again (every attempt an event)."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.engine import AgentPlan, SessionMachine
from eddies.engine.plan import PlanError
from eddies.engine.retry import RetryPolicy
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
)
from eddies.events.ids import result_event_id

TRANSIENT = ErrorInfo("RateLimitError", "slow down", True, ErrorCategory.TRANSIENT, 429)
PERMANENT = ErrorInfo("AuthenticationError", "bad key", False, ErrorCategory.PERMANENT, 401)


def test_backoff_doubles_up_to_its_cap_with_a_bounded_deterministic_jitter() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay_ms=1_000, max_delay_ms=8_000, jitter=0.2)
    delays = [policy.delay_ms("c", n, TRANSIENT) for n in range(1, 7)]
    for d, base in zip(delays, [1_000, 2_000, 4_000, 8_000, 8_000, 8_000], strict=True):
        assert d is not None and 0.8 * base <= d <= 1.2 * base
    assert delays == [policy.delay_ms("c", n, TRANSIENT) for n in range(1, 7)]  # replays agree
    assert len({policy.delay_ms(f"c{i}", 1, TRANSIENT) for i in range(20)}) > 10  # spread


def test_retry_after_wins_and_nothing_permanent_or_past_the_last_attempt_is_retried() -> None:
    policy = RetryPolicy(max_attempts=3, jitter=0)
    slow = ErrorInfo("RateLimitError", "", True, ErrorCategory.TRANSIENT, 429, retry_after_ms=7_000)
    assert policy.delay_ms("c", 1, slow) == 7_000
    assert policy.delay_ms("c", 1, PERMANENT) is None
    assert policy.delay_ms("c", 2, TRANSIENT) == 2_000
    assert policy.delay_ms("c", 3, TRANSIENT) is None


@pytest.mark.parametrize(("config", "named"), [
    ({"TOOLS": {}}, "'TOOLS' is not a call kind"),
    ({"TIMER": {}}, "'TIMER' is not a call kind"),
    ({"TOOL": {"retries": 3}}, "retry.TOOL.retries': unknown option"),
    ({"TOOL": {"max_attempts": 0}}, "retry.TOOL.max_attempts': 0 is out of range"),
    ({"TOOL": {"jitter": 2}}, "retry.TOOL.jitter': 2 is out of range"),
    ({"TOOL": 3}, "retry.TOOL': expected a mapping"),
])
def test_a_bad_retry_config_fails_the_plan_naming_it(config: Any, named: str) -> None:
    with pytest.raises(PlanError, match=named):
        AgentPlan.compile(Agent(config={"retry": config}))


def test_retry_config_overrides_the_defaults_per_kind() -> None:
    plan = AgentPlan.compile(Agent(config={"retry": {"FUNCTION": {"max_attempts": 2}}}))
    assert plan.retry[CallKind.FUNCTION].max_attempts == 2
    assert plan.retry[CallKind.CHAT_MODEL].max_attempts == 4  # a default


def flaky() -> str:
    return "ok"


class CallsFlaky(Agent):
    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        try:
            ctx.send_event(OutputEvent(output=ctx.durable_execute(flaky)))
        except Exception as err:
            ctx.send_event(OutputEvent(output=f"gave up: {type(err).__name__}"))


def _answer(request: AgentEvent, error: ErrorInfo | None, at: int) -> AgentEvent:
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    status = CallStatus.OK if error is None else CallStatus.ERROR
    value = '"ok"' if error is None else "null"
    return AgentEvent.external(request.session_id, DurableCallResult(
        req.call_id, req.kind, status, value, error, req.attempt, req.digest),
        event_id=result_event_id(req.call_id, req.attempt), timestamp=at)


def _request(out: list[AgentEvent]) -> AgentEvent:
    [req] = [e for e in out if isinstance(e.payload, DurableCallRequest)]
    return req


def test_a_transient_error_is_asked_again_after_the_backoff_then_succeeds() -> None:
    agent = CallsFlaky(config={"retry": {"FUNCTION": {"max_attempts": 3, "jitter": 0,
                                                      "base_delay_ms": 500}}})
    machine = SessionMachine(agent)
    state, out = machine.apply(machine.new_state("s"), AgentEvent.external(
        "s", InputEvent(1), event_id="i", timestamp=1_000))
    first = _request(out)
    state, out = machine.apply(state, _answer(first, TRANSIENT, 1_100))
    again = _request(out)
    assert isinstance(again.payload, DurableCallRequest)
    assert again.payload.attempt == 2 and again.payload.not_before == 1_600
    assert again.payload.digest == first.payload.digest  # type: ignore[union-attr]
    assert out[0].payload.status is CallStatus.ERROR  # type: ignore[union-attr]  # attempt 1, an event
    # After a restart the retry is asked again with its due time.
    assert machine.resume(state)[1][0].payload.not_before == 1_600  # type: ignore[union-attr]
    state, out = machine.apply(state, _answer(again, None, 1_600))
    outputs = [e.payload.output for e in out if isinstance(e.payload, OutputEvent)]
    assert outputs == ["ok"]
    result = out[0].payload
    assert isinstance(result, DurableCallResult) and result.attempt == 2  # it took two


def test_permanent_errors_and_exhausted_attempts_reach_the_action() -> None:
    machine = SessionMachine(CallsFlaky(config={"retry": {"FUNCTION": {"max_attempts": 2}}}))
    state, out = machine.apply(machine.new_state("s"), AgentEvent.external(
        "s", InputEvent(1), event_id="i", timestamp=1))
    state, out = machine.apply(state, _answer(_request(out), PERMANENT, 2))
    assert [e.payload.output for e in out if isinstance(e.payload, OutputEvent)] == [
        "gave up: DurableCallError"]
    state, out = machine.apply(state, AgentEvent.external(
        "s", InputEvent(2), event_id="i2", timestamp=3))
    state, out = machine.apply(state, _answer(_request(out), TRANSIENT, 4))
    state, out = machine.apply(state, _answer(_request(out), TRANSIENT, 5_000))
    assert [e.payload.output for e in out if isinstance(e.payload, OutputEvent)] == [
        "gave up: DurableCallError"]
