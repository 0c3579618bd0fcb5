"""The session machine: ``apply(state, event) -> (state, emitted)``, pure and deterministic.

It accepts three kinds of events from outside: ``InputEvent`` (a user's input),
``DurableCallResult`` (an executor's answer; what becomes of it is in :mod:`.outcomes`)
and ``SignalEvent`` (a signal a wait may be waiting for). Everything else it emits itself. Runs are
one at a time per session; inputs for a busy session queue in order. Events already
applied (a known input id, a result for a call that has its outcome, a ``seq`` at or
below the state's) are ignored, so re-delivery is harmless.

``apply`` takes ownership of ``state`` (updates it in place for speed) and returns it.

Example::

    machine = SessionMachine(MyAgent())
    state = machine.new_state("s1")
    state, emitted = machine.apply(state, AgentEvent.external(
        "s1", InputEvent(input="hi"), event_id="in-1", timestamp=0))
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    InputEvent,
    OutputEvent,
    SignalEvent,
    envelope_problem,
)
from eddies.events.ids import scope_of_call

from . import halts
from .agent import Agent
from .envelopes import emit, envelope
from .live import LiveCalls
from .plan import AgentPlan
from .runs import MetricsSink, Runs
from .scope_paths import parent_memory
from .state import TERMINAL, Fault, Frame, RunState, SessionState


class UnsupportedEventError(ValueError):
    """An event the machine does not accept from outside (it emits those itself)."""


class SessionMachine:
    """Drives sessions of one agent. Holds no session state, only the compiled plan and a
    cache of live callables for the calls in flight (rebuilt by :meth:`resume`).

    What it does is split among collaborators it holds: the run loop (:mod:`.runs`), with
    sub-agent frames (:mod:`.scopes`) and call outcomes (:mod:`.outcomes`), and the live
    arguments and callables of calls in flight (:mod:`.live`)."""

    def __init__(self, agent: Agent | AgentPlan, metrics: MetricsSink | None = None, *,
                 max_memory_bytes: int | None = None) -> None:
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        # A runner may lower the agent's limit to what it can save (half a record, on Kafka).
        max_memory = int(self.plan.config["max_memory_bytes"])
        if max_memory_bytes is not None:
            max_memory = min(max_memory, max_memory_bytes)
        self.stats: dict[str, int] = {
            "inputs": 0,
            "duplicates": 0,
            "runs_completed": 0,
            "runs_failed": 0,
            "calls": 0,
        }
        self._live = LiveCalls()
        self._runs = Runs(self.plan, self.stats, self._live, metrics, max_memory)
        self._suspended = self._runs.suspended
        self._scopes = self._runs.scopes
        self._outcomes = self._runs.outcomes
        #: (call id, attempt) of calls with a due time that the last ``apply`` abandoned (a
        #: cancelled sub-agent's timers): a runner stops holding their requests. (The
        #: scopes append to it: one list, so reading it is an attribute, not a call.)
        self.dropped: list[tuple[str, int]] = self._scopes.dropped

    @property
    def _metrics(self) -> MetricsSink | None:
        # The metrics sink, under the name runners and tests have set it by.
        return self._runs.metrics

    @_metrics.setter
    def _metrics(self, sink: MetricsSink | None) -> None:
        self._runs.metrics = sink

    def new_state(self, session_id: str) -> SessionState:
        """The state of a session that has seen nothing yet."""
        return SessionState(session_id)

    # --- the two entry points ------------------------------------------------------------
    def apply(self, state: SessionState, event: AgentEvent) -> tuple[SessionState, list[AgentEvent]]:
        """Fold one external event into the session; return the state and emitted events.

        The accepted event itself comes first in ``emitted`` (stamped with its seq and run),
        followed by everything it caused, in order.
        """
        out: list[AgentEvent] = []
        if self.dropped:  # a new list: a runner may still hold the last one
            self.dropped = self._scopes.dropped = []
        if event.session_id != state.session_id:
            raise ValueError(f"event for session {event.session_id!r} applied to {state.session_id!r}")
        if event.seq and event.seq <= state.seq:
            self.stats["duplicates"] += 1
            return state, out
        problem = envelope_problem(event)
        if problem is not None:
            raise UnsupportedEventError(problem)
        if state.fault is not None:
            self._while_halted(state, event, out)
            return state, out
        payload = event.payload
        if isinstance(payload, InputEvent):
            self._runs.accept_input(state, event, out)
        elif isinstance(payload, DurableCallResult):
            self._outcomes.accept_result(state, event, payload, out)
        elif isinstance(payload, SignalEvent):
            self._outcomes.accept_signal(state, event, payload, out)
        else:
            raise UnsupportedEventError(
                f"{event.type} cannot be applied from outside; only InputEvent, "
                "DurableCallResult and SignalEvent can"
            )
        return state, out

    # --- sessions halted on a fault ----------------------------------------------------------
    def halt(self, state: SessionState, event: AgentEvent, error: ErrorInfo
             ) -> tuple[SessionState, list[AgentEvent]]:
        """Halt the session on ``error``, which escaped :meth:`apply` of ``event``; for a
        runner, which gives the session's last trusted ``state`` (as it was before
        ``event``: the state ``apply`` had may be half-changed).

        ``event`` waits with every later record of the session (they are parked, not
        applied) until the resume signal named in the halt's notice (a failed OutputEvent,
        as :mod:`.halts` describes) applies them again, in order. A resume on which the
        error escapes again leaves the session halted with its records, announced anew.
        Example::

            try:
                state, emitted = machine.apply(state, event)
            except Exception as err:
                state, emitted = machine.halt(trusted, event, ErrorInfo.of(err))
        """
        out: list[AgentEvent] = []
        fault = state.fault
        payload = event.payload
        if fault is not None and isinstance(payload, SignalEvent) and payload.name == fault.signal:
            self._runs.remember_input(state, event)  # this resume is spent
            fault.error = error
        else:
            if fault is None:
                fault = state.fault = Fault(error, "")
            else:
                fault.error = error
            self._park(state, fault, event)
        fault.signal = halts.fault_signal(state.session_id, state.seq + 1)
        run = state.run or RunState(state.runs, "")
        inv = run.active
        fault.notice = emit(self.plan, state, run, halts.notice(
            state.session_id, fault.signal, error, fault=True), event.event_id,
            inv.action if inv is not None else None, out).event_id
        return state, out

    def halted_as_recorded(self, state: SessionState, notice: AgentEvent
                           ) -> tuple[SessionState, list[AgentEvent]]:
        """Halt ``state`` where its history recorded the notice of a halt on a fault
        (:func:`.halts.fault_notice`), for a rebuild or a replay from that history: the
        records the halt parked are not in it, but those its resume applied again are,
        after the resume. Returns the state and the notice, as if emitted again."""
        payload = notice.payload
        assert isinstance(payload, OutputEvent) and payload.error is not None
        signal = halts.resume_signal(payload)
        assert signal is not None
        state.seq = max(state.seq, notice.seq)
        state.fault = Fault(payload.error, signal, notice.event_id)
        return state, [notice]

    def _while_halted(self, state: SessionState, event: AgentEvent, out: list[AgentEvent]) -> None:
        """A record for a session halted on a fault: its resume signal applies the parked
        records again; anything else is parked behind them."""
        fault = state.fault
        assert fault is not None
        payload = event.payload
        if not (isinstance(payload, SignalEvent) and payload.name == fault.signal):
            self._park(state, fault, event)
            return
        if not self._runs.remember_input(state, event):
            return
        state.fault = None
        if event.timestamp > state.clock:
            state.clock = event.timestamp
        run = state.run
        state.seq += 1
        out.append(AgentEvent(
            event.event_id, state.session_id, state.seq, run.number if run is not None else 0,
            event.scope, event.type, fault.notice or None, None, self.plan.agent_name,
            self.plan.agent_version, state.clock, payload))
        for parked in fault.parked:
            dropped = self.dropped
            _, more = self.apply(state, parked)
            out += more
            if dropped:  # (apply starts a new list of them)
                self.dropped = self._scopes.dropped = dropped + self.dropped

    def _park(self, state: SessionState, fault: Fault, event: AgentEvent) -> None:
        parked = fault.parked
        eid = event.event_id
        if any(p.event_id == eid for p in parked):
            self.stats["duplicates"] += 1
            return
        if len(parked) >= halts.MAX_PARKED:
            raise UnsupportedEventError(
                f"session {state.session_id} is halted ({fault.error.type}) and holds "
                f"{len(parked)} records for its resume already; resume it: eddies resume "
                f"{shlex.quote(state.session_id)}")
        parked.append(event)

    def resume(self, state: SessionState) -> tuple[SessionState, list[AgentEvent]]:
        """After a restart: the requests of the running run that have no outcome yet.

        It re-executes the waiting action (a replay, calling nothing) so that live callables
        are registered again, and returns the request events to send to executors again;
        they carry their original event ids, and a reconciling call is asked as RECONCILE.
        """
        run = state.run
        if run is None or run.active is None:
            return state, []
        self._runs.replay_waiting(state, run)
        again: list[AgentEvent] = []
        scopes = self._scopes
        for cid, rec in run.calls.items():
            if rec.status in TERMINAL or scopes.internal(state, cid, rec):
                continue
            payload = self._outcomes.request(state, cid, rec, self._live.args(cid) or rec.args)
            if payload.for_executor:
                again.append(envelope(self.plan, state, rec.request_id, 0, payload, None,
                                      scopes.action_of(state, run, cid),
                                      scope_of_call(cid, state.session_id)))
        return state, again

    def evict(self, *session_ids: str) -> None:
        """Drop this machine's transient caches of sessions (e.g. their partition was revoked).

        Correctness never depends on them: a later apply replays from the state instead.
        One pass over the caches, however many sessions: ``machine.evict(*revoked)``.
        """
        self._suspended.forget_sessions(session_ids)
        self._live.forget_sessions(session_ids)

    @property
    def cached(self) -> int:
        """How many live continuations and callables are cached (for leak checks)."""
        return len(self._suspended) + self._live.kept()

    def parent_memory(self, state: SessionState, run: RunState, frame: Frame) -> dict[str, str]:
        """What a sub-agent reads under its own short-term memory: its callers', nearest
        first (the session's memory at the root)."""
        return parent_memory(state, run, frame)

    def callable_for(self, request: DurableCallRequest) -> Callable[..., Any] | None:
        """The live function (or reconciler) of a FUNCTION/RECONCILE request, if known here."""
        entry = self._live.callables(request.call_id)
        if entry is None:
            return None
        return entry[1] if request.kind is CallKind.RECONCILE else entry[0]

    # --- failures a runner asks for ----------------------------------------------------------
    def fail_run(self, state: SessionState, run_number: int, error: ErrorInfo,
                 cause: str | None = None) -> tuple[SessionState, list[AgentEvent]]:
        """Fail run ``run_number``, for a runner that could not write one of its events
        (``cause``: that event's id): a failed OutputEvent carrying ``error``. A run still
        in progress ends there (its calls' late results are ignored) and the next queued
        input starts; a finished one gets the failed OutputEvent after its other events.
        Example::

            state, emitted = machine.fail_run(state, 3, ErrorInfo("TooLarge", "..."))
        """
        out: list[AgentEvent] = []
        run = state.run
        if run is not None and run.number == run_number:
            inv = run.active
            emit(self.plan, state, run, OutputEvent(None, error), cause or run.input_id,
                       inv.action if inv is not None else None, out)
            self._runs.finish(state, run, failed=True)
            self._runs.start_runs(state, out)
        else:
            emit(self.plan, state, RunState(run_number, ""), OutputEvent(None, error), cause, None, out)
        return state, out

    def fail_session(self, state: SessionState, error: ErrorInfo, *,
                     clear_memory: bool = False) -> tuple[SessionState, list[AgentEvent]]:
        """Fail what the session holds, for a runner that cannot keep or save it as it is
        (its snapshot or an event it emitted is larger than a record may be).

        The running run and every queued input end with a failed OutputEvent carrying
        ``error``; their calls' late results are ignored. With ``clear_memory`` the
        short-term memory is emptied too (a failed OutputEvent of the last run says so when
        nothing else was failed). The session takes new inputs afterwards. Example::

            state, emitted = machine.fail_session(state, ErrorInfo("TooLarge", "..."))
        """
        out: list[AgentEvent] = []
        run = state.run
        if run is not None:
            inv = run.active
            cause = inv.trigger.event_id if inv is not None else run.input_id
            emit(self.plan, state, run, OutputEvent(None, error), cause,
                       inv.action if inv is not None else None, out)
            self._runs.finish(state, run, failed=True)
        while state.queue:
            inp = state.queue.popleft()
            run = RunState(inp.run, inp.event_id)
            state.run = run
            emit(self.plan, state, run, OutputEvent(None, error), inp.event_id, None, out)
            self._runs.finish(state, run, failed=True)
        if clear_memory:
            state.memory.clear()
            if not out:
                last = RunState(state.runs, "")
                emit(self.plan, state, last, OutputEvent(None, error), None, None, out)
        return state, out


__all__ = ["MetricsSink", "SessionMachine", "UnsupportedEventError"]
