"""Agents shared by tests (module-level, so durable functions are importable by name)."""

from __future__ import annotations

from typing import Any

from eddies import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
)
from eddies.connectors.models.scripted import ScriptedChatModel


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


class Chat(Agent):
    """Sends the input to the model ``llm``; outputs the model's final answer."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=event.input)]))

    @action(ChatResponseEvent)
    def done(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def calculator(model: ScriptedChatModel | None = None, tool: Any = add) -> Chat:
    agent = Chat()
    agent.add_resource("add", ResourceType.TOOL, tool)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model or ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["add"]))
    return agent
