"""Built-in actions that turn chat and tool events into durable calls (as Flink Agents does).

- ``ChatRequestEvent`` -> a CHAT_MODEL call. If the model asks for tools, a
  ``ToolRequestEvent`` follows, else the ``ChatResponseEvent``.
- ``ToolRequestEvent`` -> one TOOL call per tool call, in parallel -> ``ToolResponseEvent``.
- ``ToolResponseEvent`` -> the conversation (kept in sensory memory) goes back to the model.

So a user's action only sends ``ChatRequestEvent`` and handles ``ChatResponseEvent``.
"""

from __future__ import annotations

from typing import Any

from eddies.events import (
    CallKind,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    ErrorCategory,
    ErrorInfo,
    MessageRole,
    TokenUsage,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    encode_value,
)

from . import approval
from .agent import ActionSpec
from .context import RunnerContext, _CallSpec, message_from_value
from .durable import DurableCallError, Outcome
from .resources import FunctionTool, ResourceType

CHAT_ACTION = "eddies.chat_model"
TOOL_ACTION = "eddies.tool_call"
_CONTEXT_KEY = "eddies.chat/"


def _conversation_key(request_id: str) -> str:
    return _CONTEXT_KEY + request_id


def add_usage(usage: TokenUsage, used: Any) -> None:
    """Add one model reply's ``extra_args["usage"]`` (tokens, ``cost_usd``,
    ``latency_ms``, as its connection reported them) to ``usage``. A cost stays unknown
    (None) once any call's cost was unknown: a partial sum would understate it. A request
    starts at ``TokenUsage(cost_usd=0.0)``."""
    if not isinstance(used, dict):
        return
    usage.prompt_tokens += int(used.get("prompt_tokens", 0) or 0)
    usage.completion_tokens += int(used.get("completion_tokens", 0) or 0)
    usage.latency_ms += int(used.get("latency_ms", 0) or 0)
    cost = used.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and usage.cost_usd is not None:
        usage.cost_usd += float(cost)
    else:
        usage.cost_usd = None


def _message_key(request_id: str, n: int) -> str:
    # One entry per message, so a round writes only its new messages: a runner that
    # stores sensory memory per entry (Flink keyed state) then writes a conversation
    # once, not once per round.
    return f"{_CONTEXT_KEY}{request_id}/{n}"


async def chat_model_action(
    event: ChatRequestEvent | ToolResponseEvent, ctx: RunnerContext
) -> None:
    """Call the chat model for a request, or again with the results of its tool calls."""
    plan = ctx._machine.plan
    sensory = ctx.sensory_memory
    saved_messages = 0  # messages already in sensory memory, one entry each
    if isinstance(event, ChatRequestEvent):
        request_id = ctx.event_id
        model = event.model
        setup = plan.chat_model(model)
        # Messages as ChatMessage objects or, restored from sensory memory, as the JSON
        # objects they were saved as: both encode to the same call arguments.
        messages: list[ChatMessage | dict[str, Any]] = list(event.messages)
        if setup.prompt and not any(m.role is MessageRole.SYSTEM for m in event.messages):
            messages.insert(0, ChatMessage(MessageRole.SYSTEM, setup.prompt))
        rounds = 0
        usage = TokenUsage(cost_usd=0.0)
    else:
        request_id = event.request_id
        saved = sensory.get(_conversation_key(request_id))
        if saved is None:
            return  # a ToolResponseEvent sent by a user action, not for a chat request
        model = saved["model"]
        setup = plan.chat_model(model)
        saved_messages = saved["messages"]
        messages = [sensory.get(_message_key(request_id, n)) for n in range(saved_messages)]
        rounds = saved["rounds"]
        usage = TokenUsage(*saved["usage"])
        for r in event.responses:
            content = (
                encode_value(r.result)
                if r.error is None
                else f"error: {r.error.type}: {r.error.message}"
            )
            messages.append(ChatMessage(MessageRole.TOOL, content, [], r.tool_call_id))
    spec = _CallSpec(CallKind.CHAT_MODEL, model, (), {"messages": messages},
                     idempotent=setup.idempotent)
    reply = message_from_value(await ctx._call_async(spec))
    usage.attempts += ctx._run.calls[spec.cid].attempt
    add_usage(usage, reply.extra_args.get("usage"))
    if reply.tool_calls:
        limit = int(ctx.config["max_tool_rounds"])
        if rounds >= limit:
            raise RuntimeError(
                f"chat model {model!r} asked for tools more than max_tool_rounds={limit} times"
            )
        messages.append(reply)
        for n in range(saved_messages, len(messages)):
            sensory.set(_message_key(request_id, n), messages[n])
        sensory.set(
            _conversation_key(request_id),
            {
                "model": model,
                "messages": len(messages),
                "rounds": rounds + 1,
                "usage": [usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                          usage.latency_ms, usage.attempts],
            },
        )
        # message_from_value checked the reply's types: valid, so not validated again.
        ctx.sent.append(ToolRequestEvent(request_id, model, reply.tool_calls))
        return
    if saved_messages:
        for n in range(saved_messages):
            sensory.delete(_message_key(request_id, n))
        sensory.delete(_conversation_key(request_id))
    ctx.sent.append(ChatResponseEvent(request_id, reply, usage))  # checked, as above


