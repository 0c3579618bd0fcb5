"""Durable calls: exactly-once side effects across crashes, errors, reconcilers, replay rules."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from eddies import (
    Agent,
    DurableCall,
    DurableCallError,
    DurableCallUnknownError,
    InputEvent,
    LocalRunner,
    OutputEvent,
    action,
)
from eddies.connectors.local import RunFailedError
from eddies.events import CallStatus, DurableCallRequest, DurableCallResult

EFFECTS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    EFFECTS.clear()


def charge(account: str, amount: int) -> str:
    EFFECTS[f"charge:{account}"] += 1
    return f"receipt-{account}-{amount}"


def notify(receipt: str) -> str:
    EFFECTS[f"notify:{receipt}"] += 1
    return f"sent {receipt}"


class Payment(Agent):
    @action(InputEvent)
    def pay(event: InputEvent, ctx: Any) -> None:
        receipt = ctx.durable_execute(charge, event.input, 10)
        message = ctx.durable_execute(notify, receipt)
        ctx.send_event(OutputEvent(output=message))


def _step_until(runner: LocalRunner, predicate: Any) -> None:
    for _ in range(1000):
        if predicate():
            return
        assert runner.step(), "ran out of work before the condition held"
    raise AssertionError("condition never held")


def _applied_results(runner: LocalRunner) -> list[str]:
    return [e.payload.call_id for e in runner.history if isinstance(e.payload, DurableCallResult)]


def test_crash_between_two_durable_calls() -> None:
    runner = LocalRunner(Payment())
    runner.submit("s1", "acct-1")
    # Run until the first call's result has been applied and the second call was requested.
    _step_until(runner, lambda: len(_applied_results(runner)) == 1)
    assert EFFECTS == {"charge:acct-1": 1}
    assert any(isinstance(e.payload, DurableCallRequest) and e.payload.call_id.endswith("c1")
               for e in runner.history)

    runner.crash()  # every in-memory state is gone; only the journal survives
    assert runner.states == {}
    runner.recover()
    runner.run_until_idle()

    assert EFFECTS == {"charge:acct-1": 1, "notify:receipt-acct-1-10": 1}
    assert runner.outputs_for("s1") == ["sent receipt-acct-1-10"]
    assert len(runner.outputs) == 1


def test_crash_after_output_redelivers_nothing() -> None:
    runner = LocalRunner(Payment(), snapshot_every=1)
    assert runner.run([("s1", "a"), ("s2", "b")]) == ["sent receipt-a-10", "sent receipt-b-10"]
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert len(runner.outputs) == 2
    assert EFFECTS["charge:a"] == 1 and EFFECTS["charge:b"] == 1
    # The session goes on after recovery.
    assert runner.run([("s1", "c")]) == ["sent receipt-c-10"]


def flaky(x: int) -> int:
    EFFECTS["flaky"] += 1
    raise ValueError(f"bad input {x}")


class Catches(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        try:
            ctx.durable_execute(flaky, event.input)
        except ValueError as err:  # the built-in type still matches
            assert isinstance(err, DurableCallError)
            ctx.short_term_memory.set("seen", str(err))
            # A second call after the failed one forces a replay of the action.
            ctx.send_event(OutputEvent(output=ctx.durable_execute(str.lower, str(err))))


def test_exception_in_a_durable_call_reaches_the_action_and_replays_without_calling() -> None:
    runner = LocalRunner(Catches())
    assert runner.run([("s1", 7)]) == ["valueerror: bad input 7"]
    assert EFFECTS["flaky"] == 1  # the action ran three times, the function once
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert EFFECTS["flaky"] == 1


def check_charge(account: str, amount: int) -> str:
    EFFECTS["reconciled"] += 1
    return f"receipt-{account}-{amount}-found"


class ReconciledPayment(Agent):
    @action(InputEvent)
    def pay(event: InputEvent, ctx: Any) -> None:
        receipt = ctx.durable_execute(charge, event.input, 10, reconciler=check_charge)
        ctx.send_event(OutputEvent(output=receipt))


def _crash_during_first_call(runner: LocalRunner) -> None:
    """Model a process dying while the call runs: it started (journaled), no outcome."""
    runner.submit("s1", "acct")
    _step_until(runner, lambda: any(isinstance(e.payload, DurableCallRequest)
                                     for e in runner.history))
    request = runner._work[0]
    assert isinstance(request.payload, DurableCallRequest)
    runner.journal.mark_started(request.payload.call_id, request.payload.attempt)
    runner.crash()
    runner.recover()


def test_a_call_with_unknown_outcome_goes_to_its_reconciler() -> None:
    runner = LocalRunner(ReconciledPayment())
    _crash_during_first_call(runner)
    runner.run_until_idle()
    assert EFFECTS == {"reconciled": 1}  # the charge itself was not run again
    assert runner.outputs_for("s1") == ["receipt-acct-10-found"]
    statuses = [e.payload.status for e in runner.history if isinstance(e.payload, DurableCallResult)]
    assert statuses == [CallStatus.UNKNOWN, CallStatus.OK]


def test_a_call_with_unknown_outcome_and_no_reconciler_fails_closed() -> None:
    runner = LocalRunner(Payment())
    _crash_during_first_call(runner)
    with pytest.raises(RunFailedError, match="DurableCallUnknownError"):
        runner.run([])
    assert EFFECTS == {}


def idempotent_lookup(key: str) -> str:
    EFFECTS["lookup"] += 1
    return key.upper()


class Lookup(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(idempotent_lookup, event.input,
                                                              idempotent=True)))


def test_an_idempotent_call_is_simply_run_again() -> None:
    runner = LocalRunner(Lookup())
    _crash_during_first_call(runner)
    runner.run_until_idle()
    assert runner.outputs_for("s1") == ["ACCT"]
    assert EFFECTS["lookup"] == 1


class CatchesUnknown(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        try:
            ctx.durable_execute(charge, event.input, 10)
        except DurableCallUnknownError as err:
            ctx.send_event(OutputEvent(output=f"needs a human: {err.call_id}"))


def test_unknown_outcome_error_can_be_handled_by_the_action() -> None:
    runner = LocalRunner(CatchesUnknown())
    _crash_during_first_call(runner)
    runner.run_until_idle()
    assert runner.outputs_for("s1") == ["needs a human: s1:r1:i1:c0"]


DRIFT = {"amount": 10}


class Drifting(Agent):
    """Non-deterministic: its arguments depend on a global that changes across a crash."""

    @action(InputEvent)
    def pay(event: InputEvent, ctx: Any) -> None:
        first = ctx.durable_execute(charge, event.input, DRIFT["amount"])
        second = ctx.durable_execute(notify, first)
        ctx.send_event(OutputEvent(output=second))


def test_replay_that_diverges_from_the_journal_fails_the_run_without_calling() -> None:
    runner = LocalRunner(Drifting())
    runner.submit("s1", "acct")
    _step_until(runner, lambda: len(_applied_results(runner)) == 1)
    DRIFT["amount"] = 99  # the code now asks for a different first call
    try:
        runner.crash()
        runner.recover()
        runner.run_until_idle()
    finally:
        DRIFT["amount"] = 10
    assert EFFECTS == {"charge:acct": 1}  # neither the new charge nor notify ran
    [failed] = runner.outputs
    error = failed.payload.error  # type: ignore[attr-defined]
    assert error.type == "JournalMismatchError"
    assert "s1:r1:i1:c0" in error.message and "charge" in error.message


class Parallel(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        outcomes = await ctx.durable_execute_all_async([
            DurableCall(charge, ("a", 1)),
            DurableCall(flaky, (2,)),
            DurableCall(charge, ("b", 2)),
        ])
        ctx.send_event(OutputEvent(output=[
            o.value if o.is_success() else type(o.error).__mro__[2].__name__ for o in outcomes
        ]))


def test_durable_execute_all_async_issues_calls_together_and_keeps_order() -> None:
    runner = LocalRunner(Parallel())
    runner.submit("s1", None)
    runner.step()  # apply the input
    requests = [e for e in runner.history if isinstance(e.payload, DurableCallRequest)]
    assert len(requests) == 3  # all issued before any result
    runner.run_until_idle()
    assert runner.outputs_for("s1") == [["receipt-a-1", "ValueError", "receipt-b-2"]]


class AwaitsOther(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        import asyncio

        await asyncio.sleep(0)


def test_awaiting_anything_else_fails_the_run_clearly() -> None:
    with pytest.raises(RunFailedError, match="may only await"):
        LocalRunner(AwaitsOther()).run([("s1", 1)])


async def async_double(x: int) -> int:
    return x * 2


class AsyncCalls(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        a = await ctx.durable_execute_async(async_double, event.input)
        b = await ctx.durable_execute_async(async_double, a)
        ctx.send_event(OutputEvent(output=b))


def test_async_actions_and_async_functions() -> None:
    runner = LocalRunner(AsyncCalls())
    assert runner.run([("s1", 3), ("s2", 5)]) == [12, 20]
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    assert runner.run([("s1", 1)]) == [4]


def test_transient_caches_are_empty_after_runs_and_evictable() -> None:
    runner = LocalRunner(AsyncCalls())
    runner.run([("s1", 1), ("s2", 2)])
    assert runner.machine.cached == 0
    runner.submit("s3", 5)
    runner.step()  # the action is now suspended at its first call
    assert runner.machine.cached == 3  # its continuation, its function and its arguments
    runner.machine.evict("s3")
    assert runner.machine.cached == 0
    runner.run_until_idle()  # still completes: the action is replayed from the state
    assert runner.outputs_for("s3") == [20]


def test_evicting_many_sessions_at_once_drops_only_theirs() -> None:
    runner = LocalRunner(AsyncCalls())
    for sid in ("a", "b", "c"):
        runner.submit(sid, 1)
    for _ in range(3):
        runner.step()  # each input: its action suspended at its first call
    assert runner.machine.cached == 9
    runner.machine.evict("a", "c")
    assert runner.machine.cached == 3  # b's continuation, function and arguments stay
    runner.run_until_idle()
    assert [runner.outputs_for(s) for s in ("a", "b", "c")] == [[4], [4], [4]]


def test_an_idempotent_call_that_never_gets_an_outcome_fails_closed_eventually() -> None:
    from eddies.engine import SessionMachine
    from eddies.events import AgentEvent, CallStatus, InputEvent
    from tests.unit.engine.executor import answer

    machine = SessionMachine(Lookup())
    state = machine.new_state("s1")
    state, out = machine.apply(state, AgentEvent.external("s1", InputEvent("k"), event_id="i",
                                                          timestamp=1))
    request = out[-1]
    for _ in range(10):  # an executor that keeps answering "unknown"
        state, out = machine.apply(state, answer(machine, request, status=CallStatus.UNKNOWN))
        if out[-1].type == "OutputEvent":
            break
        request = out[-1]
    final = out[-1].payload
    assert final.error is not None and final.error.type == "DurableCallUnknownError"  # type: ignore[attr-defined]
    assert "tried 5 times" in final.error.message  # type: ignore[attr-defined]
    assert EFFECTS["lookup"] == 0


@pytest.mark.parametrize("agent", [ReconciledPayment, Lookup], ids=["reconciler", "idempotent"])
def test_a_restored_state_asks_again_with_the_calls_arguments_without_a_resume(agent: type) -> None:
    """Arguments of a call in flight are not in the session state (a model call's would be
    the conversation); a machine that restored the state without ``resume`` (the Flink job)
    replays the waiting action to ask again with them."""
    from eddies.engine import SessionMachine, SessionState
    from eddies.events import AgentEvent, CallKind, CallStatus, InputEvent
    from tests.unit.engine.executor import answer

    machine = SessionMachine(agent())
    state, out = machine.apply(machine.new_state("s1"), AgentEvent.external(
        "s1", InputEvent("acct-1234"), event_id="i", timestamp=1))
    request = out[-1]
    assert isinstance(request.payload, DurableCallRequest) and "acct-1234" in request.payload.args
    saved = state.to_bytes()
    assert b"acct-1234" in saved  # the input, which the run's trigger holds
    assert saved.count(b"acct-1234") == 1  # but not the call's arguments
    fresh = SessionMachine(agent())
    restored = SessionState.from_bytes(saved)
    restored, out = fresh.apply(restored, answer(fresh, request, status=CallStatus.UNKNOWN))
    again = out[-1].payload
    assert isinstance(again, DurableCallRequest) and again.attempt == 2
    assert again.args == request.payload.args
    assert again.kind is (CallKind.RECONCILE if agent is ReconciledPayment else request.payload.kind)


class StepsByInput(Agent):
    """As many durable calls as the input says, one after another, then the input back."""

    @action(InputEvent)
    def count(event: InputEvent, ctx: Any) -> None:
        for step in range(event.input):
            ctx.durable_execute(async_double, step)
        ctx.send_event(OutputEvent(output=event.input))


def test_run_returns_the_outputs_in_the_order_of_the_inputs() -> None:
    """s1's run makes three calls and finishes after s2's, which makes none: the outputs
    still come back as the inputs came (``outputs`` keeps the order they finished in)."""
    runner = LocalRunner(StepsByInput())
    assert runner.run([("s1", 3), ("s2", 0), ("s1", 1), ("s3", 2)]) == [3, 0, 1, 2]
    assert runner.outputs[0].payload.output == 0  # s2 finished first


class TwoOrNone(Agent):
    """Two outputs for "two", none for "none" (the session's next input answers)."""

    @action(InputEvent)
    def answer(event: InputEvent, ctx: Any) -> None:
        if event.input == "two":
            ctx.send_event(OutputEvent(output="two-a"))
            ctx.send_event(OutputEvent(output="two-b"))
        elif event.input != "none":
            ctx.send_event(OutputEvent(output=event.input))


def test_a_run_with_two_outputs_keeps_both_before_the_next_input_s() -> None:
    """The sessions of the outputs come as the inputs' did (s1, s2, s1), yet s1's two
    outputs are its first run's: both before s2's."""
    outputs = LocalRunner(TwoOrNone()).run([("s1", "two"), ("s2", "x"), ("s1", "none")])
    assert outputs == ["two-a", "two-b", "x"]
