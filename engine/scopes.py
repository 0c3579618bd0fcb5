"""Internal sub-agents in the session machine: a child scope per call, run beside the
caller that waits for it, and its answer made the call's outcome.

A call of an internal sub-agent is announced by a ``SubagentCallEvent`` in the caller's
scope; the child gets the prompt as an ``InputEvent`` in its own scope
(``name@i<invocation>c<ordinal>`` of the call, under the caller's), runs its actions on
its own events only (a :class:`~eddies.engine.state.Frame` of the run: its invocations,
sensory memory and short-term memory writes), and when nothing is left to run its last
OutputEvent becomes the call's outcome, announced by a ``SubagentResultEvent``. A child
that fails, or outlives the caller's timeout (its calls then abandoned, late results
ignored), is a failed Result: the caller's run goes on.

A collaborator of the session machine's run loop, which holds it; it asks the loop
(a :class:`~eddies.engine.run_loop.RunLoop`) to drive a frame and to settle a call. The
names of scopes are in :mod:`eddies.engine.scope_paths`. Example::

    scope_key(("reviewer@i1c0", "checker@i4c0"))   # "reviewer@i1c0/checker@i4c0"
"""

from __future__ import annotations

from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    ErrorCategory,
    ErrorInfo,
    InputEvent,
    SubagentResultEvent,
    decode_value,
    encode_value,
)
from eddies.events.ids import call_digest, call_id, scope_of_call

from .calls import ABANDONED
from .envelopes import emit
from .live import LiveCalls, SuspendedActions
from .plan import AgentPlan
from .run_loop import RunLoop
from .scope_paths import agent_of, scope_key, scope_part, subagent_input
from .state import ERROR, OK, TERMINAL, CallRecord, Frame, Invocation, RunState, SessionState
from .subagents import TIMEOUT

#: The target of the timer that ends a sub-agent call at its timeout.
SUBAGENT_DEADLINE = "subagent-deadline"


