"""Durable timers (ctx.sleep) and signals (ctx.wait_for_signal): due times from the logical
clock, held requests, signals kept until waited for, timeouts, crashes and replay."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, action
from eddies.connectors.local import RunFailedError
from eddies.engine import SessionMachine
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    SignalEvent,
)


class Reminder(Agent):
    @action(InputEvent)
    def remind(event: InputEvent, ctx: Any) -> None:
        ctx.sleep(timedelta(minutes=5))
        ctx.send_event(OutputEvent(output={"text": event.input, "at": ctx.now()}))


class Approval(Agent):
    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        try:
            answer = ctx.wait_for_signal(f"approve:{event.input}", timeout=60)
        except TimeoutError as err:
            answer = f"timed out: {err}"
        ctx.send_event(OutputEvent(output=answer))


class AsyncWaits(Agent):
    @action(InputEvent)
    async def both(event: InputEvent, ctx: Any) -> None:
        await ctx.sleep_async(2)
        value = await ctx.wait_for_signal_async("go")
        ctx.send_event(OutputEvent(output=[event.input, value, ctx.now()]))


def _requests(runner: LocalRunner, kind: CallKind) -> list[DurableCallRequest]:
    return [e.payload for e in runner.history
            if isinstance(e.payload, DurableCallRequest) and e.payload.kind is kind]


def _results(runner: LocalRunner, kind: CallKind) -> list[DurableCallResult]:
    return [e.payload for e in runner.history
            if isinstance(e.payload, DurableCallResult) and e.payload.kind is kind]


def test_a_timer_is_due_at_the_clock_plus_its_duration_and_moves_the_clock_there() -> None:
    runner = LocalRunner(Reminder())
    runner.submit("s1", "stretch", timestamp=1_000)
    runner.run_until_idle()
    [req] = _requests(runner, CallKind.TIMER)
    assert req.not_before == 1_000 + 300_000 and req.idempotent
    assert runner.outputs_for("s1") == [{"text": "stretch", "at": 301_000}]
    [fired] = _results(runner, CallKind.TIMER)
    assert fired.status is CallStatus.OK


def test_a_pending_timer_survives_a_crash_and_fires_once() -> None:
    runner = LocalRunner(Reminder())
    runner.submit("s1", "water", timestamp=1_000)
    for _ in range(2):  # the input; its timer request held
        runner.step()
    assert _requests(runner, CallKind.TIMER) and not _results(runner, CallKind.TIMER)
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert runner.outputs_for("s1") == [{"text": "water", "at": 301_000}]
    assert len(_results(runner, CallKind.TIMER)) == 1
    # A replay of the whole session from its journal waits for nothing and calls nothing.
    performed = runner.executor.performed
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert runner.executor.performed == 0 and performed == 1
    assert len(runner.outputs) == 1


def test_a_signal_answers_the_wait_for_its_name() -> None:
    runner = LocalRunner(Approval())
    runner.submit("s1", "order-7")
    for _ in range(2):  # the input; the wait's deadline held (it fires when all is quiet)
        runner.step()
    [req] = _requests(runner, CallKind.SIGNAL)
    assert req.target == "approve:order-7" and req.not_before is not None
    runner.signal("s1", "approve:other", False)  # another name: kept, not an answer
    runner.signal("s1", "approve:order-7", {"by": "ana"})
    runner.run_until_idle()
    assert runner.outputs_for("s1") == [{"by": "ana"}]
    accepted = [e for e in runner.history if isinstance(e.payload, SignalEvent)]
    [wait] = [e for e in runner.history if isinstance(e.payload, DurableCallRequest)]
    assert [e.causation_id for e in accepted] == [None, wait.event_id]
    assert runner.states["s1"].signals == {"approve:other": ["false"]}


def test_a_signal_sent_before_the_wait_is_kept_for_it() -> None:
    runner = LocalRunner(Approval())
    runner.signal("s1", "approve:order-8", "yes")
    runner.run_until_idle()
    runner.submit("s1", "order-8")
    runner.run_until_idle()
    assert runner.outputs_for("s1") == ["yes"]
    assert not _requests(runner, CallKind.SIGNAL)  # answered at once: nothing to hold
    assert runner.states["s1"].signals == {}


def test_a_wait_without_signal_times_out_and_a_late_signal_is_kept() -> None:
    runner = LocalRunner(Approval())
    runner.submit("s1", "order-9", timestamp=5_000)
    runner.run_until_idle()
    runner.run_until_idle()
    [out] = runner.outputs_for("s1")
    assert out.startswith("timed out: ") and "approve:order-9" in out
    assert _results(runner, CallKind.SIGNAL)[0].error.type == "TimeoutError"  # type: ignore[union-attr]
    runner.signal("s1", "approve:order-9", "late")
    runner.run_until_idle()
    assert runner.states["s1"].signals == {"approve:order-9": ['"late"']}


def test_a_repeated_signal_is_applied_once() -> None:
    runner = LocalRunner(Approval())
    runner.signal("s1", "approve:x", 1, event_id="sig-1")
    runner.signal("s1", "approve:x", 1, event_id="sig-1")
    runner.run_until_idle()
    assert runner.states["s1"].signals == {"approve:x": ["1"]}


def test_async_actions_sleep_and_wait_too() -> None:
    runner = LocalRunner(AsyncWaits())
    runner.submit("s1", "a", timestamp=10_000)
    runner.run_until_idle()
    assert not runner.outputs
    runner.signal("s1", "go", 42)
    runner.run_until_idle()
    [out] = runner.outputs_for("s1")
    assert out[:2] == ["a", 42] and out[2] >= 12_000


def test_a_wait_without_timeout_goes_to_no_executor() -> None:
    class Forever(Agent):
        @action(InputEvent)
        def wait(event: InputEvent, ctx: Any) -> None:
            ctx.send_event(OutputEvent(output=ctx.wait_for_signal("go")))

    machine = SessionMachine(Forever())
    state, out = machine.apply(machine.new_state("s"), AgentEvent.external(
        "s", InputEvent(1), event_id="i", timestamp=1))
    [req] = [e.payload for e in out if isinstance(e.payload, DurableCallRequest)]
    assert req.not_before is None and not req.for_executor
    # After a restart there is nothing to send again either: only a signal answers it.
    assert machine.resume(state)[1] == []
    state, out = machine.apply(state, AgentEvent.external(
        "s", SignalEvent("go", "now"), event_id="g", timestamp=2))
    assert [e.payload.output for e in out if isinstance(e.payload, OutputEvent)] == ["now"]


@pytest.mark.parametrize("bad", [-1, float("nan"), "5"])
def test_a_bad_duration_fails_the_run_naming_it(bad: Any) -> None:
    class Bad(Agent):
        @action(InputEvent)
        def wait(event: InputEvent, ctx: Any) -> None:
            ctx.sleep(bad)

    with pytest.raises(RunFailedError, match="sleep: the duration must be"):
        LocalRunner(Bad()).run([("s", 1)])


def test_a_timer_keeps_its_due_time_when_replayed_later() -> None:
    """The due time is decided when the call is first issued: a replay at a later clock
    (the action re-executed after another event) asks for the same call."""

    class TwoWaits(Agent):
        @action(InputEvent)
        def wait(event: InputEvent, ctx: Any) -> None:
            ctx.sleep(1)
            ctx.sleep(1)
            ctx.send_event(OutputEvent(output=ctx.now()))

    runner = LocalRunner(TwoWaits())
    runner.submit("s", 1, timestamp=100)
    runner.run_until_idle()
    assert [r.not_before for r in _requests(runner, CallKind.TIMER)] == [1_100, 2_100]
    assert runner.outputs_for("s") == [2_100]
