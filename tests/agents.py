"""Agents shared by tests (module-level, so durable functions are importable by name)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import Calculator, add, calculator_agent


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


Chat = Calculator


def calculator(model: ScriptedChatModel | None = None, tool: Any = add) -> Calculator:
    """The demo's calculator agent, optionally on another model or tool function."""
    return calculator_agent(model, tool=tool)


#: Opened by a test to let Gated's call return (the call waits for it).
GATE = threading.Event()
#: How often wait_for_gate ran, per value (a non-idempotent side effect, counted).
GATED_CALLS: Counter[Any] = Counter()


def wait_for_gate(value: Any) -> Any:
    """A durable call that returns ``value`` once GATE is set (at most 60 s)."""
    GATED_CALLS[value] += 1
    GATE.wait(60)
    return value


class Gated(Agent):
    """input -> one durable call that waits for GATE -> output (a run held in its middle)."""

    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(wait_for_gate, event.input)))


def lookup(topic: str, round: int) -> str:
    """A tool whose result is about 1 KB of text (a search result, say)."""
    return f"result {round} for {topic}: " + "x" * 1000


def react_rounds(messages: list[Any], tools: list[Any]) -> Any:
    """A model that calls ``lookup`` once per round, ``ROUNDS`` rounds, then answers with
    how many tool results it saw."""
    from eddies.events import ChatMessage, MessageRole, ToolCall

    seen = sum(1 for m in messages if m.role is MessageRole.TOOL)
    if seen < ROUNDS:
        return ChatMessage(MessageRole.ASSISTANT, "",
                           [ToolCall(f"call-{seen}", "lookup", {"topic": "kafka", "round": seen})])
    return ChatMessage(MessageRole.ASSISTANT, f"done after {seen} tool results")


#: Tool rounds of a ``react_agent`` run.
ROUNDS = 10


def react_agent() -> Calculator:
    """A ReAct-style run: ``ROUNDS`` tool rounds of ~1 KB results, then an answer."""
    from eddies.engine import ChatModelSetup, ResourceType

    agent = Calculator("react", config={"max_tool_rounds": ROUNDS + 1})
    agent.add_resource("lookup", ResourceType.TOOL, lookup)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(react_rounds))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["lookup"]))
    return agent
