"""The session machine: runs, ordering, duplicates, determinism, state round trips."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    Agent,
    AgentEvent,
    ChatMessage,
    InputEvent,
    MessageRole,
    OutputEvent,
    SessionMachine,
    SessionState,
    ToolCall,
    action,
)
from eddies.engine import UnsupportedEventError
from eddies.engine.resources import ToolSpec
from eddies.events import DurableCallRequest, ErrorInfo, encode
from tests.agents import Echo, calculator
from tests.unit.engine.executor import answer, drive


def fake_model(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage:
    """Calls the first tool once with {a: 2, b: 40}, then answers with the tool's result."""
    if messages[-1].role is MessageRole.TOOL:
        return ChatMessage(MessageRole.ASSISTANT, f"answer: {messages[-1].content}")
    return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("t1", tools[0].name, {"a": 2, "b": 40})])


def test_tool_loop_with_a_fake_model() -> None:
    machine = SessionMachine(calculator())
    _, history = drive(machine, [("s1", "what is 2 + 40?")], chat=fake_model)
    assert [e.type for e in history] == [
        "InputEvent",
        "ChatRequestEvent",
        "DurableCallRequest",  # chat
        "DurableCallResult",
        "ToolRequestEvent",
        "DurableCallRequest",  # tool
        "DurableCallResult",
        "ToolResponseEvent",
        "DurableCallRequest",  # chat again, with the tool result
        "DurableCallResult",
        "ChatResponseEvent",
        "OutputEvent",
    ]
    assert history[-1].payload == OutputEvent(output="answer: 42")
    assert [e.seq for e in history] == list(range(1, 13))
    tool_response = history[7].payload
    assert tool_response.responses[0].result == 42  # type: ignore[attr-defined]
    # Every emitted event names its cause and the action that emitted it.
    by_id = {e.event_id: e for e in history}
    for ev in history[1:]:
        assert ev.causation_id in by_id, ev