async def tool_call_action(event: ToolRequestEvent, ctx: RunnerContext) -> None:
    """Execute a batch of tool calls in parallel, each a durable TOOL call. A call of a tool
    that requires approval waits for it (beside the other calls) and runs once approved."""
    plan = ctx._machine.plan
    calls = event.tool_calls
    results: list[ToolResult | None] = [None] * len(calls)
    waits: list[tuple[int, _CallSpec]] = []  # approval waits
    ready: list[tuple[int, _CallSpec]] = []  # calls that need none
    offered = _offered(plan.resources.get(event.model))
    for i, tc in enumerate(calls):
        if tc.name not in offered:
            # A model may ask for anything; it gets only what its setup offers.
            results[i] = ToolResult(tc.id, tc.name, None, ErrorInfo(
                "ToolNotOfferedError", f"no tool {tc.name!r} is offered to model {event.model!r}"
                f" (it offers: {', '.join(offered) or 'none'})", category=ErrorCategory.PERMANENT))
            continue
        tool = plan.tool(tc.name)
        if tool.requires_approval:
            # The waits are issued first: each signal names the call id its wait gets.
            waits.append((i, ctx._approval_wait(tc.name, tool, tc.arguments, tc.id, len(waits))))
        else:
            ready.append((i, _tool_call(tc, tool)))
    approved: list[tuple[int, _CallSpec]] = []
    for batch in (waits + ready, approved):  # approved: filled while the first is read
        if not batch:
            continue
        outcomes = await ctx._calls_async([spec for _, spec in batch])
        for (i, spec), outcome in zip(batch, outcomes, strict=True):
            tc = calls[i]
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
    # Ids and names from a checked ToolRequestEvent, values decoded from JSON: valid.
    ctx.sent.append(ToolResponseEvent(event.request_id, results))  # type: ignore[arg-type]


def _offered(model: tuple[ResourceType, Any] | None) -> tuple[str, ...]:
    """The tools a chat model's setup offers (none for a name that is no chat model)."""
    if model is None or model[0] is not ResourceType.CHAT_MODEL:
        return ()
    return tuple(model[1].tools)


def _tool_call(tc: ToolCall, tool: FunctionTool) -> _CallSpec:
    return _CallSpec(CallKind.TOOL, tc.name, (), tc.arguments, idempotent=tool.idempotent)


def _tool_result(tc: ToolCall, outcome: Outcome) -> ToolResult:
    err = outcome.error
    if err is None:
        return ToolResult(tc.id, tc.name, outcome.value)
    if isinstance(err, DurableCallError):
        return ToolResult(tc.id, tc.name, None, ErrorInfo(err.error_type, err.message))
    return ToolResult(tc.id, tc.name, None, ErrorInfo.of(err))


def builtin_actions() -> list[ActionSpec]:
    """The built-in actions every plan gets (unless ``Agent(builtin_actions=False)``)."""
    return [
        ActionSpec(CHAT_ACTION, chat_model_action, (ChatRequestEvent, ToolResponseEvent)),
        ActionSpec(TOOL_ACTION, tool_call_action, (ToolRequestEvent,)),
    ]
