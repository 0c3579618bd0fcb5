"""``Runs``: the session machine's run loop. Inputs start runs one at a time per session;
a run's invocations execute (an action each, through its :class:`~eddies.engine.step.Step`)
until one waits for a call or none is left; what an execution leaves (its
:class:`~eddies.engine.step.StepEffects`) is emitted, queued or committed here.

It holds the machine's two collaborators, :class:`~eddies.engine.scopes.Scopes`
(sub-agent frames) and :class:`~eddies.engine.outcomes.CallOutcomes` (results and
signals), and is the :class:`~eddies.engine.run_loop.RunLoop` they call back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddies.events import (
    AgentEvent,
    CallKind,
    DurableCallRequest,
    ErrorCategory,
    ErrorInfo,
    InputEvent,
    OutputEvent,
    SubagentCallEvent,
    encode_value,
)

from .calls import SUSPEND, Suspend
from .context import RunnerContext
from .envelopes import emit
from .halts import PROCESS_EXITS
from .hooks import HookCounts, InputInfo, Refusal, on_input
from .live import LiveCalls, SuspendedActions
from .outcomes import CallOutcomes
from .plan import AgentPlan
from .scopes import Scopes, scope_key, subagent_input
from .state import INPUT_DEDUP_WINDOW, CallRecord, Frame, Invocation, RunState, SessionState
from .step import Step, StepEffects

MetricsSink = Callable[[str, str, str, float], None]

SUSPENDED = "SUSPENDED"


def _failure(err: BaseException) -> ErrorInfo:
    """What an action that raised ``err`` failed with. Any exception of the action's
    (``JournalMismatchError`` and any other ``BaseException`` included, the process's own
    exits excepted) is the run's failure: it stays in the session, never the worker's."""
    if isinstance(err, PROCESS_EXITS):
        raise err
    return ErrorInfo.of(err)


class Runs:
    """The run loop of one machine (see the module's docstring). Holds no session state."""

    def __init__(self, plan: AgentPlan, stats: dict[str, int], live: LiveCalls, metrics: MetricsSink | None,
                 max_memory: int) -> None:
        self._plan = plan
        self._stats = stats
        self._live = live
        #: Where actions' metrics go (None: nowhere); the machine may replace it.
        self.metrics = metrics
        self.suspended = SuspendedActions()
        self.scopes = Scopes(plan, self, live, self.suspended)
        self.outcomes = CallOutcomes(plan, self, self.scopes, live, stats)
        self._max_events = int(plan.config["max_events_per_run"])
        self._deadline_ms: int | None = plan.config.get("request_timeout_ms")
        self._max_memory = max_memory

    # --- inputs -----------------------------------------------------------------------------
    def remember_input(self, state: SessionState, ev: AgentEvent) -> bool:
        """False for an input or signal already applied (its event id is a recent one)."""
        recent = state.recent_inputs
        if ev.event_id in recent:
            self._stats["duplicates"] += 1
            return False
        recent[ev.event_id] = None
        if len(recent) > INPUT_DEDUP_WINDOW:
            del recent[next(iter(recent))]
        return True

    def accept_input(self, state: SessionState, ev: AgentEvent, out: list[AgentEvent]) -> None:
        if not self.remember_input(state, ev):
            return
        self._stats["inputs"] += 1
        if ev.timestamp > state.clock:
            state.clock = ev.timestamp
        state.runs += 1
        state.seq += 1
        plan = self._plan
        payload, refused = ev.payload, None
        if plan.hooks:
            payload, refused = self._hooked_input(state, ev)
        accepted = AgentEvent(
            ev.event_id, state.session_id, state.seq, state.runs, ev.scope, ev.type, None, None,
            plan.agent_name, plan.agent_version, state.clock, payload,
        )
        out.append(accepted)
        if refused is not None:  # its run ends before it starts (another may be going on)
            emit(plan, state, RunState(state.runs, ev.event_id), OutputEvent(None, refused), ev.event_id,
                 None, out)
            self._stats["runs_failed"] += 1
            return
        state.queue.append(accepted)
        if state.run is None:
            self.start_runs(state, out)

    def _hooked_input(self, state: SessionState, ev: AgentEvent) -> tuple[InputEvent, ErrorInfo | None]:
        """The input as the plan's hooks let the session record it, or recorded without its
        value (a hook refused it, or raised: nothing it was to hide is kept) with the error
        its run fails with."""
        asked = ev.payload
        assert isinstance(asked, InputEvent)
        counts = HookCounts()
        value = on_input(self._plan.hooks, asked.input, InputInfo(state.session_id, ev.event_id, state.runs,
                                                                 asked.identity, counts))
        if counts.counts:
            self._count_hooked(state, counts.counts)
        if isinstance(value, Refusal):
            return InputEvent(None, asked.identity), value.error()
        return (asked if value is asked.input else InputEvent(value, asked.identity)), None

    def start_runs(self, state: SessionState, out: list[AgentEvent]) -> None:
        while state.run is None and state.queue:
            inp = state.queue.popleft()
            run = RunState(inp.run, inp.event_id)
            run.time = inp.timestamp
            asked = inp.payload
            if type(asked) is InputEvent and asked.identity is not None:
                run.identity = asked.identity
            state.run = run
            budget = self._plan.budgets.get("session")
            over = None if budget is None else budget.exceeded(state.tokens, state.cost_usd)
            if over is not None:  # spent: the run calls nothing
                emit(self._plan, state, run, OutputEvent(None, ErrorInfo(
                    "BudgetExceededError", f"session {state.session_id} went over the budget "
                    f"session.{over}; run {run.number} was not started",
                    category=ErrorCategory.PERMANENT)), inp.event_id, None, out)
                self.finish(state, run, failed=True)
                continue
            if self._deadline_ms is not None:
                self.outcomes.set_deadline(state, run, inp.event_id, out)
            self.enqueue(run, inp)
            self.drive(state, out)

    def enqueue(self, run: RunState, trigger: AgentEvent, frame: Frame | None = None) -> None:
        plan = self._plan if frame is None else self._plan.for_scope(frame.scope)
        pending = run.pending if frame is None else frame.pending
        for spec in plan.by_type.get(trigger.type, ()):  # plan.actions_for, without the call
            run.invocations += 1
            pending.append(Invocation(run.invocations, spec.name, trigger))

    # --- running actions --------------------------------------------------------------------
    def drive(self, state: SessionState, out: list[AgentEvent], frame: Frame | None = None) -> None:
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
                        self.finish(state, run, failed=False)
                    else:
                        self.scopes.child_done(state, run, frame, out)
                    return
                inv = holder.pending.popleft()
                holder.active = inv
            failure, effects = self.run_action(state, run, inv, frame)
            _, requests, notices, waiting, wake_any, abandon, _, _, metrics = effects
            if metrics is not None and metrics.hooked:
                self._count_hooked(state, metrics.hooked)
            if abandon:  # a batch's first answer came: the other calls are not needed
                self.scopes.abandon(state, run, list(abandon), out)
            starts: list[tuple[DurableCallRequest, AgentEvent]] = []
            if requests:
                internal = (self._plan if frame is None else self._plan.for_scope(scope)).subagents
                for req in requests:
                    if req.kind is CallKind.SUBAGENT and req.target in internal:
                        env = emit(self._plan, state, run, SubagentCallEvent(
                            req.call_id, req.target, subagent_input(req)), inv.trigger.event_id,
                            inv.action, out, scope)
                        starts.append((req, env))
                    else:
                        env = emit(self._plan, state, run, req, inv.trigger.event_id, inv.action, out, scope)
                    run.calls[req.call_id].request_id = env.event_id
                    self._stats["calls"] += 1
                for notice in notices:
                    emit(self._plan, state, run, notice, inv.trigger.event_id, inv.action, out, scope)
            if failure is SUSPENDED:
                holder.waiting = waiting
                holder.any = wake_any
                for req, env in starts:  # each may answer at once, and resume this action
                    self.scopes.start_child(state, run, scope, inv, req, env, out)
                return
            holder.active = None
            if failure is not None:
                self.fail(state, run, inv, failure, out, frame)
                return
            self.complete(state, run, inv, effects, out, frame)

    def _count_hooked(self, state: SessionState, hooked: dict[str, float]) -> None:
        """Report what hooks counted of calls just asked (once: a replay asks nothing new)."""
        if self.metrics is not None:
            for key, n in hooked.items():
                self.metrics("hook", key, state.session_id, n)
        hooked.clear()

    def run_action(
        self, state: SessionState, run: RunState, inv: Invocation, frame: Frame | None = None
    ) -> tuple[Any, StepEffects]:
        """Execute, resume or replay one action (of sub-agent ``frame``).

        Returns (None if it completed, SUSPENDED, or an ErrorInfo) and what it left.
        """
        plan = self._plan if frame is None else self._plan.for_scope(frame.scope)
        spec = plan.actions[inv.action]
        if not spec.is_async:
            step = Step(state, run, inv, plan, self._live, frame)
            try:
                spec.fn(inv.trigger.payload, RunnerContext(step))
            except Suspend:
                return SUSPENDED, step.effects()
            except BaseException as err:  # see _failure
                return _failure(err), step.effects()
            return None, step.effects()
        coro: Any = None
        key = (state.session_id, run.number, inv.number)
        held = self.suspended.pop(key, None)
        if held is not None and held[2] is run:
            coro, step = held[0], held[1]
        else:
            step = Step(state, run, inv, plan, self._live, frame)
        try:
            if coro is None:
                coro = spec.fn(inv.trigger.payload, RunnerContext(step))
            signal = coro.send(None)
        except StopIteration:
            return None, step.effects()
        except Suspend:
            return SUSPENDED, step.effects()
        except BaseException as err:  # see _failure
            return _failure(err), step.effects()
        if signal is SUSPEND:
            self.suspended[key] = (coro, step, run)
            return SUSPENDED, step.effects()
        coro.close()
        return ErrorInfo(
            "TypeError",
            f"action {inv.action!r} awaited {signal!r}; actions may only await "
            "ctx.durable_execute_async() and ctx.durable_execute_all_async()",
        ), step.effects()

    def complete(self, state: SessionState, run: RunState, inv: Invocation, effects: StepEffects,
                 out: list[AgentEvent], frame: Frame | None = None) -> None:
        """Action ``inv`` completed: its memory writes, metrics and sent events take effect."""
        sent, _, _, _, _, _, short_term, sensory, metrics = effects
        if short_term is not None:
            size = short_term.size_after_commit() if short_term.written else 0
            if size > self._max_memory:
                self.fail(state, run, inv, ErrorInfo(
                    "MemoryLimitError",
                    f"action {inv.action!r} would make the short-term memory of session "
                    f"{state.session_id} {size} bytes, over max_memory_bytes={self._max_memory}; "
                    "its writes were discarded"), out, frame)
                return
            short_term.commit()
        if sensory is not None:
            sensory.commit()
        if metrics is not None and self.metrics is not None:
            for kind, name, value in metrics.updates:
                self.metrics(kind, f"{inv.action}.{name}", state.session_id, value)
        run.events += len(sent)
        if run.events > self._max_events:
            self.fail(state, run, inv, ErrorInfo(
                "RunLimitError",
                f"run {run.number} emitted more than max_events_per_run={self._max_events} "
                "events; is an action looping?"), out, frame)
            return
        scope = () if frame is None else frame.scope
        by_type = (self._plan if frame is None else self._plan.for_scope(scope)).by_type
        counted = self._count_hooked if self._plan.hooks else None  # of what output hooks count
        for payload in sent:
            env = emit(self._plan, state, run, payload, inv.trigger.event_id, inv.action, out, scope,
                       counted=counted)
            if frame is not None and isinstance(payload, OutputEvent):  # the answer, so far
                frame.output = None if payload.error else encode_value(payload.output, "OutputEvent.output")
                frame.error = payload.error
            if env.type in by_type:  # many events (an OutputEvent, say) start no action
                self.enqueue(run, env, frame)

    def fail(self, state: SessionState, run: RunState, inv: Invocation, error: ErrorInfo,
             out: list[AgentEvent], frame: Frame | None = None) -> None:
        """An action failed: the run ends with a failed OutputEvent; in a sub-agent, the
        sub-agent does, and its caller gets a failed Result."""
        emit(self._plan, state, run, OutputEvent(None, error), inv.trigger.event_id, inv.action, out,
             () if frame is None else frame.scope)
        if frame is None:
            self.finish(state, run, failed=True)
            return
        self.scopes.end(state, run, frame, error, out)

    def finish(self, state: SessionState, run: RunState, failed: bool) -> None:
        if run.calls:
            self._live.forget_all(run.calls)
        if run.active is not None:
            self.suspended.drop(state, run, run.active)
        for frame in run.frames.values():
            if frame.active is not None:
                self.suspended.drop(state, run, frame.active)
        state.run = None
        self._stats["runs_failed" if failed else "runs_completed"] += 1

    def settled(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord,
                out: list[AgentEvent]) -> None:
        self.outcomes.settled(state, run, call_id, rec, out)

    # --- replays ----------------------------------------------------------------------------
    def replay_waiting(self, state: SessionState, run: RunState) -> None:
        """Re-execute the run's waiting actions (its own, its sub-agents') from the journal
        (calling nothing: every call they reach exists), so their callables and call
        arguments are known again."""
        for frame in (None, *run.frames.values()):
            holder = run if frame is None else frame
            if holder.active is not None:
                self.suspended.pop(self.suspended.key(state, run, holder.active), None)
                self.run_action(state, run, holder.active, frame)  # SUSPENDED: nothing new happens

    def arguments(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord) -> str:
        """The arguments of a call in flight: known since it was issued or replayed here,
        in the record (a state saved before they left it), or computed by a replay."""
        args = self._live.args(call_id) or rec.args
        if not args and (run.active is not None or run.frames):
            self.replay_waiting(state, run)
            args = self._live.args(call_id) or ""
        return args


__all__ = ["SUSPENDED", "MetricsSink", "Runs"]
