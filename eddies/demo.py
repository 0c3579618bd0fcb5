"""The bundled example: a calculator agent on the offline scripted model.

It sends each prompt to the model; the model calls the ``add`` tool once and answers with
its result. Everything is a durable call, so the printed trace is the session's history.
"""

from __future__ import annotations

import json
from typing import Any

from eddies.engine import Agent, ChatModelSetup, ResourceType, action
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    DurableCallRequest,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SignalEvent,
)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Calculator(Agent):
    """Asks the model; answers with the model's final message."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        prompt = event.input if isinstance(event.input, str) else json.dumps(event.input)
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=prompt)]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def calculator_agent(
    model: Any = None, *, tools: bool = True, tool: Any = add, model_name: str = ""
) -> Calculator:
    """The calculator on connection ``model`` (default: the offline scripted model) asking
    for ``model_name``, with the ``add`` tool (``tool`` replaces its function) unless
    ``tools`` is False."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = Calculator("calculator")
    if tools:
        agent.add_resource("add", ResourceType.TOOL, tool)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, model or ScriptedChatModel())
    setup = ChatModelSetup("offline", model=model_name, tools=["add"] if tools else [])
    agent.add_resource("llm", ResourceType.CHAT_MODEL, setup)
    return agent


PROMPTS = [
    ("alice", '{"a": 2, "b": 3}'),
    ("bob", '{"a": 40, "b": 2}'),
    ("alice", '{"a": 7, "b": 8}'),
]


def describe(ev: AgentEvent) -> str:
    """One line of a trace."""
    p = ev.payload
    detail = ""
    if isinstance(p, InputEvent):
        detail = json.dumps(p.input)
    elif isinstance(p, OutputEvent):
        detail = json.dumps(p.output) if p.error is None else f"ERROR {p.error.type}: {p.error.message}"
    elif isinstance(p, DurableCallRequest):
        detail = f"{p.kind.value} {p.target}"
        if p.not_before is not None:
            detail += f" (due {p.not_before})"
    elif isinstance(p, SignalEvent):
        detail = f"{p.name} = {json.dumps(p.value)}"
    elif isinstance(p, ApprovalRequestEvent):
        detail = f"{p.tool}({json.dumps(p.arguments)}) awaits {p.signal}"
    elif isinstance(p, DurableCallResult):
        detail = f"{p.status.value} {p.value[:36]}"
    elif isinstance(p, ChatResponseEvent):
        detail = json.dumps(p.response.content)
    return f"#{ev.seq:<3} run {ev.run}  {ev.type:<19} {ev.action or '':<18} {detail}"


def one_turn_agent() -> Calculator:
    """The calculator without tools: input -> one model call -> output (for benchmarks)."""
    return calculator_agent(tools=False)
