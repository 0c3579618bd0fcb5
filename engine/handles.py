"""Resources seen from an action: chat models and tools as handles whose calls are
durable, and the parallel tool calls of a model's request (with approvals).

``ctx.get_resource("llm", ResourceType.CHAT_MODEL)`` returns a :class:`ChatModelHandle`,
a TOOL a :class:`ToolHandle`; ``ctx.call_tools_async(model, tool_calls)`` runs what a
model asked for. Example::

    reply = await ctx.get_resource("llm", ResourceType.CHAT_MODEL).chat_async(messages)
    results = await ctx.call_tools_async("llm", reply.tool_calls)
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from datetime import timedelta
from typing import Any

from eddies.events import (
    ApprovalRequestEvent,
    CallKind,
    ChatMessage,
    ErrorCategory,
    ErrorInfo,
    ToolCall,
    ToolResult,
)

from . import approval
from .calls import CallAwaitable, CallSite, CallSpec, chat_spec, message_from_value, signal_wait_spec
from .content import split_blocks
from .durable import DurableCallError, Outcome
from .long_term_memory import Flow, memory_tool, run_later
from .remote_tools import AnyTool
from .resources import ChatModelSetup, ResourceType
from .subagents import Result, SubagentSetup, subagent_call
from .tool_args import ToolArgumentError, problem
from .vector_stores import query_spec, result, search_tool_spec


class ChatModelHandle:
    """A CHAT_MODEL resource seen from an action: each ``chat`` is a durable call.

    Example (in an ``async def`` action)::

        llm = ctx.get_resource("llm", ResourceType.CHAT_MODEL)
        reply = await llm.chat_async([ChatMessage(content="hi")])
        reply.tool_calls, llm.attempts   # what it asked for; 2 if it was retried once
    """

    __slots__ = ("_site", "attempts", "name", "setup")

    def __init__(self, site: CallSite, name: str, setup: ChatModelSetup) -> None:
        self._site = site
        self.name = name
        #: The model's setup: connection, model name, the tools it offers, its prompt.
        self.setup = setup
        #: How many attempts this handle's last call took (1 unless it was retried).
        self.attempts = 0

    def chat(self, messages: list[ChatMessage], **arguments: Any) -> ChatMessage:
        """Ask the model; returns its message (usage in ``extra_args["usage"]``). A call
        that fails after its retries asks the setup's ``fallbacks`` in turn; the error of
        the last is raised."""
        spec = chat_spec(self.name, self.setup, messages, arguments)
        try:
            return self._reply(spec, self._site.call_now(spec))
        except DurableCallError as err:
            if not self.setup.fallbacks:
                raise
            last = err
        for name, setup in self._fallbacks():
            spec = chat_spec(name, setup, messages, arguments)
            try:
                return self._reply(spec, self._site.call_now(spec))
            except DurableCallError as err:
                last = err
        raise last

    async def chat_async(self, messages: list[ChatMessage] | list[Any], **arguments: Any) -> ChatMessage:
        """Awaitable form of :meth:`chat`, for ``async def`` actions. ``messages`` may also
        be messages as the JSON objects they are saved as (in memory, say)."""
        spec = chat_spec(self.name, self.setup, messages, arguments)
        try:
            return self._reply(spec, await CallAwaitable(self._site, [spec], batch=False))
        except DurableCallError as err:
            if not self.setup.fallbacks:
                raise
            last = err
        for name, setup in self._fallbacks():
            spec = chat_spec(name, setup, messages, arguments)
            try:
                return self._reply(spec, await CallAwaitable(self._site, [spec], batch=False))
            except DurableCallError as err:
                last = err
        raise last

    def _fallbacks(self) -> list[tuple[str, ChatModelSetup]]:
        """The setup's fallbacks (the plan checked they are CHAT_MODEL resources)."""
        return [(f, self._site.plan.chat_model(f)) for f in self.setup.fallbacks]

    def call_tools_async(self, tool_calls: list[ToolCall]) -> Coroutine[Any, Any, list[ToolResult]]:
        """Run the tool calls this model asked for: ``ctx.call_tools_async(name, ...)``."""
        return call_tools(self._site, self.name, tool_calls)

    def _reply(self, spec: CallSpec, value: Any) -> ChatMessage:
        self.attempts = self._site.calls[spec.cid].attempt
        return message_from_value(value)


