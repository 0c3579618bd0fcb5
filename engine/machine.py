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

from collections.abc import Callable
from typing import Any

from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
    Event,
    InputEvent,
    OutputEvent,
    SignalEvent,
    SubagentCallEvent,
    encode_value,
    envelope_problem,
    event_type_name,
)
from eddies.events.ids import event_id, scope_of_call

from .agent import Agent
from .calls import SUSPEND, Suspend
from .context import RunnerContext
from .durable import JournalMismatchError
from .outcomes import CallOutcomes
from .plan import AgentPlan
from .runner_failures import RunnerFailures
from .scopes import Scopes, scope_key, subagent_input
from .state import (
    INPUT_DEDUP_WINDOW,
    TERMINAL,
    CallRecord,
    Frame,
    Invocation,
    RunState,
    SessionState,
)

MetricsSink = Callable[[str, str, str, float], None]


class UnsupportedEventError(ValueError):
    """An event the machine does not accept from outside (it emits those itself)."""


class SessionMachine(Scopes, RunnerFailures, CallOutcomes):
    """Drives sessions of one agent. Holds no session state, only the compiled plan and a
    cache of live callables for the calls in flight (rebuilt by :meth:`resume`)."""

    def __init__(self, agent: Agent | AgentPlan, metrics: MetricsSink | None = None, *,
                 max_memory_bytes: int | None = None) -> None:
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        self._callables: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {}
        # The arguments of calls in flight, to ask again (a restart, an unknown outcome).
        # Not in the session state: a model call's arguments are the conversation so far,
        # and kept there they would make every snapshot (and Flink keyed state) carry it.
        # A replay of the waiting action computes them again (:meth:`_arguments`).
        self._args: dict[str, str] = {}
        self._metrics = metrics
        #: (call id, attempt) of calls with a due time that the last ``apply`` abandoned (a
        #: cancelled sub-agent's timers): a runner stops holding their requests.
        self.dropped: list[tuple[str, int]] = []
        # Suspended async actions, resumed in place while their run object is the live one;
        # after a restore (new state objects) they are replayed from the journal instead.
        self._live: dict[tuple[str, int, int], tuple[Any, RunnerContext, RunState]] = {}
        self._max_events = int(self.plan.config["max_events_per_run"])
        self._deadline_ms: int | None = self.plan.config.get("request_timeout_ms")
        # A runner may lower the agent's limit to what it can save (half a record, on Kafka).
        self._max_memory = int(self.plan.config["max_memory_bytes"])
        if max_memory_bytes is not None:
            self._max_memory = min(self._max_memory, max_memory_bytes)
        self.stats: dict[str, int] = {
            "inputs": 0,
            "duplicates": 0,
            "runs_completed": 0,
            "runs_failed": 0,
            "calls": 0,
        }

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
        if self.dropped:
            self.dropped = []
        if event.session_id != state.session_id:
            raise ValueError(f"event for session {event.session_id!r} applied to {state.session_id!r}")
        if event.seq and event.seq <= state.seq:
            self.stats["duplicates"] += 1
            return state, out
        problem = envelope_problem(event)
        if problem is not None:
            raise UnsupportedEventError(problem)
        payload = event.payload
        if isinstance(payload, InputEvent):
            self._accept_input(state, event, out)
        elif isinstance(payload, DurableCallResult):
            self._accept_result(state, event, payload, out)
        elif isinstance(payload, SignalEvent):
            self._accept_signal(state, event, payload, out)
        else:
            raise UnsupportedEventError(
                f"{event.type} cannot be applied from outside; only InputEvent, "
                "DurableCallResult and SignalEvent can"
            )
        return state, out

    def resume(self, state: SessionState) -> tuple[SessionState, list[AgentEvent]]:
        """After a restart: the requests of the running run that have no outcome yet.

        It re-executes the waiting action (a replay, calling nothing) so that live callables
        are registered again, and returns the request events to send to executors again;
        they carry their original event ids, and a reconciling call is asked as RECONCILE.
        """
        run = state.run
        if run is None or run.active is None:
            return state, []
        self._replay_waiting(state, run)
        again: list[AgentEvent] = []
        for cid, rec in run.calls.items():
            if rec.status in TERMINAL or self._internal(state, cid, rec):
                continue
            payload = self._request(state, cid, rec, self._args.get(cid) or rec.args)
            if payload.for_executor:
                again.append(self._envelope(state, rec.request_id, 0, payload, None,
                                            self._action_of(state, run, cid),
                                            scope_of_call(cid, state.session_id)))
        return state, again

    def _replay_waiting(self, state: SessionState, run: RunState) -> None:
        """Re-execute the run's waiting actions (its own, its sub-agents') from the journal
        (calling nothing: every call they reach exists), so their callables and call
        arguments are known again."""
        for frame in (None, *run.frames.values()):
            holder = run if frame is None else frame
            if holder.active is not None:
                self._live.pop(self._live_key(state, run, holder.active), None)
                self._run_action(state, run, holder.active, frame)  # SUSPENDED: nothing new happens

    def _arguments(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord) -> str:
        """The arguments of a call in flight: known since it was issued or replayed here,
        in the record (a state saved before they left it), or computed by a replay."""
        args = self._args.get(call_id) or rec.args
        if not args and (run.active is not None or run.frames):
            self._replay_waiting(state, run)
            args = self._args.get(call_id, "")
        return args

    def evict(self, *session_ids: str) -> None:
        """Drop this machine's transient caches of sessions (e.g. their partition was revoked).

        Correctness never depends on them: a later apply replays from the state instead.
        One pass over the caches, however many sessions: ``machine.evict(*revoked)``.
        """
        sessions = set(session_ids)
        for key in [k for k in self._live if k[0] in sessions]:
            self._live.pop(key)[0].close()
        # A call id starts with its session id and then ':' (or '/' and a sub-agent scope);
        # a session id may hold either itself, so its own prefix is what tells.
        prefixes = tuple(p for sid in sessions for p in (sid + ":", sid + "/"))
        for cid in [c for c in self._callables if c.startswith(prefixes)]:
            del self._callables[cid]
        for cid in [c for c in self._args if c.startswith(prefixes)]:
            del self._args[cid]

    @property
    def cached(self) -> int:
        """How many live continuations and callables are cached (for leak checks)."""
        return len(self._live) + len(self._callables) + len(self._args)

    def callable_for(self, request: DurableCallRequest) -> Callable[..., Any] | None:
        """The live function (or reconciler) of a FUNCTION/RECONCILE request, if known here."""
        entry = self._callables.get(request.call_id)
        if entry is None:
            return None
        return entry[1] if request.kind is CallKind.RECONCILE else entry[0]

    # --- acceptance -----------------------------------------------------------------------
    def _remember_input(self, state: SessionState, ev: AgentEvent) -> bool:
        """False for an input or signal already applied (its event id is a recent one)."""
        recent = state.recent_inputs
        if ev.event_id in recent:
            self.stats["duplicates"] += 1
            return False
        recent[ev.event_id] = None
        if len(recent) > INPUT_DEDUP_WINDOW:
            del recent[next(iter(recent))]
        return True

    def _accept_input(self, state: SessionState, ev: AgentEvent, out: list[AgentEvent]) -> None:
        if not self._remember_input(state, ev):
            return
        self.stats["inputs"] += 1
        if ev.timestamp > state.clock:
            state.clock = ev.timestamp
        state.runs += 1
        state.seq += 1
        accepted = AgentEvent(
            ev.event_id, state.session_id, state.seq, state.runs, ev.scope, ev.type, None, None,
            self.plan.agent_name, self.plan.agent_version, state.clock, ev.payload,
        )
        out.append(accepted)
        state.queue.append(accepted)
        if state.run is None:
            self._start_runs(state, out)

    def _start_runs(self, state: SessionState, out: list[AgentEvent]) -> None:
        while state.run is None and state.queue:
            inp = state.queue.popleft()
            run = RunState(inp.run, inp.event_id)
            state.run = run
            budget = self.plan.budgets.get("session")
            over = None if budget is None else budget.exceeded(state.tokens, state.cost_usd)
            if over is not None:  # spent: the run calls nothing
                self._emit(state, run, OutputEvent(None, ErrorInfo(
                    "BudgetExceededError", f"session {state.session_id} went over the budget "
                    f"session.{over}; run {run.number} was not started",
                    category=ErrorCategory.PERMANENT)), inp.event_id, None, out)
                self._finish(state, run, failed=True)
                continue
            if self._deadline_ms is not None:
                self._set_deadline(state, run, inp.event_id, out)
            self._enqueue(run, inp)
            self._drive(state, out)

    def _enqueue(self, run: RunState, trigger: AgentEvent, frame: Frame | None = None) -> None:
        plan = self.plan if frame is None else self.plan.for_scope(frame.scope)
        pending = run.pending if frame is None else frame.pending
        for spec in plan.actions_for(trigger.type):
            run.invocations += 1
            pending.append(Invocation(run.invocations, spec.name, trigger))

    def _drive(self, state: SessionState, out: list[AgentEvent], frame: Frame | None = None) -> None:
        """Run the invocations of the current run (of its sub-agent ``frame``) until one
        waits for a call or none is left."""
        run = state.run
        holder: RunState | Frame | None = run if frame is None else frame
        scope = () if frame is None else frame.scope
        while run is not None and state.run is run and holder is not None:
            if frame is not None and run.frames.get(scope_key(scope)) is not frame:
                return  # ended meanwhile (its timeout)
            inv = holder.active
            if inv is None:
                if not holder.pending:
                    if frame is None:
                        self._finish(state, run, failed=False)
                    else:
                        self._child_done(state, run, frame, out)
                    return
                inv = holder.pending.popleft()
                holder.active = inv
            failure, ctx = self._run_action(state, run, inv, frame)
            if ctx.abandon:  # a batch's first answer came: the other calls are not needed
                self._abandon(state, run, list(ctx.abandon), out)
            starts: list[tuple[DurableCallRequest, AgentEvent]] = []
            if ctx.requests:
                internal = ctx._plan.subagents
                for req in ctx.requests:
                    if req.kind is CallKind.SUBAGENT and req.target in internal:
                        env = self._emit(state, run, SubagentCallEvent(
                            req.call_id, req.target, subagent_input(req)), inv.trigger.event_id,
                            inv.action, out, scope)
                        starts.append((req, env))
                    else:
                        env = self._emit(state, run, req, inv.trigger.event_id, inv.action, out, scope)
                    run.calls[req.call_id].request_id = env.event_id
                    self.stats["calls"] += 1
                for notice in ctx.notices:
                    self._emit(state, run, notice, inv.trigger.event_id, inv.action, out, scope)
            if failure is SUSPENDED:
                holder.waiting = ctx.waiting
                holder.any = ctx.wake_any
                for req, env in starts:  # each may answer at once, and resume this action
                    self._start_child(state, run, scope, inv, req, env, out)
                return
            holder.active = None
            if failure is not None:
                self._fail(state, run, inv, failure, out, frame)
                return
            self._complete(state, run, inv, ctx, out, frame)

    @staticmethod
    def _live_key(state: SessionState, run: RunState, inv: Invocation) -> tuple[str, int, int]:
        return (state.session_id, run.number, inv.number)

    def _run_action(
        self, state: SessionState, run: RunState, inv: Invocation, frame: Frame | None = None
    ) -> tuple[Any, RunnerContext]:
        """Execute, resume or replay one action (of sub-agent ``frame``).

        Returns (None if it completed, SUSPENDED, or an ErrorInfo) and its context.
        """
        plan = self.plan if frame is None else self.plan.for_scope(frame.scope)
        spec = plan.actions[inv.action]
        coro: Any = None
        key = self._live_key(state, run, inv)
        if spec.is_async:
            live = self._live.pop(key, None)
            if live is not None and live[2] is run:
                coro, ctx = live[0], live[1]
                ctx.requests = []
                ctx.notices = []
                ctx.waiting = []
                ctx.wake_any = False
                ctx.abandon = ()
            else:
                ctx = RunnerContext(self, state, run, inv, frame)
        else:
            ctx = RunnerContext(self, state, run, inv, frame)
        try:
            if not spec.is_async:
                spec.fn(inv.trigger.payload, ctx)
                return None, ctx
            if coro is None:
                coro = spec.fn(inv.trigger.payload, ctx)
            signal = coro.send(None)
        except StopIteration:
            return None, ctx
        except Suspend:
            return SUSPENDED, ctx
        except JournalMismatchError as err:
            return ErrorInfo("JournalMismatchError", str(err)), ctx
        except Exception as err:
            return ErrorInfo.of(err), ctx
        if signal is SUSPEND:
            self._live[key] = (coro, ctx, run)
            return SUSPENDED, ctx
        coro.close()
        return ErrorInfo(
            "TypeError",
            f"action {inv.action!r} awaited {signal!r}; actions may only await "
            "ctx.durable_execute_async() and ctx.durable_execute_all_async()",
        ), ctx

    def _complete(
        self,
        state: SessionState,
        run: RunState,
        inv: Invocation,
        ctx: RunnerContext,
        out: list[AgentEvent],
        frame: Frame | None = None,
    ) -> None:
        if ctx._short_term is not None:
            size = ctx._short_term.size_after_commit() if ctx._short_term.written else 0
            if size > self._max_memory:
                self._fail(state, run, inv, ErrorInfo(
                    "MemoryLimitError",
                    f"action {inv.action!r} would make the short-term memory of session "
                    f"{state.session_id} {size} bytes, over max_memory_bytes={self._max_memory}; "
                    "its writes were discarded"), out, frame)
                return
            ctx._short_term.commit()
        if ctx._sensory is not None:
            ctx._sensory.commit()
        if ctx._metrics is not None and self._metrics is not None:
            for kind, name, value in ctx._metrics.updates:
                self._metrics(kind, f"{inv.action}.{name}", state.session_id, value)
        run.events += len(ctx.sent)
        if run.events > self._max_events:
            self._fail(
                state,
                run,
                inv,
                ErrorInfo(
                    "RunLimitError",
                    f"run {run.number} emitted more than max_events_per_run={self._max_events} "
                    "events; is an action looping?",
                ),
                out,
                frame,
            )
            return
        scope = () if frame is None else frame.scope
        for payload in ctx.sent:
            env = self._emit(state, run, payload, inv.trigger.event_id, inv.action, out, scope)
            if frame is not None and isinstance(payload, OutputEvent):  # the answer, so far
                frame.output = None if payload.error else encode_value(payload.output, "OutputEvent.output")
                frame.error = payload.error
            self._enqueue(run, env, frame)

    def _fail(
        self,
        state: SessionState,
        run: RunState,
        inv: Invocation,
        error: ErrorInfo,
        out: list[AgentEvent],
        frame: Frame | None = None,
    ) -> None:
        """An action failed: the run ends with a failed OutputEvent; in a sub-agent, the
        sub-agent does, and its caller gets a failed Result."""
        self._emit(state, run, OutputEvent(None, error), inv.trigger.event_id, inv.action, out,
                   () if frame is None else frame.scope)
        if frame is None:
            self._finish(state, run, failed=True)
            return
        self._end(state, run, frame, error, out)

    def _finish(self, state: SessionState, run: RunState, failed: bool) -> None:
        for cid in run.calls:
            self._callables.pop(cid, None)
            self._args.pop(cid, None)
        holders: list[RunState | Frame] = [run, *run.frames.values()] if run.frames else [run]
        for holder in holders:
            if holder.active is not None:
                live = self._live.pop(self._live_key(state, run, holder.active), None)
                if live is not None:
                    live[0].close()
        state.run = None
        self.stats["runs_failed" if failed else "runs_completed"] += 1

    # --- envelopes ------------------------------------------------------------------------
    def _emit(
        self,
        state: SessionState,
        run: RunState,
        payload: Event,
        causation: str | None,
        action: str | None,
        out: list[AgentEvent],
        scope: tuple[str, ...] = (),
    ) -> AgentEvent:
        state.seq += 1
        type_name = payload.event_type
        if type_name == "CustomEvent":
            type_name = event_type_name(payload)
        plan = self.plan.for_scope(scope) if scope else self.plan
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

    def _envelope(
        self,
        state: SessionState,
        eid: str,
        seq: int,
        payload: Event,
        causation: str | None,
        action: str | None,
        scope: tuple[str, ...] = (),
    ) -> AgentEvent:
        run = state.run.number if state.run else 0
        plan = self.plan.for_scope(scope) if scope else self.plan
        return AgentEvent(
            eid, state.session_id, seq, run, scope, event_type_name(payload), causation, action,
            plan.agent_name, plan.agent_version, state.clock, payload,
        )


SUSPENDED = "SUSPENDED"
