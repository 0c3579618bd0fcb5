"""A minimal synchronous executor for pure engine tests (the real ones are connectors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from eddies.engine import SessionMachine, SessionState
from eddies.engine.calls import message_from_value
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    InputEvent,
    decode_value,
    encode_value,
)
from eddies.events.ids import result_event_id


def answer(machine: SessionMachine, request: AgentEvent, chat: Callable[..., Any] | None = None,
           status: CallStatus | None = None) -> AgentEvent:
    """Perform ``request`` in-line (or answer with ``status``) and return the result event."""
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    value, error = "null", None
    if status is None:
        call = decode_value(req.args)
        try:
            if req.kind is CallKind.CHAT_MODEL:
                assert chat is not None
                msgs = [message_from_value(m) for m in call["kwargs"]["messages"]]
                result = chat(msgs, machine.plan.tool_specs(req.target))
            elif req.kind is CallKind.TOOL:
                result = machine.plan.tool(req.target).fn(**call["kwargs"])
            else:
                fn = machine.callable_for(req)
                assert fn is not None, req
                result = fn(*call["args"], **call["kwargs"]) if req.kind is CallKind.FUNCTION else fn()
            value, status = encode_value(result), CallStatus.OK
        except Exception as err:
            error, status = ErrorInfo.of(err), CallStatus.ERROR
    payload = DurableCallResult(req.call_id, req.kind, status, value, error, req.attempt)
    return AgentEvent.external(request.session_id, payload,
                               event_id=result_event_id(req.call_id, req.attempt),
                               timestamp=request.timestamp)


def applied(machine: SessionMachine, inputs: list[tuple[str, Any]], chat: Callable[..., Any] | None = None,
            ) -> Iterator[tuple[AgentEvent, SessionState, list[AgentEvent]]]:
    """Apply inputs, then answer requests FIFO until quiet; after each applied event, the
    event, its session's state and what it emitted."""
    states: dict[str, SessionState] = {}
    work: list[AgentEvent] = [
        AgentEvent.external(s, InputEvent(v), event_id=f"{s}:in{i}", timestamp=i)
        for i, (s, v) in enumerate(inputs)
    ]
    while work:
        ev = work.pop(0)
        if isinstance(ev.payload, DurableCallRequest):
            work.append(answer(machine, ev, chat))
            continue
        state = states.get(ev.session_id) or machine.new_state(ev.session_id)
        state, out = machine.apply(state, ev)
        states[ev.session_id] = state
        yield ev, state, out
        work.extend(e for e in out if isinstance(e.payload, DurableCallRequest))


def drive(machine: SessionMachine, inputs: list[tuple[str, Any]], chat: Callable[..., Any] | None = None,
          ) -> tuple[dict[str, SessionState], list[AgentEvent]]:
    """Apply inputs, then answer requests FIFO until quiet; returns states and all events."""
    states: dict[str, SessionState] = {}
    history: list[AgentEvent] = []
    for _, state, out in applied(machine, inputs, chat):
        states[state.session_id] = state
        history.extend(out)
    return states, history
