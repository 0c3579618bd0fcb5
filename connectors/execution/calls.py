"""Performing durable-call requests: dispatch by kind, and the result event.

Shared by every executor (in-process, Kafka). Example::

    performer = CallPerformer(plan, machine.callable_for)
    value = performer.perform(request_payload)
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from eddies.connectors.execution.call_hooks import hooked_value, hooks_on_results
from eddies.connectors.execution.store_calls import (
    embed,
    embed_async,
    embedding_connection,
    embeds,
    vector_store_call,
    vector_store_call_async,
)
from eddies.connectors.execution.token_budget import fit
from eddies.connectors.models.provider_limits import ProviderLimits, limits_of
from eddies.connectors.remote import secrets
from eddies.engine import AgentPlan
from eddies.engine.calls import message_from_value
from eddies.engine.embeddings import embedding_value
from eddies.engine.hooks import Hook, HookCounts, Refusal
from eddies.engine.remote_tools import RemoteTool
from eddies.engine.resources import ResourceType
from eddies.engine.subagents import RECONCILER, SubagentSetup
from eddies.engine.tokens import BUDGET_ARG, REPORT_KEY
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    ChatMessage,
    DecodeError,
    DurableCallRequest,
    DurableCallResult,
    EncodingError,
    ErrorInfo,
    MessageRole,
    decode_value,
    encode,
    encode_value,
)
from eddies.events.ids import call_digest, result_event_id

if TYPE_CHECKING:
    from eddies.connectors.streaming.call_stream import CallStream

Resolver = Callable[[DurableCallRequest], Callable[..., Any] | None]


class Deltas(Protocol):
    """Where a streaming model connection writes its answer as it comes (a CallStream)."""

    def text(self, delta: str) -> None:
        """Part of the answer's text."""

    def tool_call(self, index: int, id: str | None = None, name: str | None = None,
                  arguments: str = "") -> None:
        """A fragment of tool call ``index``."""


