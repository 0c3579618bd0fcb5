"""Limits of the session machine: memory, runs and sessions a runner fails, malformed envelopes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from eddies import Agent, AgentEvent, InputEvent, OutputEvent, SessionMachine, SessionState, action
from eddies.engine import UnsupportedEventError
from eddies.engine.plan import OPTIONS
from eddies.events import (
    MAX_TIMESTAMP_MS,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    encode,
)
from tests.agents import Echo
from tests.unit.engine.executor import answer


class Remember(Agent):
    """Stores its input under ``m`` (or deletes ``m`` and stores under ``other``), then answers."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        value = event.input
        if isinstance(value, dict) and "move" in value:
            ctx.short_term_memory.delete("m")
            ctx.short_term_memory.set("other", value["move"])
        else:
            ctx.short_term_memory.set("m", value)
        ctx.send_event(OutputEvent(output="stored"))


class Slow(Agent):
    """Each run makes one durable call, so later inputs queue behind it."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(str.upper, event.input)))


ERR = ErrorInfo("RecordTooLargeError", "event 3 is too large")


def inp(value: Any, event_id: str, timestamp: int = 10, sid: str = "s1") -> AgentEvent:
    return AgentEvent.external(sid, InputEvent(value), event_id=event_id, timestamp=timestamp)


def outputs(events: list[AgentEvent]) -> list[OutputEvent]:
    return [e.payload for e in events if isinstance(e.payload, OutputEvent)]


def requests(events: list[AgentEvent]) -> list[AgentEvent]:
    return [e for e in events if isinstance(e.payload, DurableCallRequest)]


# --- the memory limit ----------------------------------------------------------------------

def test_the_default_memory_limit_is_half_a_mebibyte() -> None:
    assert OPTIONS["max_memory_bytes"] == 524_288
    machine = SessionMachine(Remember())
    state, out = machine.apply(machine.new_state("s1"), inp("x" * 524_285, "a"))  # 1 + 524_287 chars
    assert outputs(out) == [OutputEvent("stored")]
    state, out = machine.apply(state, inp("x" * 524_286, "b"))
    assert [o.error.type for o in outputs(out) if o.error] == ["MemoryLimitError"]


def test_memory_up_to_the_limit_is_committed() -> None:
    machine = SessionMachine(Remember(), max_memory_bytes=100)
    # "m" and the JSON text '"xx..x"': 1 + 97 + 2 = 100 characters.
    state, out = machine.apply(machine.new_state("s1"), inp("x" * 97, "a"))
    assert outputs(out) == [OutputEvent("stored")]
    assert state.memory == {"m": '"' + "x" * 97 + '"'}


def test_writes_over_the_memory_limit_fail_the_run_and_are_discarded() -> None:
    machine = SessionMachine(Remember(), max_memory_bytes=100)
    state, _ = machine.apply(machine.new_state("s1"), inp("first", "a"))
    before = dict(state.memory)
    state, out = machine.apply(state, inp("x" * 98, "b"))  # 101 characters
    assert [e.type for e in out] == ["InputEvent", "OutputEvent"]  # its own output is dropped
    failed = out[-1]
    assert isinstance(failed.payload, OutputEvent) and failed.payload.output is None
    assert failed.payload.error is not None and failed.payload.error.type == "MemoryLimitError"
    assert "101 bytes, over max_memory_bytes=100" in failed.payload.error.message
    assert (failed.run, failed.causation_id, failed.action) == (2, "b", "start")
    assert state.memory == before == {"m": '"first"'}
    assert state.idle and machine.stats["runs_failed"] == 1
    # The session goes on.
    state, out = machine.apply(state, inp("third", "c"))
    assert outputs(out) == [OutputEvent("stored")]
    assert state.memory == {"m": '"third"'}


def test_the_limit_counts_the_memory_after_the_writes() -> None:
    machine = SessionMachine(Remember(), max_memory_bytes=100)
    state, _ = machine.apply(machine.new_state("s1"), inp("x" * 90, "a"))
    # Deleting m makes room: other + 92 characters = 97, while m + other would be 190.
    state, out = machine.apply(state, inp({"move": "y" * 90}, "b"))
    assert outputs(out) == [OutputEvent("stored")]
    assert state.memory == {"other": '"' + "y" * 90 + '"'}


def test_the_limit_counts_bytes_not_characters() -> None:
    # The limit exists so that a runner can save the memory in one record, which holds
    # bytes: 40 CJK characters are 120 bytes of UTF-8 (the JSON text keeps them as they are).
    machine = SessionMachine(Remember(), max_memory_bytes=100)
    state, out = machine.apply(machine.new_state("s1"), inp("\u4e2d" * 40, "a"))  # 1 + 2 + 120 bytes
    assert [o.error.type for o in outputs(out) if o.error] == ["MemoryLimitError"]
    assert state.memory == {}


class Reader(Agent):
    """Reads its memory and answers with it; writes nothing."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=len(ctx.short_term_memory.get("m", ""))))


