"""The envelopes a session machine puts around what it emits: the next ``seq`` of the
session, a deterministic event id, the run, scope and agent of the event.
Example::

    env = emit(plan, state, run, OutputEvent(output="hi"), cause.event_id, "start", out)
"""

from __future__ import annotations

import dataclasses

from eddies.events import AgentEvent, Event, OutputEvent, event_type_name
from eddies.events.ids import event_id

from .plan import AgentPlan
from .state import RunState, SessionState


def emit(
    plan: AgentPlan,
    state: SessionState,
    run: RunState,
    payload: Event,
    causation: str | None,
    action: str | None,
    out: list[AgentEvent],
    scope: tuple[str, ...] = (),
) -> AgentEvent:
    """Stamp ``payload`` as the session's next event (of ``run``, in ``scope``, caused by
    event ``causation``, emitted by ``action``), append it to ``out`` and return it. An
    output names the input whose run it answers (a producer's only way to tell its answer
    from an earlier input's, whose run may still be going)."""
    state.seq += 1
    type_name = payload.event_type
    if type_name == "CustomEvent":
        type_name = event_type_name(payload)
    elif type_name == "OutputEvent" and run.input_id:
        payload = _answering(payload, run.input_id)
    if scope:
        plan = plan.for_scope(scope)
    env = AgentEvent(
        event_id(state.session_id, state.seq, type_name, causation),
        state.session_id,
        state.seq,
        run.number,
        scope,
        type_name,
        causation,
        action,
        plan.agent_name,
        plan.agent_version,
        state.clock,
        payload,
    )
    out.append(env)
    return env


def _answering(payload: Event, input_id: str) -> Event:
    """``payload``, an OutputEvent, naming ``input_id`` (a copy: an action may send one
    object in every run)."""
    if type(payload) is OutputEvent:  # constructed: replace() costs several times more
        return payload if payload.input_id else OutputEvent(payload.output, payload.error, input_id)
    assert isinstance(payload, OutputEvent)
    return payload if payload.input_id else dataclasses.replace(payload, input_id=input_id)


def envelope(
    plan: AgentPlan,
    state: SessionState,
    eid: str,
    seq: int,
    payload: Event,
    causation: str | None,
    action: str | None,
    scope: tuple[str, ...] = (),
) -> AgentEvent:
    """An event as it was first emitted (its id and ``seq`` given), to send again."""
    run = state.run.number if state.run else 0
    if scope:
        plan = plan.for_scope(scope)
    return AgentEvent(
        eid, state.session_id, seq, run, scope, event_type_name(payload), causation, action,
        plan.agent_name, plan.agent_version, state.clock, payload,
    )


__all__ = ["emit", "envelope"]