class ToolHandle:
    """A TOOL resource seen from an action: each ``call`` is a durable call."""

    __slots__ = ("_idempotent", "_site", "name")

    def __init__(self, site: CallSite, name: str, idempotent: bool) -> None:
        self._site = site
        self.name = name
        self._idempotent = idempotent

    def call(self, **arguments: Any) -> Any:
        """Call the tool with keyword arguments; returns its (JSON) result. Arguments its
        schema does not allow raise :class:`~eddies.engine.tool_args.ToolArgumentError`;
        injected ones are filled in. A tool that ``requires_approval`` first waits for
        it, and raises :class:`~eddies.engine.approval.ToolNotApprovedError` if refused."""
        site = self._site
        plan = site.plan
        tool = plan.tool(self.name)
        arguments = prepared(site, tool, arguments)
        if tool.requires_approval:
            wait = approval_wait(site, self.name, tool, arguments, "")
            value, error = None, None
            try:
                value = site.call_now(wait)
            except Exception as err:  # a deadline passed (Suspend is not an Exception)
                error = err
            refused = approval.refusal(self.name, value, error, approval.timeout_ms(tool, plan.config))
            if refused is not None:
                raise approval.ToolNotApprovedError(f"{refused.type}: {refused.message}")
        spec = CallSpec(CallKind.TOOL, self.name, (), arguments, idempotent=self._idempotent)
        return site.call_now(spec)


def approval_wait(site: CallSite, name: str, tool: AnyTool, arguments: dict[str, Any],
                  tool_call_id: str, ahead: int = 0) -> CallSpec:
    """The wait for a person's approval of one call of ``tool`` (the call ``site`` makes
    ``ahead`` calls from now), announced by an ApprovalRequestEvent."""
    waited = approval.timeout_ms(tool, site.config)
    signal = approval.signal_name(site.next_call_id(ahead))
    spec = signal_wait_spec(signal, timedelta(milliseconds=waited))
    # The deadline is the wait's, set when it is issued (the notice is emitted then only:
    # a replay neither emits it again nor recomputes it).
    spec.notice = ApprovalRequestEvent(signal, name, tool_call_id, arguments, site.now() + waited)
    return spec


async def call_tools(site: CallSite, model: str, calls: list[ToolCall]) -> list[ToolResult]:
    """What ``ctx.call_tools_async`` does: the tools ``calls`` ask for, in parallel, each a
    durable TOOL call; one the model's setup does not offer is a ToolNotOfferedError, and
    one that requires approval waits for it (beside the other calls) and runs once
    approved. The results in the order of ``calls``; errors are results the model sees."""
    plan = site.plan
    results: list[ToolResult | None] = [None] * len(calls)
    waits: list[tuple[int, CallSpec]] = []  # approval waits
    ready: list[tuple[int, CallSpec]] = []  # calls that need none
    memories: list[tuple[int, Flow[Any]]] = []  # uses of memory sets: calls one after another
    offered = plan.offered_tools(model)
    calls = list(calls)  # with injected arguments below: the model's own list stays as sent
    for i, tc in enumerate(calls):
        if tc.name not in offered:
            # A model may ask for anything; it gets only what its setup offers.
            results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                "ToolNotOfferedError", f"no tool {tc.name!r} is offered to model {model!r}"
                f" (it offers: {', '.join(offered) or 'none'})", category=ErrorCategory.PERMANENT))
            continue
        kind, obj = plan.resources[tc.name]
        if kind is ResourceType.AGENT:  # a sub-agent, as a tool
            setup = obj if isinstance(obj, SubagentSetup) else None
            schema = None if setup is None else setup.input_schema
            prompt: Any = tc.arguments.get("prompt") if isinstance(tc.arguments, Mapping) else None
            if schema:
                wrong = (problem(schema, dict(tc.arguments)) if isinstance(tc.arguments, Mapping)
                         else "arguments must be an object")
            else:
                wrong = None if isinstance(prompt, str) else "prompt: expected text"
            if wrong is not None:
                results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                    "ToolArgumentError", f"tool {tc.name!r}: {wrong}", category=ErrorCategory.PERMANENT))
                continue
            asked = dict(tc.arguments) if schema else prompt  # its input: what its schema asks for
            ready.append((i, subagent_call(tc.name, setup, asked, None, None)))
            continue
        if kind is ResourceType.VECTOR_STORE:  # a search, as a tool
            wrong = (problem(search_tool_spec(tc.name, obj).parameters, dict(tc.arguments))
                     if isinstance(tc.arguments, Mapping) else "arguments must be an object")
            if wrong is not None:
                results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                    "ToolArgumentError", f"tool {tc.name!r}: {wrong}", category=ErrorCategory.PERMANENT))
                continue
            ready.append((i, query_spec(tc.name, obj, tc.arguments["query"],
                                        tc.arguments.get("max_results", 5))))
            continue
        if kind is ResourceType.MEMORY_SET:  # remember and recall, as a tool
            try:
                memories.append((i, memory_tool(site, tc.name, obj, tc.arguments)))
            except ToolArgumentError as err:
                results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                    "ToolArgumentError", f"tool {tc.name!r}: {err}", category=ErrorCategory.PERMANENT))
            continue
        tool = plan.tool(tc.name)
        try:
            arguments = prepared(site, tool, tc.arguments)
        except ToolArgumentError as err:  # the model sees why, and may call it again
            results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                "ToolArgumentError", f"tool {tc.name!r}: {err}", category=ErrorCategory.PERMANENT))
            continue
        if arguments is not tc.arguments:
            tc = calls[i] = ToolCall(tc.id, tc.name, arguments)
        if tool.requires_approval:
            # The waits are issued first: each signal names the call id its wait gets.
            waits.append((i, approval_wait(site, tc.name, tool, tc.arguments, tc.id, len(waits))))
        else:
            ready.append((i, _tool_call(tc, tool)))
    approved: list[tuple[int, CallSpec]] = []
    for batch in (waits + ready, approved):  # approved: filled while the first is read
        if not batch:
            continue
        outcomes = await CallAwaitable(site, [spec for _, spec in batch], batch=True)
        for (i, spec), outcome in zip(batch, outcomes, strict=True):
            tc = calls[i]
            if spec.kind is CallKind.VECTOR_STORE and outcome.error is None:
                # The documents, not the usage of the query's embedding.
                results[i] = ToolResult(tc.id, tc.name, result(outcome.value))
                continue
            if spec.kind is not CallKind.SIGNAL:
                results[i] = _tool_result(tc, outcome)
                continue
            tool = plan.tool(tc.name)
            refused = approval.refusal(tc.name, outcome.value, outcome.error,
                                       approval.timeout_ms(tool, plan.config))
            if refused is None:
                approved.append((i, _tool_call(tc, tool)))
            else:
                results[i] = ToolResult(tc.id, tc.name, None, refused)
    for i, flow in memories:  # after the batch, in order: a replay makes the same calls
        tc = calls[i]
        try:
            results[i] = ToolResult(tc.id, tc.name, await run_later(site, flow))
        except DurableCallError as err:
            results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(err.error_type, err.message))
    return results  # type: ignore[return-value]  # every slot was filled above


