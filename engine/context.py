"""``RunnerContext``: what an action can do, and the replay of its durable calls.

An action is re-executed from its start whenever a call it waits for completes (journal
replay, as in Restate and Temporal): calls recorded in the journal return their recorded
outcome, the first unrecorded call suspends the action. Everything else an action does
(sent events, memory writes, metrics) is buffered and takes effect only when the action
completes, so a suspended or replayed execution leaves no trace.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from eddies.events import (
    CallKind,
    DurableCallRequest,
    ErrorInfo,
    Event,
    ToolCall,
    ToolResult,
    decode_value,
    encode_value,
)
from eddies.events.codec import validate_payload
from eddies.events.ids import call_digest, call_id, scope_path

from . import halts
from .calls import (
    CallAwaitable,
    CallSpec,
    Suspend,
    duration_ms,
    signal_wait_spec,
    timer_spec,
)
from .durable import (
    DurableCall,
    JournalMismatchError,
    durable_error,
    function_name,
)
from .handles import ChatModelHandle, ToolHandle, call_tools
from .memory import Memory, Metrics
from .resources import ResourceType
from .state import OK, TERMINAL, CallRecord, Frame, Invocation, RunState, SessionState
from .subagents import Subagent, SubagentSetup

if TYPE_CHECKING:
    from .machine import SessionMachine
    from .plan import AgentPlan


class RunnerContext:
    """The ``ctx`` an action receives. Names follow Apache Flink Agents.

    Example::

        @action(InputEvent)
        def start(event, ctx):
            n = ctx.short_term_memory.get("n", 0) + 1
            ctx.short_term_memory.set("n", n)
            ctx.send_event(OutputEvent(output=n))
    """

    __slots__ = ("_children", "_frame", "_inv", "_machine", "_metrics", "_ordinal", "_plan", "_run",
                 "_sensory", "_short_term", "_state", "abandon", "notices", "requests", "sent", "waiting",
                 "wake_any")

    def __init__(
        self, machine: SessionMachine, state: SessionState, run: RunState, inv: Invocation,
        frame: Frame | None = None,
    ) -> None:
        self._machine = machine
        self._state = state
        self._run = run
        self._inv = inv
        # A sub-agent's frame (None: the agent's own run) and the plan its actions run in.
        self._frame = frame
        self._plan: AgentPlan = machine.plan if frame is None else machine.plan.for_scope(frame.scope)
        self._ordinal = 0
        self._children = 0
        self.sent: list[Event] = []
        self.requests: list[DurableCallRequest] = []
        self.notices: list[Event] = []  # emitted with the requests, not when it completes
        self.waiting: list[str] = []
        self.wake_any = False  # resumed when any call it waits for is done, not all
        self.abandon: tuple[str, ...] | list[str] = ()  # calls of a batch another answered first
        # Created on first use: most actions never touch them.
        self._short_term: Memory | None = None
        self._sensory: Memory | None = None
        self._metrics: Metrics | None = None

    @property
    def short_term_memory(self) -> Memory:
        """Per-session memory that persists across runs (JSON values). In a sub-agent: its
        own, over its parent's, which it reads but never changes."""
        if self._short_term is None:
            frame = self._frame
            if frame is None:
                self._short_term = Memory(self._state.memory, "short_term_memory")
            else:
                self._short_term = Memory(frame.memory, "short_term_memory",
                                          self._machine.parent_memory(self._state, self._run, frame))
        return self._short_term

    @property
    def sensory_memory(self) -> Memory:
        """Per-run memory, cleared when the run ends (JSON values); a sub-agent has its own."""
        if self._sensory is None:
            frame = self._frame
            self._sensory = Memory(self._run.sensory if frame is None else frame.sensory, "sensory_memory")
        return self._sensory

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms, reported when the action completes."""
        if self._metrics is None:
            self._metrics = Metrics()
        return self._metrics

    # --- identity and time ------------------------------------------------------------
    @property
    def session_id(self) -> str:
        """The session this run belongs to."""
        return self._state.session_id

    @property
    def run_number(self) -> int:
        """The run number (from 1) within the session."""
        return self._run.number

    @property
    def event_id(self) -> str:
        """event_id of the event that triggered this action."""
        return self._inv.trigger.event_id

    @property
    def scope(self) -> tuple[str, ...]:
        """The sub-agent scope this action runs in (``()``: the agent's own run)."""
        return self._inv.trigger.scope

    @property
    def action_name(self) -> str:
        """Name of the running action."""
        return self._inv.action

    def now(self) -> int:
        """Logical time in ms: the latest input's timestamp, never the wall clock."""
        return self._state.clock

    @property
    def config(self) -> Mapping[str, Any]:
        """The agent's configuration (read-only)."""
        return self._plan.config

    @property
    def action_config(self) -> Mapping[str, Any]:
        """This action's configuration (keyword arguments of ``@action``)."""
        return self._plan.actions[self._inv.action].config

    def next_session_id(self) -> str:
        """A deterministic id for a child session started by this action."""
        self._children += 1
        return f"{scope_path(self._state.session_id, self._inv.trigger.scope)}" \
            f".r{self._run.number}.i{self._inv.number}.s{self._children}"

    # --- events and resources -----------------------------------------------------------
    def send_event(self, event: Event, *, checked: bool = False) -> None:
        """Emit ``event`` when this action completes; it may trigger other actions.

        It is checked now (an action that sends what no record can hold fails, naming the
        field, rather than the runner at write time); ``checked=True`` skips that for an
        event built only from values that were decoded or checked already (a model's
        reply, tool results), as the built-in chat loop does on its hot path."""
        if not checked:
            if not isinstance(event, Event):
                raise TypeError(f"send_event expects an Event, got {type(event).__name__}")
            validate_payload(event)
        self.sent.append(event)

    def get_resource(self, name: str, resource_type: ResourceType | None = None) -> Any:
        """A resource by name. Chat models and tools come back as handles whose calls are
        durable: ``ctx.get_resource("llm", ResourceType.CHAT_MODEL).chat(messages)``."""
        entry = self._plan.resources.get(name)
        if entry is None:
            raise KeyError(f"resource {name!r} is not defined")
        rtype, obj = entry
        if resource_type is not None and rtype is not resource_type:
            raise KeyError(f"resource {name!r} is a {rtype.value}, not a {resource_type.value}")
        if rtype is ResourceType.CHAT_MODEL:
            return ChatModelHandle(self, name, obj)
        if rtype is ResourceType.TOOL:
            return ToolHandle(self, name, obj.idempotent)
        if rtype is ResourceType.AGENT:
            return Subagent(name, obj.description, obj if isinstance(obj, SubagentSetup) else None)
        return obj

    def call_tools_async(self, model: str, tool_calls: list[ToolCall]
                         ) -> Coroutine[Any, Any, list[ToolResult]]:
        """Run the tool calls chat model ``model`` asked for, in parallel, each a durable
        TOOL call; awaitable, in ``async def`` actions. The results come in the order of
        ``tool_calls``, a failure as a result with its error (what the model should see):
        a tool the model's setup does not offer is a ``ToolNotOfferedError``, and a tool
        that ``requires_approval`` runs only once a person approves that call. Example::

            results = await ctx.call_tools_async("llm", reply.tool_calls)
        """
        return call_tools(self, model, tool_calls)

    # --- durable calls ------------------------------------------------------------------
    def durable_execute(
        self,
        func: Callable[..., Any],
        *args: Any,
        reconciler: Callable[..., Any] | None = None,
        idempotent: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``func(*args, **kwargs)`` once, durably, and return its (JSON) result.

        On replay the recorded result is returned (or its error raised) without calling
        ``func`` again. If a crash leaves the outcome unknown, ``reconciler`` decides it
        (called with no arguments, or with the call's arguments if it accepts them); an
        ``idempotent`` call is run again; any other call fails closed with
        :class:`DurableCallUnknownError`.
        """
        spec = CallSpec(
            CallKind.FUNCTION, function_name(func), args, kwargs, func, reconciler, idempotent
        )
        return self._call_now(spec)

    def durable_execute_async(
        self,
        func: Callable[..., Any],
        *args: Any,
        reconciler: Callable[..., Any] | None = None,
        idempotent: bool = False,
        **kwargs: Any,
    ) -> CallAwaitable:
        """Awaitable form of :meth:`durable_execute`, for ``async def`` actions."""
        spec = CallSpec(
            CallKind.FUNCTION, function_name(func), args, kwargs, func, reconciler, idempotent
        )
        return CallAwaitable(self, [spec], batch=False)

    def durable_execute_all_async(self, calls: list[DurableCall | CallAwaitable], *,
                                  max_parallel: int | None = None) -> CallAwaitable:
        """Run several calls in parallel; resolves to a list of :class:`Outcome` in order.
        Besides functions (:class:`DurableCall`), sub-agent calls
        (``subagent.as_async_callable(ctx, prompt)``): their Outcome's value is the Result.
        ``max_parallel``: at most that many in flight, the next issued as one finishes."""
        if max_parallel is not None and (isinstance(max_parallel, bool) or not isinstance(max_parallel, int)
                                         or max_parallel < 1):
            raise ValueError(f"durable_execute_all_async: max_parallel must be a positive integer, "
                             f"got {max_parallel!r}")
        return CallAwaitable(self, self._batch_specs(calls), batch=True, window=max_parallel)

    def durable_execute_first_async(self, calls: list[DurableCall | CallAwaitable]) -> CallAwaitable:
        """Run several calls in parallel and resolve to ``(index, Outcome)`` of the first to
        finish (succeeded or failed); the others are abandoned (their late results ignored,
        a sub-agent's scope cancelled). Example::

            i, first = await ctx.durable_execute_first_async([
                fast.as_async_callable(ctx, q), thorough.as_async_callable(ctx, q)])
        """
        specs = self._batch_specs(calls)
        if not specs:
            raise ValueError("durable_execute_first_async: the first of no calls never comes")
        return CallAwaitable(self, specs, batch=True, first=True)

    @staticmethod
    def _batch_specs(calls: list[DurableCall | CallAwaitable]) -> list[CallSpec]:
        specs = []
        for c in calls:
            if isinstance(c, CallAwaitable):
                specs.extend(c._specs)
                continue
            specs.append(CallSpec(CallKind.FUNCTION, function_name(c.func), c.args, c.kwargs, c.func,
                                  c.reconciler, c.idempotent))
        return specs

    # --- timers and signals ---------------------------------------------------------------
    def sleep(self, duration: float | timedelta) -> None:
        """Wait ``duration`` (seconds, or a timedelta) of logical time, durably.

        A timer is a durable call that the runner answers at its due time: the session's
        clock (its latest event's timestamp) when the call is first made, plus ``duration``.
        Nothing blocks meanwhile (the action is suspended); the timer survives crashes and
        restarts and fires once; a replay does not wait. Example::

            ctx.sleep(timedelta(minutes=5))
            ctx.send_event(OutputEvent(output="five minutes later"))
        """
        self._call_now(timer_spec(due_after=duration_ms(duration, "sleep")))

    def sleep_until(self, due_ms: int) -> None:
        """Wait until logical time ``due_ms`` (ms since the epoch), durably (see :meth:`sleep`)."""
        self._call_now(timer_spec(due_at=int(due_ms)))

    def sleep_async(self, duration: float | timedelta) -> CallAwaitable:
        """Awaitable form of :meth:`sleep`, for ``async def`` actions."""
        return CallAwaitable(self, [timer_spec(due_after=duration_ms(duration, "sleep"))], batch=False)

    def wait_for_signal(self, name: str, timeout: float | timedelta | None = None) -> Any:
        """Wait for a signal ``name`` sent to this session from outside and return its value.

        ``eddies signal SESSION NAME VALUE``, or any producer writing a ``SignalEvent`` to
        ``APP.input``, sends one. A signal sent before anything waits for it is kept, and the
        next wait for its name returns it at once. With ``timeout`` (seconds or a
        timedelta), raises ``TimeoutError`` if none arrives in that much logical time.
        Example::

            try:
                approved = ctx.wait_for_signal(f"approval:{order}", timeout=3600)
            except TimeoutError:
                approved = False
        """
        return self._call_now(signal_wait_spec(name, timeout))

    def halt_async(self, error: ErrorInfo) -> CallAwaitable:
        """Halt this session on ``error`` until someone resumes it; awaitable, returns when
        resumed (see :mod:`eddies.engine.halts`). A failed OutputEvent announces the halt;
        the session's later inputs wait; ``eddies resume SESSION`` resumes it, and the run's
        deadline no longer applies. Example::

            await ctx.halt_async(ErrorInfo("ModelError", "no answer after 3 tries"))
        """
        signal = halts.PREFIX + self._next_call_id()
        spec = signal_wait_spec(signal, None)
        spec.notice = halts.notice(self.session_id, signal, error)
        return CallAwaitable(self, [spec], batch=False)

    def wait_for_signal_async(self, name: str, timeout: float | timedelta | None = None) -> CallAwaitable:
        """Awaitable form of :meth:`wait_for_signal`, for ``async def`` actions."""
        return CallAwaitable(self, [signal_wait_spec(name, timeout)], batch=False)

    # --- internals shared with handles and built-in actions ----------------------------
    def _call_now(self, spec: CallSpec) -> Any:
        rec = self._record(spec)
        if rec is None:
            raise Suspend()
        return self._answer(rec, spec)

    def _answer(self, rec: CallRecord, spec: CallSpec) -> Any:
        """What the action gets of a call that has its outcome: its value (its error
        raised), or what its spec makes of the record (a sub-agent's Result)."""
        if spec.result is not None:
            return spec.result(rec, spec.cid)
        return self._unwrap(rec, spec.cid)

    def _calls_async(self, specs: list[CallSpec]) -> CallAwaitable:
        return CallAwaitable(self, specs, batch=True)

    def _call_async(self, spec: CallSpec) -> CallAwaitable:
        return CallAwaitable(self, [spec], batch=False)

    def _next_call_id(self, ahead: int = 0) -> str:
        """The id the call made ``ahead`` calls from now will have."""
        inv = self._inv
        return call_id(self._state.session_id, inv.trigger.scope, self._run.number, inv.number,
                       self._ordinal + ahead)

    def _record(self, spec: CallSpec) -> CallRecord | None:
        """The call's journal record if it has an outcome; else register it and return None."""
        run = self._run
        cid = spec.cid
        if not cid:
            cid = spec.cid = self._next_call_id()
            self._ordinal += 1
        args = encode_value(
            {"args": spec.args, "kwargs": spec.kwargs}, f"arguments of durable call {spec.target}"
        )
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
            # replay of the action computes them again (see SessionMachine._args).
            rec = CallRecord(str(kind), spec.target, dig, "", "", spec.idempotent, reconciler)
            run.calls[cid] = rec
            if spec.due_at is not None:
                rec.due = spec.due_at
            elif spec.due_after is not None:
                rec.due = self._state.clock + spec.due_after
            if spec.kind is CallKind.SIGNAL and self._take_signal(spec.target, rec):
                return rec
            self.requests.append(DurableCallRequest(
                call_id=cid, kind=spec.kind, target=spec.target, args=args,
                idempotent=spec.idempotent, attempt=1,
                timeout_ms=self._plan.call_timeout(spec.kind, spec.target, spec.kwargs), digest=dig,
                not_before=rec.due))
            if spec.notice is not None:
                self.notices.append(spec.notice)
        self._machine._args[cid] = args
        if spec.fn is not None:
            live = spec.reconciler if spec.reconciler is None or callable(spec.reconciler) else None
            self._machine._callables[cid] = (spec.fn, live)
        self.waiting.append(cid)
        return None

    def _claim(self, spec: CallSpec) -> None:
        """Give ``spec`` the id of the next call, whether or not it is issued now."""
        spec.cid = self._next_call_id()
        self._ordinal += 1

    def _take_signal(self, name: str, rec: CallRecord) -> bool:
        """A signal of ``name`` that arrived before this wait answers it at once."""
        waiting = self._state.signals.get(name)
        if not waiting:
            return False
        rec.status = OK
        rec.value = waiting.pop(0)
        if not waiting:
            del self._state.signals[name]
        return True

    def _unwrap(self, rec: CallRecord, cid: str) -> Any:
        if rec.error is not None:
            raise durable_error(cid, rec.error)
        return decode_value(rec.value)


__all__ = ["ChatModelHandle", "Memory", "Metrics", "RunnerContext", "ToolHandle"]