def import_target(target: str) -> Callable[..., Any]:
    """The function named ``module:qualname``; a LookupError says why it cannot be found."""
    module_name, _, qualname = target.partition(":")
    if "<" in qualname:
        raise LookupError(
            f"durable function {target} is a lambda or local function and is not registered in "
            "this process; use a module-level function for calls run by separate executors"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise LookupError(f"durable function {target} cannot be imported: {err}") from None
    if not callable(obj):
        raise LookupError(f"durable function {target} is not callable")
    fn: Callable[..., Any] = obj
    return fn


def result_event(
    request: AgentEvent, status: CallStatus, value: str = "null", error: ErrorInfo | None = None
) -> AgentEvent:
    """The result event answering ``request`` (same id from every executor that answers)."""
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    # A reconciler answers for a call whose digest the machine already checked.
    reconcile = req.kind is CallKind.RECONCILE
    dig = "" if reconcile else (req.digest or call_digest(req.kind, req.target, req.args))
    if secrets.known():  # a result or an error that quotes a key is written without it
        value = secrets.redact(value)
        if error is not None:
            error = dataclasses.replace(error, message=secrets.redact(error.message))
    payload = DurableCallResult(req.call_id, req.kind, status, value, error, req.attempt, dig)
    # A timer's answer is at its due time: the session's clock moves there with it.
    stamp = max(request.timestamp, req.not_before or 0)
    return AgentEvent(
        result_event_id(req.call_id, req.attempt), request.session_id, 0, 0, request.scope,
        DurableCallResult.event_type, None, None, "", "", stamp, payload,
    )


def writable_result(request: AgentEvent, result: AgentEvent, limit: int) -> tuple[AgentEvent, bytes]:
    """``result`` (answering ``request``) and its bytes, or an error in its place when it
    cannot be written (an error message with unpaired surrogates) or is over ``limit``
    bytes (``max_record_bytes``: it could not enter the session machine)."""
    req = request.payload
    assert isinstance(req, DurableCallRequest)
    try:
        data = encode(result)
    except EncodingError as err:
        result = result_event(request, CallStatus.ERROR, "null", ErrorInfo(
            "ResultEncodingError", ascii(f"the outcome of {req.target} cannot be written: {err}")[:2000]))
        data = encode(result)
    if len(data) > limit:
        result = result_event(request, CallStatus.ERROR, "null", ErrorInfo(
            "ResultTooLargeError",
            f"the result of {req.kind.value} {req.target} is {len(data)} bytes as a record, "
            f"over max_record_bytes={limit}"))
        data = encode(result)
    return result, data


#: The key of a model reply's ``extra_args`` naming the model its setup asked for.
MODEL_KEY = "model"


class CallPerformer:
    """Turns a request into a call of a function, reconciler, chat model or tool."""

    def __init__(self, plan: AgentPlan, resolver: Resolver | None = None,
                 counted: Callable[[dict[str, float]], None] | None = None) -> None:
        self.plan = plan
        self.resolver: Resolver = resolver or (lambda _req: None)
        #: Where what result hooks count goes (``"HOOK.NAME" -> n``; None: nowhere).
        self.counted = counted
        self._loop: asyncio.AbstractEventLoop | None = None
        # The hooks on the results of the calls of each scope, found once.
        self._result_hooks: dict[tuple[str, ...], tuple[Hook, ...]] = {}

    def outcome(self, request: AgentEvent, returned: Any) -> AgentEvent:
        """The result event of ``request``'s call, which returned ``returned``: its value as
        the plan's hooks let it be journaled, or their refusal (see call_hooks.py); given a
        :class:`Refusal` (a hook did not admit the call, which was not made), that refusal."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        if self.plan.any_hooks and type(returned) is Refusal:  # not made: see CallAdmission
            return result_event(request, CallStatus.ERROR, "null", returned.error())
        value = encode_value(returned, "result of", req.target)
        if self.plan.any_hooks:
            hooks = self._hooks_on_results(request.scope)
            if hooks:
                counts = HookCounts()
                decided = hooked_value(hooks, request, value, counts)
                if counts.counts and self.counted is not None:
                    self.counted(counts.counts)
                if isinstance(decided, Refusal):
                    return result_event(request, CallStatus.ERROR, "null", decided.error())
                value = decided
        return result_event(request, CallStatus.OK, value)

    def streams(self, req: DurableCallRequest, scope: tuple[str, ...]) -> bool:
        """Whether a model call may stream its answer as it comes: not when hooks look at
        its result (the stream would show what they may change)."""
        return not self.plan.any_hooks or not self._hooks_on_results(scope)

    def _hooks_on_results(self, scope: tuple[str, ...]) -> tuple[Hook, ...]:
        hooks = self._result_hooks.get(scope)
        if hooks is None:
            hooks = self._result_hooks[scope] = hooks_on_results(self.plan, scope)
        return hooks

    def perform(self, req: DurableCallRequest, scope: tuple[str, ...] = (),
                stream: Deltas | None = None) -> Any:
        """Perform the call (made in sub-agent ``scope``: its request's) and return its
        value (exceptions propagate). ``stream``: where a model whose setup streams writes
        its answer as it comes (see :class:`ChatModelSetup`)."""
        if stream is not None and not self.streams(req, scope):
            stream = None
        call = decode_value(req.args, "arguments of", req.call_id)
        args, kwargs = call.get("args", []), call.get("kwargs", {})
        kind = req.kind
        plan = self.plan.for_scope(scope) if scope else self.plan  # a sub-agent's resources
        if kind is CallKind.FUNCTION:
            return self.call(self.resolver(req) or import_target(req.target), args, kwargs)
        if kind is CallKind.RECONCILE and req.target.startswith(RECONCILER):
            setup = plan.resource(req.target[len(RECONCILER):], ResourceType.AGENT)
            return setup.reconcile(kwargs.get("prompt"), session_id=kwargs.get("session_id"),
                                   call_id=req.call_id, timeout_s=setup.timeout_of(kwargs),
                                   **_who(setup, req))
        if kind is CallKind.SUBAGENT:  # an external one (an internal one is the machine's)
            setup = plan.resource(req.target, ResourceType.AGENT)
            if not isinstance(setup, SubagentSetup):
                raise TypeError(f"sub-agent {req.target!r} is an internal agent: its calls are not an "
                                "executor's to perform")
            return setup.perform(kwargs.get("prompt"), session_id=kwargs.get("session_id"),
                                 call_id=req.call_id, timeout_s=setup.timeout_of(kwargs), **_who(setup, req))
        if kind is CallKind.RECONCILE:
            fn = self.resolver(req) or import_target(req.target)
            if _takes_no_arguments(fn):
                return self.call(fn, [], {})
            return self.call(fn, args, kwargs)
        if kind is CallKind.CHAT_MODEL:
            asked = _ModelCall(plan, req.target, kwargs, stream)
            if asked.answer is not None:
                return asked.answer
            return asked.finish(self.call(asked.conn.chat, [asked.messages], asked.arguments))
        if kind is CallKind.TOOL:
            tool = plan.tool(req.target)
            if isinstance(tool, RemoteTool):
                if tool.protocol == "a2a":
                    from eddies.connectors.remote.a2a import call_tool as call_agent

                    return call_agent(plan, tool, kwargs, req.call_id, req.identity)
                from eddies.connectors.remote.mcp import call_tool

                return call_tool(plan, tool, kwargs, req.call_id)
            if args:  # a positional call: as asked, without conversions
                return self.call(tool.fn, args, kwargs)
            for param, source in tool.inject.items():
                if source == "call:id":
                    kwargs[param] = req.call_id
            return self.call(tool.call, [kwargs], {})
        if kind is CallKind.EMBEDDING:
            return embedding_value(*embed(plan, req.target, kwargs["texts"]))
        if kind is CallKind.VECTOR_STORE:
            return vector_store_call(plan, req, kwargs)
        if kind is CallKind.TIMER:  # performed at its due time: nothing else to do
            return None
        if kind is CallKind.SIGNAL:  # reached its deadline: a signal would have answered it
            raise TimeoutError(f"no signal {req.target!r} within {kwargs.get('timeout_ms')} ms")
        raise NotImplementedError(f"{kind.value} calls are not supported by this executor")

    def asynchronous(self, req: DurableCallRequest, scope: tuple[str, ...] = (),
                     stream: Deltas | None = None) -> LoopCall | None:
        """The call as a coroutine performing it as :meth:`perform` does, when its client
        is asynchronous, for an executor's event loop: a model connection with
        ``chat_async``, an embedding connection with ``embed_async``, an MCP or A2A
        tool, an external sub-agent with ``perform_async`` (``reconcile_async`` for its
        reconciliation), a vector store whose embedding connection has ``embed_async``.
        A provider's seconds then hold no thread. None: :meth:`perform` it on a thread."""
        if req.kind not in _MAYBE_ASYNC:
            return None
        if stream is not None and not self.streams(req, scope):
            stream = None
        try:
            return self._on_loop(req, scope, stream)
        except (KeyError, DecodeError):  # no such resource, arguments that do not decode: the
            return None  # call fails on a thread, as a call does

    def _on_loop(self, req: DurableCallRequest, scope: tuple[str, ...],
                 stream: Deltas | None) -> LoopCall | None:
        kind = req.kind
        plan = self.plan.for_scope(scope) if scope else self.plan
        if kind is CallKind.CHAT_MODEL:
            setup = plan.chat_model(req.target)
            conn = plan.resource(setup.connection)
            if not callable(getattr(conn, "chat_async", None)):
                return None
            return LoopCall(setup.connection, self._chat_async(plan, req, stream), limits_of(conn))
        if kind is CallKind.EMBEDDING:
            embedding, conn = embedding_connection(plan, req.target)
            if not callable(getattr(conn, "embed_async", None)):
                return None
            return LoopCall(embedding.connection, self._embed_async(plan, req), limits_of(conn))
        if kind is CallKind.VECTOR_STORE:
            store = plan.resource(req.target, ResourceType.VECTOR_STORE)
            embedding, conn = embedding_connection(plan, store.embedding_model)
            if not callable(getattr(conn, "embed_async", None)):
                return None
            args = decode_value(req.args, "arguments of", req.call_id)
            kwargs = args.get("kwargs", {}) if isinstance(args, dict) else None
            if not isinstance(kwargs, dict):
                return None
            call = vector_store_call_async(plan, req, kwargs)
            if embeds(kwargs):  # held by its embedding provider's limits, as an embedding is
                return LoopCall(embedding.connection, call, limits_of(conn))
            return LoopCall(req.target, call)
        if kind is CallKind.TOOL:
            tool = plan.tool(req.target)
            if not isinstance(tool, RemoteTool):
                return None
            return LoopCall(tool.server, self._remote_tool_async(plan, tool, req))
        reconciling = kind is CallKind.RECONCILE
        if reconciling and not req.target.startswith(RECONCILER):
            return None  # a user's reconcile function: a thread's
        name = req.target[len(RECONCILER):] if reconciling else req.target
        agent = plan.resource(name, ResourceType.AGENT)
        method = "reconcile_async" if reconciling else "perform_async"
        if not isinstance(agent, SubagentSetup) or not callable(getattr(agent, method, None)):
            return None
        return LoopCall(name, self._subagent_async(getattr(agent, method), agent, req))

    async def _remote_tool_async(self, plan: AgentPlan, tool: RemoteTool, req: DurableCallRequest) -> Any:
        kwargs = decode_value(req.args, "arguments of", req.call_id).get("kwargs", {})
        if tool.protocol == "a2a":
            from eddies.connectors.remote.a2a import call_tool_async as call_agent

            return await call_agent(plan, tool, kwargs, req.call_id, req.identity)
        from eddies.connectors.remote.mcp import call_tool_async

        return await call_tool_async(plan, tool, kwargs, req.call_id)

    async def _subagent_async(self, perform: Callable[..., Awaitable[Any]], setup: SubagentSetup,
                              req: DurableCallRequest) -> Any:
        kwargs = decode_value(req.args, "arguments of", req.call_id).get("kwargs", {})
        return await perform(kwargs.get("prompt"), session_id=kwargs.get("session_id"),
                             call_id=req.call_id, timeout_s=setup.timeout_of(kwargs), **_who(setup, req))

    async def _embed_async(self, plan: AgentPlan, req: DurableCallRequest) -> Any:
        kwargs = decode_value(req.args, "arguments of", req.call_id).get("kwargs", {})
        return embedding_value(*await embed_async(plan, req.target, kwargs["texts"]))

    async def _chat_async(self, plan: AgentPlan, req: DurableCallRequest, stream: Deltas | None) -> Any:
        kwargs = decode_value(req.args, "arguments of", req.call_id).get("kwargs", {})
        asked = _ModelCall(plan, req.target, kwargs, stream)
        if asked.answer is not None:
            return asked.answer
        return asked.finish(await asked.conn.chat_async(asked.messages, **asked.arguments))

    def call(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call ``fn``; an awaitable result is run to completion on this performer's loop."""
        result = fn(*args, **kwargs)
        # Cheaper than inspect.isawaitable (an ABC check) on every plain result.
        if hasattr(result, "__await__"):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        return result

    def close(self) -> None:
        """Close the private event loop, if one was started."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None


#: The kinds of call whose client may be asynchronous (see CallPerformer.asynchronous).
_MAYBE_ASYNC = frozenset({CallKind.CHAT_MODEL, CallKind.EMBEDDING, CallKind.TOOL, CallKind.SUBAGENT,
                          CallKind.RECONCILE, CallKind.VECTOR_STORE})


class LoopCall(NamedTuple):
    """A call for an event loop: the provider it goes to (its connection's resource name:
    what a provider's limits and Retry-After hold back), the coroutine that makes it, and
    the provider's limits (its connection's, if it declares some)."""

    provider: str
    call: Coroutine[Any, Any, Any]
    limits: ProviderLimits | None = None
    #: Where the executor says the call started and ended, when the app streams.
    stream: CallStream | None = None


class _ModelCall:
    """A model call as its connection takes it: the setup's model, tools and arguments, the
    messages fitted to a token budget (``answer``: the reply without a call, when they are
    over it), and :meth:`finish`, which notes on the reply what the journal keeps of it."""

    def __init__(self, plan: AgentPlan, target: str, kwargs: dict[str, Any],
                 stream: Deltas | None = None) -> None:
        setup = self.setup = plan.chat_model(target)
        self.conn: Any = plan.resource(setup.connection)
        self.messages = [message_from_value(m) for m in kwargs.pop("messages")]
        tools = plan.tool_specs(target)
        budget = kwargs.pop(BUDGET_ARG, None)
        offered = kwargs.get("tools", tools)  # a summary call is offered none
        self.fitted = None if budget is None else fit(self.conn, self.messages, setup.model, offered, budget)
        self.answer: ChatMessage | None = None
        if self.fitted is not None and not self.fitted.send:  # over the budget: the loop
            # summarises, then asks again
            self.answer = ChatMessage(MessageRole.ASSISTANT, "", [], None, {REPORT_KEY: self.fitted.report})
        elif self.fitted is not None:
            self.messages = self.fitted.messages
        self.arguments: dict[str, Any] = {"model": setup.model, "tools": tools, **setup.arguments, **kwargs}
        if stream is not None and setup.stream and getattr(self.conn, "streams", False):
            self.arguments["deltas"] = stream

    def finish(self, reply: Any) -> Any:
        extras = (reply.extra_args if isinstance(reply, ChatMessage)
                  else reply.setdefault("extra_args", {}) if isinstance(reply, dict) else None)
        if extras is not None:
            if self.fitted is not None:  # what was counted and cut, for the loop and the journal
                extras[REPORT_KEY] = self.fitted.report
            if self.setup.model:  # which model answered: a re-run on another is another call
                extras.setdefault(MODEL_KEY, self.setup.model)
        return reply


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        return not inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _who(setup: SubagentSetup, req: DurableCallRequest) -> dict[str, Any]:
    """Who asked, for a sub-agent setup that takes it (see ``SubagentSetup.takes_identity``)."""
    return {"identity": req.identity} if setup.takes_identity else {}

