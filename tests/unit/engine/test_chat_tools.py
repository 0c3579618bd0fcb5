"""The built-in tool loop offers a model only its setup's tools."""

from __future__ import annotations

from typing import Any

from eddies import LocalRunner
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import Calculator
from eddies.engine import ChatModelSetup, ResourceType
from eddies.events import ChatMessage, MessageRole, ToolCall

CALLED: list[str] = []


def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLED.append("add")
    return a + b


def wipe() -> str:
    """A tool of the agent that this model is not offered."""
    CALLED.append("wipe")
    return "wiped"


def greedy(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """Asks for the offered tool, an unoffered one and one that does not exist."""
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if results:
        return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))
    return ChatMessage(MessageRole.ASSISTANT, "", [
        ToolCall("1", "add", {"a": 1, "b": 2}), ToolCall("2", "wipe", {}), ToolCall("3", "nope", {})])


def test_a_model_gets_only_the_tools_its_setup_offers() -> None:
    agent = Calculator("tools")
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("wipe", ResourceType.TOOL, wipe)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(greedy))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    CALLED.clear()
    [answer] = LocalRunner(agent).run([("s1", "go")])
    assert CALLED == ["add"]
    assert answer == ("3 | error: ToolNotOfferedError: no tool 'wipe' is offered to model 'llm' "
                      "(it offers: add) | error: ToolNotOfferedError: no tool 'nope' is offered "
                      "to model 'llm' (it offers: add)")
