"""The envelopes a session machine puts around what it emits: the next ``seq`` of the
session, a deterministic event id, the run, scope and agent of the event.
Example::

    env = emit(plan, state, run, OutputEvent(output="hi"), cause.event_id, "start", out)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from eddies.events import AgentEvent, Event, OutputEvent, event_type_name
from eddies.events.ids import event_id

from .hooks import HookCounts, InputInfo, on_output
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
    *,
    counted: Callable[[SessionState, dict[str, float]], None] | None = None,
) -> AgentEvent:
    """Stamp ``payload`` as the session's next event (of ``run``, in ``scope``, caused by
    event ``causation``, emitted by ``action``), append it to ``out`` and return it. An
    output names the input whose run it answers (a producer's only way to tell its answer
    from an earlier input's, whose run may still be going)."""
    state.seq += 1
    type_name = payload.event_type
    if type_name == "CustomEvent":
        type_name = event_type_name(payload)
    elif type_name == "OutputEvent" and (run.input_id or plan.hooks):
        payload = _output(plan, state, run, payload, scope, counted)
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


def _output(plan: AgentPlan, state: SessionState, run: RunState, payload: Event,
            scope: tuple[str, ...],
            counted: Callable[[SessionState, dict[str, float]], None] | None) -> Event:
    """``payload``, an OutputEvent, naming the input its run answers, and as the plan's
    hooks let a run's answer out (a sub-agent's, to its caller, is not theirs to see)."""
    output = payload
    assert isinstance(output, OutputEvent)
    if run.input_id and not output.input_id:  # a copy: an action may send one object each run
        if type(output) is OutputEvent:  # constructed: replace() costs several times more
            output = OutputEvent(output.output, output.error, run.input_id)
        else:
            output = dataclasses.replace(output, input_id=run.input_id)
    if plan.hooks and not scope and output.error is None:
        counts = HookCounts()
        info = InputInfo(state.session_id, run.input_id, run.number, run.identity, counts)
        output = on_output(plan.hooks, output, info)
        if counts.counts and counted is not None:
            counted(state, counts.counts)
    return output


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
