"""What becomes of a durable call's outcome in the session machine: an executor's result
(kept, retried after a back-off, asked again when unknown, a run's deadline), a signal
answering a wait, and the action resumed once all it waits for are in.

A collaborator of the session machine's run loop (which holds it), kept apart because it
is the policy half of the machine: ``apply`` routes a ``DurableCallResult`` to
:meth:`CallOutcomes.accept_result` and a ``SignalEvent`` to
:meth:`CallOutcomes.accept_signal`; what they decide runs actions through the loop (a
:class:`~eddies.engine.run_loop.RunLoop`).
"""

from __future__ import annotations

from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
    OutputEvent,
    SignalEvent,
    decode_value,
    encode_value,
)
from eddies.events.ids import call_digest, call_id, scope_of_call

from .budgets import SPENDING_KINDS, spent
from .durable import JournalMismatchError
from .envelopes import emit
from .halts import halted
from .live import LiveCalls
from .plan import AgentPlan
from .run_loop import RunLoop
from .scopes import SUBAGENT_DEADLINE, Scopes
from .state import (
    ERROR,
    OK,
    PENDING,
    RECONCILING,
    TERMINAL,
    CallRecord,
    RunState,
    SessionState,
)

#: An idempotent call whose outcome keeps coming back unknown is re-run at most this often.
MAX_ATTEMPTS = 5
#: Signals nothing waited for are kept for the next wait, up to this many per name.
MAX_KEPT_SIGNALS = 64
#: The target of a run's deadline timer (``request_timeout_ms``).
RUN_DEADLINE = "run-deadline"