class Slow(Agent):
    """Each run makes one durable call, so later inputs queue behind it."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(str.upper, event.input)))


def test_queued_inputs_run_in_order_per_session_with_sessions_interleaved() -> None:
    machine = SessionMachine(Slow())
    inputs = [("s1", "a"), ("s2", "x"), ("s1", "b"), ("s2", "y"), ("s1", "c")]
    states, history = drive(machine, inputs)
    for sid, expected in (("s1", ["A", "B", "C"]), ("s2", ["X", "Y"])):
        events = [e for e in history if e.session_id == sid]
        assert [e.payload.output for e in events if e.type == "OutputEvent"] == expected  # type: ignore[attr-defined]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        # A run starts only after the previous one finished: its calls come after its output.
        runs = [e.run for e in events if e.type != "InputEvent"]
        assert runs == sorted(runs)
        assert states[sid].idle
    # The second input of s1 was accepted (seq, run 2) while run 1 was still waiting.
    s1 = [e for e in history if e.session_id == "s1"]
    assert [(e.type, e.run) for e in s1[:3]] == [
        ("InputEvent", 1), ("DurableCallRequest", 1), ("InputEvent", 2)]
    # Each output names the input its run answers: how a producer tells its answer apart.
    inputs_by_run = {e.run: e.event_id for e in s1 if e.type == "InputEvent"}
    answered = [(e.run, e.payload.input_id) for e in s1 if e.type == "OutputEvent"]  # type: ignore[attr-defined]
    assert answered == [(run, inputs_by_run[run]) for run in (1, 2, 3)]


class Constant(Agent):
    """Sends one OutputEvent object in every run (the engine must not stamp the object)."""

    DONE = OutputEvent(output="done")

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(Constant.DONE)


def test_an_output_names_its_runs_input_even_when_an_action_reuses_one_object() -> None:
    machine = SessionMachine(Constant())
    state = machine.new_state("s1")
    named = []
    for n in (1, 2):
        state, out = machine.apply(state, AgentEvent.external("s1", InputEvent(n), event_id=f"in-{n}",
                                                              timestamp=n))
        named += [e.payload.input_id for e in out if isinstance(e.payload, OutputEvent)]
    assert named == ["in-1", "in-2"] and Constant.DONE.input_id is None
    # Its queued inputs failed by the runner: each failed output names its own input.
    machine = SessionMachine(Slow())
    state = machine.new_state("s2")
    for n in (1, 2):
        state, _ = machine.apply(state, AgentEvent.external("s2", InputEvent("x"), event_id=f"q-{n}",
                                                            timestamp=n))
    state, out = machine.fail_session(state, ErrorInfo("TooLarge", "too large"))
    assert [e.payload.input_id for e in out if isinstance(e.payload, OutputEvent)] == ["q-1", "q-2"]


def test_duplicates_are_ignored() -> None:
    machine = SessionMachine(Slow())
    state = machine.new_state("s1")
    inp = AgentEvent.external("s1", InputEvent("a"), event_id="in-1", timestamp=1)
    state, out = machine.apply(state, inp)
    request = out[1]
    state, again = machine.apply(state, inp)  # same input id: re-delivered record
    assert again == []
    result = answer(machine, request)
    state, out = machine.apply(state, result)
    assert out[-1].payload == OutputEvent(output="A")
    state, again = machine.apply(state, result)  # the call already has its outcome
    assert again == []
    assert machine.apply(state, out[0])[1] == []  # an already-applied seq
    assert machine.stats["duplicates"] == 3


def test_only_inputs_and_results_are_accepted_from_outside() -> None:
    machine = SessionMachine(Echo())
    ev = AgentEvent.external("s1", OutputEvent("x"), event_id="o", timestamp=0)
    with pytest.raises(UnsupportedEventError, match="OutputEvent"):
        machine.apply(machine.new_state("s1"), ev)
    with pytest.raises(ValueError, match="session"):
        machine.apply(machine.new_state("s2"), AgentEvent.external("s1", InputEvent(1),
                                                                   event_id="i", timestamp=0))


def _stream(inputs: list[tuple[str, Any]]) -> list[bytes]:
    machine = SessionMachine(calculator())
    _, history = drive(machine, inputs, chat=fake_model)
    return [encode(e) for e in history]


def test_same_inputs_give_byte_identical_event_streams() -> None:
    inputs = [("s1", "q1"), ("s2", "q2"), ("s1", "q3")]
    first, second = _stream(inputs), _stream(inputs)
    assert first == second
    assert len(first) == 36
    assert _stream([("s1", "other"), ("s2", "q2"), ("s1", "q3")]) != first


def test_state_round_trips_through_bytes_at_every_step_and_continues_identically() -> None:
    """Restore the state from bytes after every event; the emitted events must not change."""
    inputs = [("s1", "q1"), ("s1", "q2")]
    _, reference = drive(SessionMachine(calculator()), inputs, chat=fake_model)

    machine = SessionMachine(calculator())
    state = machine.new_state("s1")
    work = [AgentEvent.external(s, InputEvent(v), event_id=f"{s}:in{i}", timestamp=i)
            for i, (s, v) in enumerate(inputs)]
    history = []
    while work:
        ev = work.pop(0)
        if isinstance(ev.payload, DurableCallRequest):
            work.append(answer(machine, ev, fake_model))
            continue
        data = state.to_bytes()
        restored = SessionState.from_bytes(data)
        assert restored == state
        assert restored.to_bytes() == data
        state, out = machine.apply(restored, ev)
        history.extend(out)
        work.extend(e for e in out if isinstance(e.payload, DurableCallRequest))
    assert [encode(e) for e in history] == [encode(e) for e in reference]


def test_state_bytes_reject_unknown_format() -> None:
    with pytest.raises(ValueError, match="format"):
        SessionState.from_bytes(b'{"format": 99}')


def test_logical_time_comes_from_inputs() -> None:
    machine = SessionMachine(Echo())
    state = machine.new_state("s1")
    state, out = machine.apply(state, AgentEvent.external("s1", InputEvent(1), event_id="a",
                                                          timestamp=1_000))
    assert {e.timestamp for e in out} == {1_000}
    state, out = machine.apply(state, AgentEvent.external("s1", InputEvent(2), event_id="b",
                                                          timestamp=500))
    assert {e.timestamp for e in out} == {1_000}  # never goes backwards