def test_an_action_that_writes_nothing_runs_whatever_the_memory_holds() -> None:
    machine = SessionMachine(Reader(), max_memory_bytes=10)
    state = machine.new_state("s1")
    state.memory["m"] = '"' + "x" * 50 + '"'  # saved under a higher limit
    state, out = machine.apply(state, inp("a", "in-1"))
    assert outputs(out) == [OutputEvent(50)]


def test_the_runners_limit_only_lowers_the_agents() -> None:
    agent_limit = SessionMachine(Remember(config={"max_memory_bytes": 50}), max_memory_bytes=1_000)
    _, out = agent_limit.apply(agent_limit.new_state("s1"), inp("x" * 48, "a"))  # 51 characters
    assert [o.error.type for o in outputs(out) if o.error] == ["MemoryLimitError"]
    _, out = agent_limit.apply(agent_limit.new_state("s2"), inp("x" * 47, "a", sid="s2"))
    assert outputs(out) == [OutputEvent("stored")]
    runner_limit = SessionMachine(Remember(config={"max_memory_bytes": 1_000}), max_memory_bytes=50)
    _, out = runner_limit.apply(runner_limit.new_state("s1"), inp("x" * 48, "a"))
    assert [o.error.type for o in outputs(out) if o.error] == ["MemoryLimitError"]


# --- fail_run --------------------------------------------------------------------------------

def test_failing_the_running_run_ends_it_and_starts_the_next() -> None:
    machine = SessionMachine(Slow())
    state, out = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    first_call = requests(out)[0]
    state, _ = machine.apply(state, inp("b", "in-2"))
    seq = state.seq
    state, out = machine.fail_run(state, 1, ERR, cause="ev-3")
    assert [(e.type, e.run) for e in out] == [("OutputEvent", 1), ("DurableCallRequest", 2)]
    failed = out[0]
    assert failed.payload == OutputEvent(None, ERR)
    assert (failed.causation_id, failed.action, failed.seq) == ("ev-3", "start", seq + 1)
    assert state.run is not None and state.run.number == 2 and not state.queue
    assert machine.callable_for(first_call.payload) is None  # type: ignore[arg-type]
    assert machine.stats["runs_failed"] == 1
    # The failed run's late result is ignored; the next run finishes normally.
    seq, duplicates = state.seq, machine.stats["duplicates"]
    state, late = machine.apply(state, answer(machine, first_call))
    assert late == [] and state.seq == seq and machine.stats["duplicates"] == duplicates + 1
    state, out = machine.apply(state, answer(machine, requests(out)[0]))
    assert outputs(out) == [OutputEvent("B")]
    assert state.idle


def test_failing_the_running_run_without_a_cause_names_its_input() -> None:
    machine = SessionMachine(Slow())
    state, _ = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    state, out = machine.fail_run(state, 1, ERR)
    assert [(e.type, e.run, e.causation_id) for e in out] == [("OutputEvent", 1, "in-1")]
    assert state.idle


def test_failing_a_finished_run_only_adds_its_failed_output() -> None:
    machine = SessionMachine(Remember())
    state, _ = machine.apply(machine.new_state("s1"), inp("a", "in-1", timestamp=77))
    before = state.to_dict()
    state, out = machine.fail_run(state, 1, ERR, cause="ev-2")
    assert len(out) == 1
    failed = out[0]
    assert failed.payload == OutputEvent(None, ERR)
    assert (failed.run, failed.seq, failed.causation_id, failed.action, failed.timestamp) == (
        1, before["seq"] + 1, "ev-2", None, 77)
    assert state.to_dict() == {**before, "seq": before["seq"] + 1}


def test_failing_a_finished_run_leaves_the_running_one_alone() -> None:
    machine = SessionMachine(Slow())
    state, out = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    state, out = machine.apply(state, answer(machine, requests(out)[0]))
    state, out = machine.apply(state, inp("b", "in-2"))
    running = state.run
    assert running is not None and running.number == 2
    state, failed = machine.fail_run(state, 1, ERR)
    assert [(e.type, e.run) for e in failed] == [("OutputEvent", 1)]
    assert state.run is running
    state, out = machine.apply(state, answer(machine, requests(out)[0]))
    assert outputs(out) == [OutputEvent("B")]


# --- fail_session ----------------------------------------------------------------------------

def test_failing_a_session_fails_the_running_run_and_every_queued_input() -> None:
    machine = SessionMachine(Slow())
    state, out = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    first_call = requests(out)[0]
    state, _ = machine.apply(state, inp("b", "in-2"))
    state, _ = machine.apply(state, inp("c", "in-3"))
    state.memory["kept"] = '"yes"'
    state, out = machine.fail_session(state, ERR)
    assert [(e.type, e.run, e.causation_id) for e in out] == [
        ("OutputEvent", 1, "in-1"), ("OutputEvent", 2, "in-2"), ("OutputEvent", 3, "in-3")]
    assert all(e.payload == OutputEvent(None, ERR) for e in out)
    assert [e.seq for e in out] == [out[0].seq, out[0].seq + 1, out[0].seq + 2]
    assert state.idle and state.memory == {"kept": '"yes"'}
    assert machine.stats["runs_failed"] == 3
    state, late = machine.apply(state, answer(machine, first_call))
    assert late == []
    # The session takes new inputs afterwards.
    state, out = machine.apply(state, inp("d", "in-4"))
    assert [(e.type, e.run) for e in out] == [("InputEvent", 4), ("DurableCallRequest", 4)]
    state, out = machine.apply(state, answer(machine, requests(out)[0]))
    assert outputs(out) == [OutputEvent("D")]