class CallOutcomes:
    """Outcomes and signals, for the session machine (see the module's docstring)."""

    def __init__(self, plan: AgentPlan, loop: RunLoop, scopes: Scopes, live: LiveCalls,
                 stats: dict[str, int]) -> None:
        self._plan = plan
        self._loop = loop
        self._scopes = scopes
        self._live = live
        self._stats = stats
        self._deadline_ms: int | None = plan.config.get("request_timeout_ms")

    def accept_result(
        self, state: SessionState, ev: AgentEvent, result: DurableCallResult, out: list[AgentEvent]
    ) -> None:
        run = state.run
        rec = None if run is None else run.calls.get(result.call_id)
        if run is None or rec is None or rec.status in TERMINAL or result.attempt != rec.attempt:
            self._stats["duplicates"] += 1  # late, repeated or for a finished run
            return
        if ev.timestamp > state.clock:
            state.clock = ev.timestamp
        state.seq += 1
        out.append(
            AgentEvent(
                ev.event_id, state.session_id, state.seq, run.number, ev.scope, ev.type,
                rec.request_id, None, self._plan.agent_name, self._plan.agent_version,
                state.clock, result,
            )
        )
        if result.digest and result.digest != rec.digest:
            holder = self._scopes.holder(state, run, result.call_id)
            inv = None if holder is None else holder.active
            if inv is None:  # nothing waits for it
                return
            self._loop.fail(state, run, inv, ErrorInfo("JournalMismatchError", str(
                JournalMismatchError(result.call_id, f"a call with digest {result.digest}",
                                     f"{rec.kind} {rec.target} (digest {rec.digest})")
            )), out, None if holder is run else holder)  # type: ignore[arg-type]
            self._loop.start_runs(state, out)
            return
        if result.status is CallStatus.UNKNOWN:
            if rec.status == PENDING and rec.reconciler is not None:
                rec.status = RECONCILING
                self._ask_again(state, run, result.call_id, rec, out)
                return
            if rec.idempotent and rec.attempt < MAX_ATTEMPTS:
                self._ask_again(state, run, result.call_id, rec, out)
                return
            rec.status = ERROR
            why = (f"it was tried {rec.attempt} times" if rec.idempotent
                   else "it has no reconciler and is not idempotent")
            rec.error = ErrorInfo(
                "DurableCallUnknownError",
                f"call {result.call_id} ({rec.target}) started but its outcome was not recorded; "
                f"{why}, so it is not run again",
            )
        elif result.status is CallStatus.OK:
            rec.status = OK
            rec.value = result.value
            if self._plan.budgets and rec.kind in SPENDING_KINDS:
                over = self._spend(state, run, result.value)
                if over is not None:
                    self._end_run(state, run, ev, ErrorInfo(
                        "BudgetExceededError", f"run {run.number} of session "
                        f"{state.session_id} went over the budget {over}",
                        category=ErrorCategory.PERMANENT), out)
                    return
            if rec.target == SUBAGENT_DEADLINE and rec.kind == "TIMER":
                self._scopes.deadline_due(state, run, result.call_id, out)
                return
            if rec.target == RUN_DEADLINE and rec.kind == "TIMER" and not halted(run):
                self._end_run(state, run, ev, ErrorInfo(
                    "RunDeadlineError", f"run {run.number} of session {state.session_id} did not "
                    f"finish within request_timeout_ms={self._deadline_ms}; its calls still "
                    "running are abandoned (their late results are ignored)",
                    category=ErrorCategory.TRANSIENT), out)
                return
        else:
            error = result.error or ErrorInfo("Error", "call failed without an error")
            plan = self._plan.for_scope(scope_of_call(result.call_id, state.session_id))
            policy = plan.retry_for(CallKind(rec.kind), rec.target) if rec.status == PENDING else None
            delay = None if policy is None else policy.delay_ms(result.call_id, rec.attempt, error)
            if delay is not None:  # asked again when the back-off is over
                rec.due = state.clock + delay
                self._ask_again(state, run, result.call_id, rec, out)
                return
            rec.status = ERROR
            rec.error = error
        self.settled(state, run, result.call_id, rec, out)

    def _ask_again(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord,
                   out: list[AgentEvent]) -> None:
        """Issue the call's next attempt (to its reconciler when it is RECONCILING)."""
        rec.attempt += 1
        req = self.request(state, call_id, rec, self._loop.arguments(state, run, call_id, rec))
        env = emit(self._plan, state, run, req, rec.request_id, self._scopes.action_of(state, run, call_id),
                         out, scope_of_call(call_id, state.session_id))
        rec.request_id = env.event_id

    def request(self, state: SessionState, call_id: str, rec: CallRecord, args: str) -> DurableCallRequest:
        """The request of a call's current attempt, as its record says: to its reconciler
        when it is RECONCILING, else to its target, with its timeout and due time."""
        who = None if state.run is None else state.run.identity
        if rec.status == RECONCILING:
            return DurableCallRequest(call_id=call_id, kind=CallKind.RECONCILE,
                                      target=rec.reconciler or "", args=args, idempotent=True,
                                      attempt=rec.attempt, identity=who)
        kind = CallKind(rec.kind)
        plan = self._plan.for_scope(scope_of_call(call_id, state.session_id))
        asked = decode_value(args).get("kwargs") if kind is CallKind.SUBAGENT and args else None
        return DurableCallRequest(
            call_id=call_id, kind=kind, target=rec.target, args=args, idempotent=rec.idempotent,
            attempt=rec.attempt, timeout_ms=plan.call_timeout(kind, rec.target, asked),
            digest=rec.digest, not_before=rec.due, identity=who)

    def _end_run(self, state: SessionState, run: RunState, cause: AgentEvent, error: ErrorInfo,
                 out: list[AgentEvent]) -> None:
        """End the run now with a failed OutputEvent (caused by ``cause``); the next queued
        input starts. Its calls still running are abandoned: late results are ignored."""
        inv = run.active
        emit(self._plan, state, run, OutputEvent(None, error), cause.event_id,
                   inv.action if inv is not None else None, out)
        self._loop.finish(state, run, failed=True)
        self._loop.start_runs(state, out)

    def _spend(self, state: SessionState, run: RunState, value: str) -> str | None:
        """Add a model reply's tokens and cost to the run's and the session's totals; the
        budget now passed (``run.<limit>`` or ``session.<limit>``), if any."""
        tokens, cost = spent(decode_value(value))
        run.tokens += tokens
        run.cost_usd += cost
        state.tokens += tokens
        state.cost_usd += cost
        for scope, used in (("run", run), ("session", state)):
            budget = self._plan.budgets.get(scope)
            over = None if budget is None else budget.exceeded(used.tokens, used.cost_usd)
            if over is not None:
                return f"{scope}.{over}"
        return None

    def settled(self, state: SessionState, run: RunState, call_id: str, rec: CallRecord,
                 out: list[AgentEvent]) -> None:
        """A call has its outcome: resume the waiting action once all it waits for have."""
        rec.args = ""  # (a state saved by an earlier version kept them)
        rec.at = state.clock
        self._live.pop(call_id, None)
        holder = self._scopes.holder(state, run, call_id)
        if holder is not None and holder.waiting:
            calls = run.calls
            if holder.any:  # a batch that goes on as each call is done
                if call_id not in holder.waiting:
                    return
            else:
                for c in holder.waiting:
                    if calls[c].status not in TERMINAL:
                        return
            holder.waiting = []
            holder.any = False
            self._loop.drive(state, out, None if holder is run else holder)  # type: ignore[arg-type]
            self._loop.start_runs(state, out)

    def accept_signal(self, state: SessionState, ev: AgentEvent, signal: SignalEvent,
                       out: list[AgentEvent]) -> None:
        """A signal answers the running run's first pending wait for its name; with none,
        it is kept for the next wait (at most MAX_KEPT_SIGNALS per name, oldest dropped)."""
        if not self._loop.remember_input(state, ev):
            return
        if ev.timestamp > state.clock:
            state.clock = ev.timestamp
        run = state.run
        waiting = None
        if run is not None:
            for cid, rec in run.calls.items():
                if rec.kind == "SIGNAL" and rec.target == signal.name and rec.status not in TERMINAL:
                    waiting = (cid, rec)
                    break
        state.seq += 1
        out.append(AgentEvent(
            ev.event_id, state.session_id, state.seq, run.number if run is not None else 0,
            ev.scope, ev.type, waiting[1].request_id if waiting else None, None,
            self._plan.agent_name, self._plan.agent_version, state.clock, signal,
        ))
        value = encode_value(signal.value, "SignalEvent.value")
        if waiting is None or run is None:
            kept = state.signals.setdefault(signal.name, [])
            kept.append(value)
            del kept[:-MAX_KEPT_SIGNALS]
            return
        cid, rec = waiting
        rec.status = OK
        rec.value = value
        self.settled(state, run, cid, rec, out)

    # --- runs -----------------------------------------------------------------------------
    def set_deadline(self, state: SessionState, run: RunState, cause: str,
                      out: list[AgentEvent]) -> None:
        """The run's deadline (``request_timeout_ms``): a timer that fails the run if it
        is still going when it fires (a call no action waits for; pending like any other,
        so it survives restarts)."""
        assert self._deadline_ms is not None
        cid = call_id(state.session_id, (), run.number, 0, 0)
        args = encode_value({"args": [], "kwargs": {"after_ms": self._deadline_ms}})
        dig = call_digest(CallKind.TIMER, RUN_DEADLINE, args)
        rec = CallRecord(CallKind.TIMER.value, RUN_DEADLINE, dig, args, "", True,
                         due=state.clock + self._deadline_ms)
        run.calls[cid] = rec
        req = DurableCallRequest(call_id=cid, kind=CallKind.TIMER, target=RUN_DEADLINE, args=args,
                                 idempotent=True, attempt=1, timeout_ms=None, digest=dig,
                                 not_before=rec.due)
        rec.request_id = emit(self._plan, state, run, req, cause, None, out).event_id