_MISSING = object()


def prepared(site: CallSite, tool: AnyTool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` checked against the tool's schema, with its injected arguments filled
    in (from the config, short-term memory or who asked, over any the model sent); the same object
    when there is nothing to inject. ToolArgumentError saying what is wrong."""
    inject = tool.inject
    given = {k: v for k, v in arguments.items() if k not in inject} if inject else arguments
    if not isinstance(given, dict):
        raise ToolArgumentError(f"arguments must be an object, got {type(given).__name__}")
    found = problem(tool.spec.parameters, given)
    if found is not None:
        raise ToolArgumentError(found)
    if not inject:
        return given
    out = dict(given)
    for name, source in inject.items():
        kind, _, key = source.partition(":")
        if kind == "call":  # the executor fills it in: the call has no id yet
            continue
        if kind == "identity":  # anonymous: None, for the tool to decide
            who = site.identity
            out[name] = None if who is None else who.user if key == "user" else who.tenant
            continue
        where = site.config if kind == "config" else site.short_term_memory
        value = where.get(key, _MISSING)
        if value is _MISSING:
            raise ToolArgumentError(f"injected argument {name!r}: the {kind} has no {key!r}")
        out[name] = value
    return out


def _tool_call(tc: ToolCall, tool: AnyTool) -> CallSpec:
    return CallSpec(CallKind.TOOL, tc.name, (), tc.arguments, idempotent=tool.idempotent)


def _tool_result(tc: ToolCall, outcome: Outcome) -> ToolResult:
    err = outcome.error
    if isinstance(outcome.value, Result):  # a sub-agent's answer: its result, or its error
        if outcome.value.success:
            return ToolResult(tc.id, tc.name, outcome.value.result)
        err = outcome.value.exception
    if err is None:
        result, blocks = split_blocks(outcome.value)
        return ToolResult(tc.id, tc.name, result, None, blocks)
    if isinstance(err, DurableCallError):
        return ToolResult(tc.id, tc.name, None, ErrorInfo(err.error_type, err.message))
    return ToolResult(tc.id, tc.name, None, ErrorInfo.of(err))


__all__ = ["ChatModelHandle", "ToolHandle", "approval_wait", "call_tools", "prepared"]
