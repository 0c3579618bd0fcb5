"""The envelopes a session machine puts around what it emits: the next ``seq`` of the
session, a deterministic event id, the run, scope and agent of the event.
Example::

    env = emit(plan, state, run, OutputEvent(output="hi"), cause.event_id, "start", out)
"""

from __future__ import annotations

from eddies.events import AgentEvent, Event, event_type_name
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
    event ``causation``, emitted by ``action``), append it to ``out`` and return it."""
    state.seq += 1
    type_name = payload.event_type
    if type_name == "CustomEvent":
        type_name = event_type_name(payload)
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
