"""The built-in tool loop offers a model only its setup's tools."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, action
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import Calculator
from eddies.engine import ChatModelSetup, ResourceType
from eddies.events import ChatMessage, MessageRole, ToolCall

CALLED: list[str] = []
A = TypeVar("A", bound=Agent)


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


def _greedy_with_tools(agent: A) -> A:
    """``agent`` on the greedy model, offered only ``add`` of its tools add and wipe."""
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("wipe", ResourceType.TOOL, wipe)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(greedy))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    CALLED.clear()
    return agent


def test_a_model_gets_only_the_tools_its_setup_offers() -> None:
    agent = _greedy_with_tools(Calculator("tools"))
    [answer] = LocalRunner(agent).run([("s1", "go")])
    assert CALLED == ["add"]
    assert answer == ("3 | error: ToolNotOfferedError: no tool 'wipe' is offered to model 'llm' "
                      "(it offers: add) | error: ToolNotOfferedError: no tool 'nope' is offered "
                      "to model 'llm' (it offers: add)")


class OwnLoop(Agent):
    """A tool loop of a user's own, on the public API only: ask, run the tools, repeat."""

    @action(InputEvent)
    async def loop(event: InputEvent, ctx: Any) -> None:
        llm = ctx.get_resource("llm", ResourceType.CHAT_MODEL)
        messages = [ChatMessage(content=event.input)]
        attempts = 0
        for _ in range(3):
            reply = await llm.chat_async(messages)
            attempts += llm.attempts
            if not reply.tool_calls:
                ctx.send_event(OutputEvent(output={"answer": reply.content, "attempts": attempts}))
                return
            messages.append(reply)
            for r in await ctx.call_tools_async("llm", reply.tool_calls):
                content = json.dumps(r.result) if r.error is None else f"error: {r.error.type}"
                messages.append(ChatMessage(MessageRole.TOOL, content, [], r.tool_call_id))
        ctx.send_event(OutputEvent(output="gave up"))


def test_a_loop_of_ones_own_on_the_public_api() -> None:
    agent = _greedy_with_tools(OwnLoop("own"))
    runner = LocalRunner(agent)
    [out] = runner.run([("s1", "go")])
    assert CALLED == ["add"]
    assert out == {"answer": "3 | error: ToolNotOfferedError | error: ToolNotOfferedError", "attempts": 2}
    history = [(n, e) for n, e in enumerate(runner.history)]
    assert replay(runner.plan, history, "s1").ok  # the same calls again, none performed