def test_failing_an_idle_session_emits_nothing_unless_it_clears_memory() -> None:
    machine = SessionMachine(Remember())
    state, _ = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    state, _ = machine.apply(state, inp("b", "in-2"))
    before = state.to_dict()
    state, out = machine.fail_session(state, ERR)
    assert out == [] and state.to_dict() == before
    state, out = machine.fail_session(state, ERR, clear_memory=True)
    assert [(e.type, e.run, e.causation_id) for e in out] == [("OutputEvent", 2, None)]
    assert out[0].payload == OutputEvent(None, ERR)
    assert state.memory == {} and state.idle
    state, out = machine.apply(state, inp("c", "in-3"))
    assert outputs(out) == [OutputEvent("stored")] and state.memory == {"m": '"c"'}


def test_clearing_memory_while_a_run_is_failed_emits_one_output_per_run() -> None:
    machine = SessionMachine(Slow())
    state, _ = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    state.memory["m"] = '"old"'
    state, out = machine.fail_session(state, ERR, clear_memory=True)
    assert [(e.type, e.run) for e in out] == [("OutputEvent", 1)]
    assert state.memory == {} and state.idle


# --- determinism ---------------------------------------------------------------------------

def _scenario() -> list[AgentEvent]:
    machine = SessionMachine(Slow())
    history: list[AgentEvent] = []
    state, out = machine.apply(machine.new_state("s1"), inp("a", "in-1", timestamp=5))
    history += out
    first_call = requests(out)[0]
    state, out = machine.apply(state, inp("b", "in-2", timestamp=6))
    history += out
    state, out = machine.fail_run(state, 1, ERR, cause=history[-1].event_id)
    history += out
    state, out = machine.apply(state, answer(machine, first_call))
    history += out
    state, out = machine.apply(state, inp("c", "in-3", timestamp=7))
    history += out
    state, out = machine.fail_session(state, ERR, clear_memory=True)
    history += out
    state, out = machine.fail_session(state, ERR, clear_memory=True)
    history += out
    state, out = machine.fail_run(state, 1, ERR)
    history += out
    return history


def test_failures_emit_the_same_events_on_every_machine() -> None:
    first, second = _scenario(), _scenario()
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert [encode(e) for e in first] == [encode(e) for e in second]
    assert len({e.event_id for e in first}) == len(first) == 10
    assert [e.seq for e in first] == list(range(1, 11))


# --- malformed envelopes -------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "message"), [
    ({"type": "OutputEvent"}, "does not name the payload's type 'InputEvent'"),
    ({"type": ""}, "does not name the payload's type"),
    ({"type": "Bogus"}, "does not name the payload's type"),
    ({"timestamp": -1}, "timestamp -1 is outside"),
    ({"timestamp": MAX_TIMESTAMP_MS + 1}, f"timestamp {MAX_TIMESTAMP_MS + 1} is outside"),
    ({"schema_version": 2}, "schema_version 2"),
])
def test_a_malformed_envelope_is_refused_before_it_changes_anything(changes: dict[str, Any],
                                                                     message: str) -> None:
    machine = SessionMachine(Echo())
    state = machine.new_state("s1")
    with pytest.raises(UnsupportedEventError, match=message):
        machine.apply(state, dataclasses.replace(inp("x", "in-1"), **changes))
    assert state == SessionState("s1")
    # The same input, well formed, is still new to the session.
    state, out = machine.apply(state, inp("x", "in-1"))
    assert outputs(out) == [OutputEvent("x")]


def test_a_malformed_result_is_refused_and_the_run_keeps_waiting() -> None:
    machine = SessionMachine(Slow())
    state, out = machine.apply(machine.new_state("s1"), inp("a", "in-1"))
    good = answer(machine, requests(out)[0])
    for changes in ({"timestamp": MAX_TIMESTAMP_MS + 1}, {"type": "InputEvent"}, {"schema_version": 0}):
        with pytest.raises(UnsupportedEventError):
            machine.apply(state, dataclasses.replace(good, **changes))
    assert isinstance(good.payload, DurableCallResult)
    state, out = machine.apply(state, dataclasses.replace(good, timestamp=MAX_TIMESTAMP_MS))
    assert outputs(out) == [OutputEvent("A")]
    assert {e.timestamp for e in out} == {MAX_TIMESTAMP_MS}
