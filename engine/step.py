"""``Step``: one execution of one action invocation, as the session machine runs it.

An action is re-executed from its start whenever a call it waits for completes (journal
replay, as in Restate and Temporal): calls recorded in the journal return their recorded
outcome, the first unrecorded call suspends the action. Everything else an action does
(sent events, memory writes, metrics) is buffered here and takes effect only when the
action completes, so a suspended or replayed execution leaves no trace.

The step is the layer under the user-facing :class:`~eddies.engine.context.RunnerContext`
(what Restate's ``sys_*`` VM calls and Temporal's ``_Runtime`` are to theirs): it owns the
call ordinal, the journal records an execution makes and its buffers, and after each
activation hands the machine a frozen :class:`StepEffects`. Handles, awaitables and
sub-agent calls use it as a :class:`~eddies.engine.calls.CallSite`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eddies.events import (
    ApprovalRequestEvent,
    CallKind,
    DurableCallRequest,
    Event,
    Identity,
    decode_value,
    encode_value,
)
from eddies.events.ids import call_digest, call_id

from .calls import CallSpec, Suspend
from .durable import JournalMismatchError, durable_error, function_name
from .hooks import CallView, HookCounts, Refusal, before_call
from .live import LiveCalls
from .memory import Memory, Metrics
from .plan_view import PlanView
from .scope_paths import parent_memory
from .state import ERROR, OK, TERMINAL, CallRecord, Frame, Invocation, RunState, SessionState

#: What one activation of an action left for the machine to do, frozen (a tuple), in this
#: order (unpack it: ``sent, requests, notices, waiting, wake_any, abandon, short_term,
#: sensory, metrics = effects``):
#:
#: - ``sent``: events to emit (and route to actions) when the action completes;
#: - ``requests``: call requests first issued in this activation, and ``notices``: events
#:   announcing some of them (an approval request), emitted with them;
#: - ``waiting``: the calls the action now waits for; ``wake_any``: resume it when any of
#:   them is done, not all; ``abandon``: calls of a batch another answered first;
#: - ``short_term``, ``sensory``, ``metrics``: what the action touched of its memories
#:   and metrics (None: nothing), checked and committed when it completes.
#:
#: ``sent`` and the memories are the whole execution's so far, the rest this activation's.
#: A plain tuple, not a frozen dataclass or a NamedTuple: one is made per activation on the
#: hot path, where those cost several times more to make (a Python ``__init__``,
#: ``object.__setattr__`` per field) and a NamedTuple's fields more to read.
StepEffects = tuple[list[Event], list[DurableCallRequest], list[Event], list[str], bool, list[str],
                    Memory | None, Memory | None, Metrics | None]


_NONE: list[Any] = []  # shared empty buffer: replaced, never appended to


class Step:
    """One action invocation's execution (see the module's docstring). Created by the
    machine for each execution; an ``async def`` action suspended in place keeps its step
    until it resumes."""

    __slots__ = ("_abandon", "_children", "_frame", "_live", "_metrics", "_notices", "_now",
                 "_ordinal", "_requests", "_sensory", "_short_term", "_waiting", "_wake_any", "calls",
                 "invocation", "plan", "run", "sent", "state")

    def __init__(self, state: SessionState, run: RunState, inv: Invocation, plan: PlanView,
                 live: LiveCalls, frame: Frame | None = None) -> None:
        self.state = state
        self.run = run
        #: The run's journal records (the call site's view of them).
        self.calls = run.calls
        #: The plan its action runs in (a sub-agent's, in a sub-agent's frame).
        self.plan = plan
        #: The invocation it executes (its action and trigger).
        self.invocation = inv
        self._live = live
        # A sub-agent's frame (None: the agent's own run).
        self._frame = frame
        self._ordinal = 0
        self._children = 0
        # What the action sees as the time: the run's, moved on by each outcome it reads.
        self._now = run.time
        #: Events the action sent, emitted when it completes.
        self.sent: list[Event] = []
        self._requests: list[DurableCallRequest] = _NONE
        self._notices: list[Event] = _NONE
        self._waiting: list[str] = _NONE
        self._wake_any = False
        self._abandon: list[str] = _NONE
        # Created on first use: most actions never touch them.
        self._short_term: Memory | None = None
        self._sensory: Memory | None = None
        self._metrics: Metrics | None = None

    # --- what the context shows an action -------------------------------------------------
    @property
    def config(self) -> Mapping[str, Any]:
        return self.plan.config

    def now(self) -> int:
        return self._now

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def identity(self) -> Identity | None:
        return self.run.identity

    @property
    def trigger(self) -> Event:
        return self.invocation.trigger.payload

    @property
    def short_term_memory(self) -> Memory:
        if self._short_term is None:
            frame = self._frame
            if frame is None:
                self._short_term = Memory(self.state.memory, "short_term_memory")
            else:
                self._short_term = Memory(frame.memory, "short_term_memory",
                                          parent_memory(self.state, self.run, frame))
        return self._short_term

    @property
    def sensory_memory(self) -> Memory:
        if self._sensory is None:
            frame = self._frame
            self._sensory = Memory(self.run.sensory if frame is None else frame.sensory, "sensory_memory")
        return self._sensory

    @property
    def metrics(self) -> Metrics:
        if self._metrics is None:
            self._metrics = Metrics()
        return self._metrics

    def next_child(self) -> int:
        """The number (from 1) of the next child session this execution names."""
        self._children += 1
        return self._children

    def effects(self) -> StepEffects:
        """What this activation left (see :class:`StepEffects`); a resumed action's next
        activation starts with none of this one's requests, notices or waits."""
        effects: StepEffects = (self.sent, self._requests, self._notices, self._waiting, self._wake_any,
                                self._abandon, self._short_term, self._sensory, self._metrics)
        # Only an activation that made or abandoned calls leaves any (most complete at once).
        if self._waiting is not _NONE or self._abandon is not _NONE:
            self._requests = self._notices = self._waiting = self._abandon = _NONE
            self._wake_any = False
        return effects

    # --- the call site (:class:`~eddies.engine.calls.CallSite`) ---------------------------
    def next_call_id(self, ahead: int = 0) -> str:
        inv = self.invocation
        return call_id(self.state.session_id, inv.trigger.scope, self.run.number, inv.number,
                       self._ordinal + ahead)

    def claim(self, spec: CallSpec) -> None:
        spec.cid = self.next_call_id()
        self._ordinal += 1

    def call_now(self, spec: CallSpec) -> Any:
        rec = self.record(spec)
        if rec is None:
            raise Suspend()
        return self.answer(rec, spec)

    def answer(self, rec: CallRecord, spec: CallSpec) -> Any:
        """Its value (its error raised), or what its spec makes of the record (a
        sub-agent's Result)."""
        if rec.at > self._now:
            self._now = rec.at
        if spec.result is not None:
            return spec.result(rec, spec.cid)
        if rec.error is not None:
            raise durable_error(spec.cid, rec.error)
        return decode_value(rec.value)

    def abandon(self, call_ids: list[str]) -> None:
        self._abandon = call_ids

    def wake_on_any(self) -> None:
        self._wake_any = True

    def record(self, spec: CallSpec) -> CallRecord | None:
        run = self.run
        cid = spec.cid
        if not cid:
            cid = spec.cid = self.next_call_id()
            self._ordinal += 1
        args = encode_value({"args": spec.args, "kwargs": spec.kwargs}, "arguments of durable call",
                            spec.target)
        refusal = counts = None
        if self.plan.hooks:  # on every execution: a replay must send what the first one sent
            args, refusal, counts = self._hooked(spec, args)
        kind: str = spec.kind  # a StrEnum: formats and compares as its value
        dig = call_digest(kind, spec.target, args)
        rec = run.calls.get(cid)
        if rec is not None:
            if rec.digest != dig:
                raise JournalMismatchError(
                    cid, f"{rec.kind} {rec.target}", f"{kind} {spec.target} with other arguments"
                    if rec.target == spec.target and rec.kind == kind else f"{kind} {spec.target}"
                )
            if rec.status in TERMINAL:
                return rec
        else:
            reconciler = (spec.reconciler if spec.reconciler is None or isinstance(spec.reconciler, str)
                          else function_name(spec.reconciler))
            # request_id is filled in when the machine emits the request event.
            # The arguments are not kept in the record: the request carries them, and a
            # replay of the action computes them again (see LiveCalls).
            rec = CallRecord(str(kind), spec.target, dig, "", "", spec.idempotent, reconciler)
            run.calls[cid] = rec
            if counts:  # what the hooks counted of a call, counted once: when it is first asked
                self.metrics.count_hooked(counts)
            if spec.due_at is not None:
                rec.due = spec.due_at
            elif spec.due_after is not None:
                rec.due = self.state.clock + spec.due_after
            if refusal is not None:  # settled here: no request is made
                rec.status = ERROR
                rec.error = refusal.error()
                rec.at = self.state.clock
                return rec
            if spec.kind is CallKind.SIGNAL and self._take_signal(spec.target, rec):
                return rec
            if self._requests is _NONE:
                self._requests = []
                self._notices = []
            self._requests.append(DurableCallRequest(
                call_id=cid, kind=spec.kind, target=spec.target, args=args,
                idempotent=spec.idempotent, attempt=1,
                timeout_ms=self.plan.call_timeout(spec.kind, spec.target, spec.kwargs), digest=dig,
                not_before=rec.due, identity=run.identity))
            notice = spec.notice
            if notice is not None:
                if isinstance(notice, ApprovalRequestEvent) and rec.due is not None:
                    notice.deadline = rec.due  # the wait's own, whatever the action's time
                self._notices.append(notice)
        fn = spec.fn
        if fn is None:
            self._live[cid] = (args, None, None)
        else:
            live = spec.reconciler if spec.reconciler is None or callable(spec.reconciler) else None
            self._live[cid] = (args, fn, live)
        if self._waiting is _NONE:
            self._waiting = []
        self._waiting.append(cid)
        return None

    def _hooked(self, spec: CallSpec, args: str) -> tuple[str, Refusal | None, dict[str, float]]:
        """The call's arguments (JSON text) as the plan's hooks let it be made, or the
        hook's refusal (the arguments then as the action gave them), and what they counted."""
        asked = decode_value(args)
        counts = HookCounts()
        call = CallView(spec.kind, spec.target, asked["args"], asked["kwargs"], self.state.session_id,
                        self.run.number, self.invocation.trigger.scope, self.run.identity, counts)
        decided = before_call(self.plan.hooks, call)
        if isinstance(decided, Refusal):
            return args, decided, counts.counts
        if decided is call:
            return args, None, counts.counts
        return encode_value({"args": decided.args, "kwargs": decided.kwargs}, "arguments of durable call",
                            spec.target), None, counts.counts

    def _take_signal(self, name: str, rec: CallRecord) -> bool:
        """A signal of ``name`` that arrived before this wait answers it at once."""
        waiting = self.state.signals.get(name)
        if not waiting:
            return False
        rec.status = OK
        rec.value = waiting.pop(0)
        rec.at = self.state.clock
        if not waiting:
            del self.state.signals[name]
        return True


__all__ = ["Step", "StepEffects"]
