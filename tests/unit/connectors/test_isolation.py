"""One session's failure is that session's (issue 53), on the in-process runner and the
shared parts every runner uses: a non-deterministic action fails its run, an action's
BaseException fails its run, and an error that escapes the machine halts its session
alone, on its last trusted state, until it is resumed."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, RunFailedError, action
from eddies.connectors.inspect.replay import replay
from eddies.connectors.inspect.sessions import summarize
from eddies.connectors.runtime.isolation import TrustedStates, reapply
from eddies.engine import SessionMachine, SessionState, halts
from eddies.engine.outcomes import CallOutcomes
from eddies.events import AgentEvent, DurableCallResult, ErrorInfo

_counter = itertools.count()


def echo(value: Any) -> Any:
    return value


class Unsteady(Agent):
    """Its first call's argument changes each time the action is executed: a mismatch
    when a result makes it run again (sessions named ``ok*`` are steady)."""

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        first = next(_counter) if ctx.session_id.startswith("bad") else 0
        a = ctx.durable_execute(echo, first)
        b = ctx.durable_execute(echo, event.input)
        ctx.send_event(OutputEvent(output=[a, b]))


class AsyncUnsteady(Agent):
    @action(InputEvent)
    async def go(event: InputEvent, ctx: Any) -> None:
        a = await ctx.durable_execute_async(echo, next(_counter))
        b = await ctx.durable_execute_async(echo, 2)
        ctx.send_event(OutputEvent(output=[a, b]))


class Cancelled(Agent):
    """Raises a BaseException that is not an Exception, for input "cancel"."""

    @action(InputEvent)
    async def go(event: InputEvent, ctx: Any) -> None:
        value = await ctx.durable_execute_async(echo, event.input)
        if value == "cancel":
            raise asyncio.CancelledError("the action was cancelled")
        ctx.short_term_memory.set("last", value)
        ctx.send_event(OutputEvent(output=value))


class Remembers(Agent):
    """Keeps a count of its inputs in short-term memory, after a call each."""

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        value = ctx.durable_execute(echo, event.input)
        n = (ctx.short_term_memory.get("n") or 0) + 1
        ctx.short_term_memory.set("n", n)
        ctx.send_event(OutputEvent(output=f"{n}:{value}"))


def _errors(runner: LocalRunner, sid: str) -> list[ErrorInfo]:
    return [o.payload.error for o in runner.outputs
            if o.session_id == sid and isinstance(o.payload, OutputEvent) and o.payload.error is not None]


def test_a_non_deterministic_action_fails_its_run_and_every_other_session_is_answered() -> None:
    runner = LocalRunner(Unsteady())
    inputs = [("ok1", "a"), ("bad", "b"), ("ok2", "c"), ("ok3", "d")]
    with pytest.raises(RunFailedError) as failed:
        runner.run(inputs)
    assert [(s, e.type) for s, _, e in failed.value.errors] == [("bad", "JournalMismatchError")]
    assert "with other arguments" in failed.value.errors[0][2].message
    for sid, value in [("ok1", "a"), ("ok2", "c"), ("ok3", "d")]:
        assert runner.outputs_for(sid) == [[0, value]]
    # The session goes on: its next run is executed (and fails the same way, alone).
    runner.submit("bad", "again")
    runner.submit("ok1", "e")
    runner.run_until_idle()
    assert [e.type for e in _errors(runner, "bad")] == ["JournalMismatchError"] * 2
    assert runner.outputs_for("ok1")[-1] == [0, "e"]


def test_an_async_action_that_differs_after_a_crash_fails_its_run() -> None:
    runner = LocalRunner(AsyncUnsteady())
    runner.submit("s1", 1)
    for _ in range(3):  # the input, its first call, the call's result
        runner.step()
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    [error] = _errors(runner, "s1")
    assert error.type == "JournalMismatchError"


def test_an_actions_base_exception_fails_its_run_and_the_session_goes_on() -> None:
    runner = LocalRunner(Cancelled())
    with pytest.raises(RunFailedError) as failed:
        runner.run([("s1", "cancel"), ("s1", "fine")])
    [(sid, run, error)] = failed.value.errors
    assert (sid, run, error.type, error.message) == ("s1", 1, "CancelledError",
                                                     "the action was cancelled")
    assert runner.outputs_for("s1")[-1] == "fine"


@pytest.fixture
def defect(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """An engine defect: accepting the result of a call of session "bad" whose value is
    in the set raises, after changing the state (as a real defect would)."""
    values: set[str] = set()
    accept = CallOutcomes.accept_result

    def broken(self: CallOutcomes, state: SessionState, ev: AgentEvent, result: DurableCallResult,
               out: list[AgentEvent]) -> None:
        if state.session_id == "bad" and orjson.loads(result.value or "null") in values:
            state.seq += 7  # half-changed
            state.memory["n"] = "999"
            raise KeyError("a defect in the engine")
        accept(self, state, ev, result, out)

    monkeypatch.setattr(CallOutcomes, "accept_result", broken)
    yield values


def test_an_engine_defect_halts_its_session_alone_until_resumed(defect: set[str]) -> None:
    runner = LocalRunner(Remembers())
    defect.update({"second", "x2"})
    runner.run([("bad", "first")])  # a run before the defect: memory n=1
    for sid, value in [("bad", "second"), ("ok", "x"), ("bad", "third"), ("ok", "y")]:
        runner.submit(sid, value)
    runner.run_until_idle()
    assert runner.outputs_for("ok") == ["1:x", "2:y"]
    [halt] = _errors(runner, "bad")
    assert halt.type == halts.HALTED
    assert "KeyError: 'a defect in the engine'" in halt.message and "eddies resume bad" in halt.message
    notice = runner.outputs[-1] if runner.outputs[-1].session_id == "bad" else next(
        o for o in runner.outputs if o.session_id == "bad" and o.payload.error is not None)
    assert notice.payload.output["fault"] is True
    state = runner.states["bad"]
    # Its state is the last trusted one, not what the defect left: the input queued
    # before it still waits in its queue; the result it failed on is parked.
    assert state.fault is not None and state.memory == {"n": "1"}
    assert [type(e.payload).__name__ for e in state.fault.parked] == ["DurableCallResult"]
    assert [e.payload.input for e in state.queue] == ["third"]
    runner.submit("bad", "fourth")  # a record that comes while it is halted waits too
    runner.run_until_idle()
    assert [type(e.payload).__name__ for e in state.fault.parked] == ["DurableCallResult", "InputEvent"]
    assert SessionState.from_bytes(state.to_bytes()) == state  # saved as any state
    assert not state.idle  # never closed as idle while it waits
    # Listed as halted, with why and the signal that resumes it (eddies sessions, eddies ui).
    listed = summarize("bad", runner.history)
    assert listed.status == "halted" and listed.waits == [state.fault.signal]
    assert "KeyError" in listed.to_dict()["reason"]
    # Fixed: resumed, the parked records are applied in order.
    defect.clear()
    runner.resume("bad")
    runner.run_until_idle()
    assert runner.outputs_for("bad")[-3:] == ["2:second", "3:third", "4:fourth"]
    assert runner.states["bad"].fault is None
    assert summarize("bad", runner.history).status == "answered"
    # Its history replays: the halt where it was recorded, the resume and what followed.
    report = replay(runner.plan, [(-1, e) for e in runner.history if e.session_id == "bad"], "bad")
    assert report.ok, [(s.status, s.seq, s.event.type) for s in report.mismatches]


def test_a_resume_that_fails_again_keeps_the_session_halted_with_its_records(
        defect: set[str]) -> None:
    runner = LocalRunner(Remembers())
    defect.add("one")
    runner.submit("bad", "one")
    runner.run_until_idle()
    runner.submit("bad", "two")
    runner.run_until_idle()
    first = runner.states["bad"].fault
    assert first is not None and len(first.parked) == 2
    runner.resume("bad")  # not fixed yet
    runner.run_until_idle()
    again = runner.states["bad"].fault
    assert again is not None and again.signal != first.signal
    assert [e.event_id for e in again.parked] == [e.event_id for e in first.parked]
    assert len(_errors(runner, "bad")) == 2  # announced anew, with the signal to use now
    defect.clear()
    runner.resume("bad")
    runner.run_until_idle()
    assert runner.outputs_for("bad")[-2:] == ["1:one", "2:two"]


def test_a_halted_session_survives_a_crash_and_halts_again_on_recovery(
        defect: set[str]) -> None:
    runner = LocalRunner(Remembers(), snapshot_every=1_000)  # recovered from its events
    defect.add("one")
    runner.submit("bad", "one")
    runner.run_until_idle()
    assert runner.states["bad"].fault is not None
    runner.crash()
    runner.recover()
    state = runner.states["bad"]
    assert state.fault is not None and state.memory == {}
    defect.clear()
    runner.resume("bad")
    runner.run_until_idle()
    assert runner.outputs_for("bad")[-1] == "1:one"


def test_trusted_states_give_the_state_before_the_failing_record() -> None:
    machine = SessionMachine(Remembers())
    trusted = TrustedStates()
    state: SessionState | None = None
    states: list[bytes] = []
    from tests.unit.engine.executor import answer

    events = [AgentEvent.external("s1", InputEvent(input=f"v{i}"), event_id=f"in{i}", timestamp=i)
              for i in range(3)]
    pending = list(events)
    while pending:
        ev = pending.pop(0)
        since = trusted.since.get("s1") or trusted.start("s1", state)
        current = state or machine.new_state("s1")
        current, out = machine.apply(current, ev)
        assert since is not None
        since.append(ev)
        state = current
        states.append(state.to_bytes())
        pending += [answer(machine, e) for e in out if type(e.payload).__name__ == "DurableCallRequest"]
    # Each record's state is rebuilt from the base and the records since (the last one
    # here: as if the next record failed).
    machine.evict("s1")
    rebuilt, emitted = trusted.rebuild(machine, "s1")
    assert rebuilt is not None and rebuilt.to_bytes() == states[-1] and emitted == []
    again, notices = reapply(machine, machine.new_state("s1"), [])
    assert again.seq == 0 and notices == []


def test_runs_keep_their_time_and_old_snapshots_still_load() -> None:
    runner = LocalRunner(Remembers())
    runner.submit("s1", "a", timestamp=5_000)
    runner.step()  # accepted: waits for its call
    state = runner.states["s1"]
    assert state.run is not None and state.run.time == 5_000
    d = state.to_dict()
    del d["run"]["time"]  # as a worker before this change saved it
    assert SessionState.from_dict(d).run.time == state.clock  # type: ignore[union-attr]
