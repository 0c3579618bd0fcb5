"""Built-in actions that turn chat and tool events into durable calls (as Flink Agents does).

- ``ChatRequestEvent`` -> a CHAT_MODEL call. If the model asks for tools, a
  ``ToolRequestEvent`` follows, else the ``ChatResponseEvent``.
- ``ToolRequestEvent`` -> one TOOL call per tool call, in parallel -> ``ToolResponseEvent``.
- ``ToolResponseEvent`` -> the conversation (kept in sensory memory) goes back to the model.

So a user's action only sends ``ChatRequestEvent`` and handles ``ChatResponseEvent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eddies.events import (
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    MessageRole,
    TokenUsage,
    ToolRequestEvent,
    ToolResponseEvent,
    encode_value,
)

from .agent import ActionSpec
from .memory import Memory
from .prompts import opening_messages
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import RunnerContext

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
    # Sensory memory is taken only by a request that goes round (most take one call).
    sensory: Memory | None = None
    saved_messages = 0  # messages already in sensory memory, one entry each
    if isinstance(event, ChatRequestEvent):
        request_id = ctx.event_id
        model = event.model
        llm = ctx.get_resource(model, ResourceType.CHAT_MODEL)
        prompt = llm.setup.prompt
        # Messages as ChatMessage objects or, restored from sensory memory, as the JSON
        # objects they were saved as: both encode to the same call arguments.
        messages: list[ChatMessage | dict[str, Any]] = list(event.messages)
        if prompt and not any(m.role is MessageRole.SYSTEM for m in event.messages):
            messages[:0] = opening_messages(ctx.step.plan.resources, ctx.config, prompt)
        rounds = 0
        usage = TokenUsage(cost_usd=0.0)
    else:
        request_id = event.request_id
        sensory = ctx.sensory_memory
        saved = sensory.get(_conversation_key(request_id))
        if saved is None:
            return  # a ToolResponseEvent sent by a user action, not for a chat request
        model = saved["model"]
        llm = ctx.get_resource(model, ResourceType.CHAT_MODEL)
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
            messages.append(ChatMessage(MessageRole.TOOL, content, [], r.tool_call_id, blocks=r.blocks))
    reply = await llm.chat_async(messages)
    usage.attempts += llm.attempts
    add_usage(usage, reply.extra_args.get("usage"))
    if reply.tool_calls:
        limit = int(ctx.config["max_tool_rounds"])
        if rounds >= limit:
            raise RuntimeError(
                f"chat model {model!r} asked for tools more than max_tool_rounds={limit} times"
            )
        messages.append(reply)
        if sensory is None:
            sensory = ctx.sensory_memory
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
        # The chat handle checked the reply's types: valid, so not checked again.
        ctx.send_event(ToolRequestEvent(request_id, model, reply.tool_calls), checked=True)
        return
    if sensory is not None and saved_messages:
        for n in range(saved_messages):
            sensory.delete(_message_key(request_id, n))
        sensory.delete(_conversation_key(request_id))
    ctx.send_event(ChatResponseEvent(request_id, reply, usage), checked=True)  # as above


async def tool_call_action(event: ToolRequestEvent, ctx: RunnerContext) -> None:
    """Execute a batch of tool calls in parallel (see ``ctx.call_tools_async``)."""
    results = await ctx.call_tools_async(event.model, event.tool_calls)
    # Ids and names from a checked ToolRequestEvent, values decoded from JSON: valid.
    ctx.send_event(ToolResponseEvent(event.request_id, results), checked=True)


def builtin_actions() -> list[ActionSpec]:
    """The built-in actions every plan gets (unless ``Agent(builtin_actions=False)``)."""
    return [
        ActionSpec(CHAT_ACTION, chat_model_action, (ChatRequestEvent, ToolResponseEvent)),
        ActionSpec(TOOL_ACTION, tool_call_action, (ToolRequestEvent,)),
    ]