class Scopes:
    """Sub-agent frames, for the session machine's run loop (see the module's docstring)."""

    def __init__(self, plan: AgentPlan, loop: RunLoop, live: LiveCalls, suspended: SuspendedActions) -> None:
        self._plan = plan
        self._loop = loop
        self._live = live
        self._suspended = suspended
        #: (call id, attempt) of calls with a due time abandoned since the machine's last
        #: ``apply`` began (a cancelled sub-agent's timers): a runner stops holding them.
        self.dropped: list[tuple[str, int]] = []

    def holder(self, state: SessionState, run: RunState, cid: str) -> RunState | Frame | None:
        """What runs the action that made call ``cid``: the run, or a sub-agent's frame
        (None: one that has ended)."""
        scope = scope_of_call(cid, state.session_id)
        return run if not scope else run.frames.get(scope_key(scope))

    def action_of(self, state: SessionState, run: RunState, cid: str) -> str | None:
        """The action waiting for call ``cid`` (None: none, or its sub-agent has ended)."""
        holder = self.holder(state, run, cid)
        active = None if holder is None else holder.active
        return None if active is None else active.action

    def internal(self, state: SessionState, cid: str, rec: CallRecord) -> bool:
        """Whether call ``cid`` is of an internal sub-agent (answered here, never sent)."""
        return (rec.kind == CallKind.SUBAGENT
                and rec.target in self._plan.for_scope(scope_of_call(cid, state.session_id)).subagents)

    def start_child(self, state: SessionState, run: RunState, scope: tuple[str, ...], inv: Invocation,
                     req: DurableCallRequest, announced: AgentEvent, out: list[AgentEvent]) -> None:
        """Start the sub-agent call ``req`` made by ``inv`` (in ``scope``): its frame, its
        deadline timer, and the prompt as its InputEvent."""
        kwargs = decode_value(req.args)["kwargs"]
        ordinal = req.call_id.rsplit(":", 1)[1]
        child = (*scope, scope_part(req.target, inv.number, ordinal))
        session = str(kwargs.get("session_id") or "")
        frame = Frame(child, req.call_id, session,
                      memory=dict(state.child_memory.get(session, {})) if session else {})
        run.frames[scope_key(child)] = frame
        timeout = kwargs.get("timeout_ms")
        if timeout is not None:
            frame.deadline = self._deadline(state, run, scope, req.call_id, int(timeout), announced, out)
        first = emit(self._plan, state, run, InputEvent(input=kwargs.get("prompt")), announced.event_id,
                     None, out, child)
        self._loop.enqueue(run, first, frame)
        self._loop.drive(state, out, frame)

    def _deadline(self, state: SessionState, run: RunState, scope: tuple[str, ...], guarded: str,
                  timeout_ms: int, cause: AgentEvent, out: list[AgentEvent]) -> str:
        """A timer, in the caller's scope, that ends the sub-agent call ``guarded`` when due."""
        run.deadlines += 1
        cid = call_id(state.session_id, scope, run.number, 0, run.deadlines)
        args = encode_value({"args": [], "kwargs": {"call": guarded, "after_ms": timeout_ms}})
        dig = call_digest(CallKind.TIMER, SUBAGENT_DEADLINE, args)
        rec = CallRecord(CallKind.TIMER.value, SUBAGENT_DEADLINE, dig, args, "", True,
                         due=state.clock + timeout_ms)
        run.calls[cid] = rec
        req = DurableCallRequest(call_id=cid, kind=CallKind.TIMER, target=SUBAGENT_DEADLINE, args=args,
                                 idempotent=True, attempt=1, digest=dig, not_before=rec.due)
        rec.request_id = emit(self._plan, state, run, req, cause.event_id, None, out, scope).event_id
        return cid

    def deadline_due(self, state: SessionState, run: RunState, cid: str, out: list[AgentEvent]) -> None:
        """A sub-agent call's timer fired: the sub-agent, if it still runs, is ended."""
        frame = next((f for f in run.frames.values() if f.deadline == cid), None)
        if frame is None:
            return
        name = agent_of(frame.scope[-1])
        timeout = decode_value(run.calls[cid].args)["kwargs"]["after_ms"]
        self.cancel(state, run, frame, ErrorInfo(
            TIMEOUT, f"sub-agent {name!r} did not answer within {timeout} ms; what it was doing is "
            "abandoned", category=ErrorCategory.TRANSIENT), out)

    def cancel(self, state: SessionState, run: RunState, frame: Frame, error: ErrorInfo,
                out: list[AgentEvent]) -> None:
        """End ``frame`` (and the sub-agents it called) now: its calls are abandoned (late
        results ignored), and its caller's call fails with ``error``."""
        depth = len(frame.scope)
        for key in [k for k, f in run.frames.items() if f.scope[:depth] == frame.scope and f is not frame]:
            self._drop(state, run, run.frames.pop(key))
        abandoned = ErrorInfo("SubagentCancelledError", f"cancelled: {error.message}",
                              category=ErrorCategory.PERMANENT)
        for cid, rec in run.calls.items():
            if rec.status not in TERMINAL and scope_of_call(cid, state.session_id)[:depth] == frame.scope:
                self._drop_call(cid, rec, abandoned)
        self.end(state, run, frame, error, out)

    def end(self, state: SessionState, run: RunState, frame: Frame, error: ErrorInfo,
             out: list[AgentEvent]) -> None:
        """End ``frame`` on ``error`` (what runs in it stops): its caller's call fails."""
        self._drop(state, run, frame)
        frame.output, frame.error = None, error
        frame.pending.clear()
        self.child_done(state, run, frame, out)

    def abandon(self, state: SessionState, run: RunState, cids: list[str], out: list[AgentEvent]) -> None:
        """Calls a batch no longer needs: abandoned (late results ignored); a sub-agent's
        scope cancelled."""
        error = ErrorInfo(ABANDONED, "another call of its batch finished first",
                          category=ErrorCategory.PERMANENT)
        for cid in cids:
            rec = run.calls.get(cid)
            if rec is None or rec.status in TERMINAL:
                continue
            frame = next((f for f in run.frames.values() if f.call == cid), None)
            if frame is not None:
                self.cancel(state, run, frame, error, out)
                continue
            self._drop_call(cid, rec, error)

    def _drop_call(self, cid: str, rec: CallRecord, error: ErrorInfo) -> None:
        """Abandon call ``cid``: its late result is ignored; one held until a due time (a
        timer) is named in ``dropped``, for the runner to stop holding it."""
        rec.status, rec.error = ERROR, error
        self._live.pop(cid, None)
        if rec.due is not None:
            self.dropped.append((cid, rec.attempt))

    def _drop(self, state: SessionState, run: RunState, frame: Frame) -> None:
        if frame.active is not None:
            self._suspended.drop(state, run, frame.active)
            frame.active = None

    def child_done(self, state: SessionState, run: RunState, frame: Frame, out: list[AgentEvent]) -> None:
        """``frame`` has nothing left to run: its answer completes its caller's call."""
        run.frames.pop(scope_key(frame.scope), None)
        if frame.session:
            if frame.memory:
                state.child_memory[frame.session] = frame.memory
            else:
                state.child_memory.pop(frame.session, None)
        if frame.deadline:
            timer = run.calls.get(frame.deadline)
            if timer is not None and timer.status not in TERMINAL:
                timer.status = OK  # not needed any more: a late firing is ignored
        rec = run.calls[frame.call]
        if rec.status in TERMINAL:
            return
        error = frame.error
        if error is None and frame.output is None:
            name = agent_of(frame.scope[-1])
            error = ErrorInfo("SubagentNoOutputError", f"sub-agent {name!r} finished without an "
                              "OutputEvent", category=ErrorCategory.PERMANENT)
        if error is None:
            rec.status, rec.value = OK, frame.output or "null"
        else:
            rec.status, rec.error = ERROR, error
        emit(self._plan, state, run, SubagentResultEvent(
            frame.call, None if error is not None else decode_value(rec.value), error), rec.request_id,
            self.action_of(state, run, frame.call), out, frame.scope[:-1])
        self._loop.settled(state, run, frame.call, rec, out)


__all__ = ["SUBAGENT_DEADLINE", "Scopes", "agent_of", "scope_key", "scope_part", "subagent_input"]
