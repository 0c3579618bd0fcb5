"""``RunnerContext``: what an action can do, as Apache Flink Agents names it.

A thin facade over the action's :class:`~eddies.engine.step.Step`, which owns the replay
of its durable calls and buffers what it does until it completes (see
:mod:`eddies.engine.step`): sent events, memory writes and metrics take effect only when
the action completes, so a suspended or replayed execution leaves no trace.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from typing import Any

from eddies.events import (
    CallKind,
    ErrorInfo,
    Event,
    Identity,
    ToolCall,
    ToolResult,
)
from eddies.events.codec import validate_payload
from eddies.events.ids import scope_path

from . import halts
from .calls import (
    CallAwaitable,
    CallSpec,
    duration_ms,
    signal_wait_spec,
    timer_spec,
)
from .durable import DurableCall, function_name
from .embeddings import EmbeddingModelHandle
from .handles import ChatModelHandle, ToolHandle, call_tools
from .long_term_memory import LongTermMemory
from .memory import Memory, Metrics
from .resources import ResourceType
from .step import Step
from .subagents import Subagent, SubagentSetup
from .vector_stores import VectorStoreHandle


class RunnerContext:
    """The ``ctx`` an action receives. Names follow Apache Flink Agents.

    Example::

        @action(InputEvent)
        def start(event, ctx):
            n = ctx.short_term_memory.get("n", 0) + 1
            ctx.short_term_memory.set("n", n)
            ctx.send_event(OutputEvent(output=n))
    """

    __slots__ = ("_step",)

    def __init__(self, step: Step) -> None:
        self._step = step

    @property
    def step(self) -> Step:
        """The engine's record of this action's execution (its durable calls); what
        handles and sub-agent calls go through. Not for actions themselves."""
        return self._step

    @property
    def short_term_memory(self) -> Memory:
        """Per-session memory that persists across runs (JSON values). In a sub-agent: its
        own, over its parent's, which it reads but never changes."""
        return self._step.short_term_memory

    @property
    def sensory_memory(self) -> Memory:
        """Per-run memory, cleared when the run ends (JSON values); a sub-agent has its own."""
        return self._step.sensory_memory

    @property
    def long_term_memory(self) -> LongTermMemory:
        """The agent's memory sets, across sessions, by a key the action chooses:
        ``ctx.long_term_memory.get_memory_set("facts", key=user_id).search("diet")``."""
        return LongTermMemory(self._step)

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms, reported when the action completes."""
        return self._step.metrics

    # --- identity and time ------------------------------------------------------------
    @property
    def session_id(self) -> str:
        """The session this run belongs to."""
        return self._step.state.session_id

    @property
    def run_number(self) -> int:
        """The run number (from 1) within the session."""
        return self._step.run.number

    @property
    def identity(self) -> Identity | None:
        """Who asked for this run: the identity its input's producer signed (``eddies
        serve`` from its token, ``eddies send --user``), None for an anonymous input.
        Example: ``tenant = ctx.identity.tenant if ctx.identity else None``."""
        return self._step.run.identity

    @property
    def event_id(self) -> str:
        """event_id of the event that triggered this action."""
        return self._step.invocation.trigger.event_id

    @property
    def scope(self) -> tuple[str, ...]:
        """The sub-agent scope this action runs in (``()``: the agent's own run)."""
        return self._step.invocation.trigger.scope

    @property
    def action_name(self) -> str:
        """Name of the running action."""
        return self._step.invocation.action

    def now(self) -> int:
        """Logical time in ms, never the wall clock: the timestamp of the input that
        started this run, moved on by each outcome the action reads (after ``ctx.sleep``,
        the timer's due time). What else arrives meanwhile (later inputs, other results)
        does not move it, so it is the same at the same place of every execution: an
        action that puts it in a call's arguments asks the same call when it is executed
        again. Example::

            deadline = ctx.now() + 86_400_000      # a day after the input came
        """
        return self._step.now()

    @property
    def config(self) -> Mapping[str, Any]:
        """The agent's configuration (read-only)."""
        return self._step.plan.config

    @property
    def action_config(self) -> Mapping[str, Any]:
        """This action's configuration (keyword arguments of ``@action``)."""
        step = self._step
        return step.plan.actions[step.invocation.action].config

    def next_session_id(self) -> str:
        """A deterministic id for a child session started by this action."""
        step = self._step
        n = step.next_child()
        inv = step.invocation
        return f"{scope_path(step.state.session_id, inv.trigger.scope)}.r{step.run.number}.i{inv.number}.s{n}"

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
        self._step.sent.append(event)

    def get_resource(self, name: str, resource_type: ResourceType | None = None) -> Any:
        """A resource by name. Chat models, embedding models, vector stores and tools
        come back as handles whose calls are durable:
        ``ctx.get_resource("llm", ResourceType.CHAT_MODEL).chat(messages)``."""
        entry = self._step.plan.resources.get(name)
        if entry is None:
            raise KeyError(f"resource {name!r} is not defined")
        rtype, obj = entry
        if resource_type is not None and rtype is not resource_type:
            raise KeyError(f"resource {name!r} is a {rtype.value}, not a {resource_type.value}")
        if rtype is ResourceType.CHAT_MODEL:
            return ChatModelHandle(self._step, name, obj)
        if rtype is ResourceType.TOOL:
            return ToolHandle(self._step, name, obj.idempotent)
        if rtype is ResourceType.EMBEDDING_MODEL:
            return EmbeddingModelHandle(self._step, name, obj)
        if rtype is ResourceType.VECTOR_STORE:
            return VectorStoreHandle(self._step, name, obj)
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
        return call_tools(self._step, model, tool_calls)

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
        return self._step.call_now(spec)

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
        return CallAwaitable(self._step, [spec], batch=False)

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
        return CallAwaitable(self._step, self._batch_specs(calls), batch=True, window=max_parallel)

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
        return CallAwaitable(self._step, specs, batch=True, first=True)

    @staticmethod
    def _batch_specs(calls: list[DurableCall | CallAwaitable]) -> list[CallSpec]:
        specs = []
        for c in calls:
            if isinstance(c, CallAwaitable):
                specs.extend(c.specs)
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
        self._step.call_now(timer_spec(due_after=duration_ms(duration, "sleep")))

    def sleep_until(self, due_ms: int) -> None:
        """Wait until logical time ``due_ms`` (ms since the epoch), durably (see :meth:`sleep`)."""
        self._step.call_now(timer_spec(due_at=int(due_ms)))

    def sleep_async(self, duration: float | timedelta) -> CallAwaitable:
        """Awaitable form of :meth:`sleep`, for ``async def`` actions."""
        return CallAwaitable(self._step, [timer_spec(due_after=duration_ms(duration, "sleep"))], batch=False)

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
        return self._step.call_now(signal_wait_spec(name, timeout))

    def halt_async(self, error: ErrorInfo) -> CallAwaitable:
        """Halt this session on ``error`` until someone resumes it; awaitable, returns when
        resumed (see :mod:`eddies.engine.halts`). A failed OutputEvent announces the halt;
        the session's later inputs wait; ``eddies resume SESSION`` resumes it, and the run's
        deadline no longer applies. Example::

            await ctx.halt_async(ErrorInfo("ModelError", "no answer after 3 tries"))
        """
        signal = halts.PREFIX + self._step.next_call_id()
        spec = signal_wait_spec(signal, None)
        spec.notice = halts.notice(self.session_id, signal, error)
        return CallAwaitable(self._step, [spec], batch=False)

    def wait_for_signal_async(self, name: str, timeout: float | timedelta | None = None) -> CallAwaitable:
        """Awaitable form of :meth:`wait_for_signal`, for ``async def`` actions."""
        return CallAwaitable(self._step, [signal_wait_spec(name, timeout)], batch=False)


__all__ = ["ChatModelHandle", "Memory", "Metrics", "RunnerContext", "ToolHandle"]
