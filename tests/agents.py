"""Agents shared by tests (module-level, so durable functions are importable by name)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import Calculator, add, calculator_agent
from eddies.events import ChatMessage, ChatRequestEvent, ChatResponseEvent


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


Chat = Calculator


class OneCall(Agent):
    """One model call per input, its reply the answer: what a slow provider's sessions are."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=str(event.input))]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


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


def react_loop_agent() -> Any:
    """:func:`react_agent`'s run on ReActAgent's loop instead of the built-in chat action."""
    from eddies import ReActAgent
    from eddies.engine import ChatModelSetup, ResourceType

    agent = ReActAgent("react-loop", model="llm")
    agent.add_resource("lookup", ResourceType.TOOL, lookup)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(react_rounds))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["lookup"]))
    return agent


#: How often each tool of ``shop_agent`` ran (a side effect a person must approve first).
RAN: Counter[str] = Counter()


def refund(order: str, amount: int) -> str:
    """Refund an order (a tool a person must approve)."""
    RAN["refund"] += 1
    return f"refunded {amount} on {order}"


def lookup_order(order: str) -> str:
    """Look an order up (needs no approval)."""
    RAN["lookup"] += 1
    return f"{order}: paid"


def lookup_and_refund(messages: list[Any], tools: list[Any]) -> Any:
    """Asks to refund o-1 (and, if the prompt says "look up", to look it up in the same
    round), then answers with what the tools said (results as JSON text, errors as
    ``error: TYPE: MESSAGE``)."""
    from eddies.events import ChatMessage, MessageRole, ToolCall

    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if results:
        return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))
    prompt = next(m.content for m in messages if m.role is MessageRole.USER)
    lookup = [ToolCall("t1", "lookup", {"order": "o-1"})] if "look up" in prompt else []
    return ChatMessage(MessageRole.ASSISTANT, "", [
        *lookup, ToolCall("t2", "refund", {"order": "o-1", "amount": 5})])


class Waits(Calculator):
    """Every kind of wait: ``{"sleep_s": x}`` sleeps, ``{"signal": name, "timeout_s": t}``
    waits for a signal (output its value, or "timeout"); anything else asks the model,
    which looks an order up and asks to refund it (``shop_agent``)."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        asked = event.input
        if isinstance(asked, dict) and "sleep_s" in asked:
            ctx.sleep(asked["sleep_s"])
            ctx.send_event(OutputEvent(output={"slept": asked["sleep_s"], "at": ctx.now()}))
        elif isinstance(asked, dict) and "signal" in asked:
            try:
                value = ctx.wait_for_signal(asked["signal"], timeout=asked.get("timeout_s"))
            except TimeoutError:
                value = "timeout"
            ctx.send_event(OutputEvent(output=value))
        else:
            Calculator.ask(event, ctx)


def shop_agent(approval_timeout_ms: int | None = 60_000) -> Waits:
    """Refunds need a person's approval (within ``approval_timeout_ms``); lookups do not."""
    from eddies.engine import ChatModelSetup, FunctionTool, ResourceType

    agent = Waits("shop")
    agent.add_resource("lookup", ResourceType.TOOL, lookup_order)
    agent.add_resource("refund", ResourceType.TOOL, FunctionTool(
        refund, requires_approval=True, approval_timeout_ms=approval_timeout_ms))
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION,
                       ScriptedChatModel(lookup_and_refund))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("offline", tools=["lookup", "refund"]))
    return agent


def react_or_loop(messages: list[Any], tools: list[Any]) -> Any:
    """The scripted default (a tool call, then an answer), except for a prompt that says
    "loop": then a tool call every time (a runaway loop)."""
    from eddies.connectors.models.scripted import tool_then_answer
    from eddies.events import ChatMessage, MessageRole, ToolCall

    prompt = next(m.content for m in messages if m.role is MessageRole.USER)
    if "loop" in prompt:
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall(f"call-{len(messages)}", "add", {"a": len(messages), "b": 1})])
    return tool_then_answer(messages, tools)


def react_calculator() -> Any:
    """A ReActAgent with ``add``: answers in two model calls, or runs away into
    max_iterations=3, its oldest tool round trimmed on the way (TRIM at 20 tokens of the
    scripted count). Its deadline is far off: conformance inputs are stamped in 2023."""
    from eddies import ReActAgent, ReActOptions
    from eddies.engine import ChatModelSetup, ResourceType

    agent = ReActAgent("react-calc", model="llm", options=ReActOptions(
        max_iterations=3, request_timeout=2e9, tokens_management_strategy="TRIM", max_tokens_threshold=20))
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(react_or_loop))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    return agent


def draft_by_version(messages: list[Any], tools: list[Any]) -> str:
    """A drafter: "draft v1: TASK" first, then each refinement one version up."""
    import re

    ask = messages[-1].content
    last = re.search(r"Your previous draft:\ndraft v(\d+): ", ask)
    if last is None:
        return f"draft v1: {ask}"
    task = ask.split("\n")[1]
    return f"draft v{int(last.group(1)) + 1}: {task}"


def critic_by_version(messages: list[Any], tools: list[Any]) -> str:
    """A critic: a v2 draft passes (with confidence 0.3 for a task that says "unsure",
    else 0.9); a task that says "never" never passes."""
    ask = messages[-1].content
    if "draft v2:" in ask and "never" not in ask:
        return f"APPROVED: good. confidence: {0.3 if 'unsure' in ask else 0.9}"
    return "REVISE: make it v2."


def reflect_agent() -> Any:
    """A ReflectionAgent on two offline models: passes on the second draft, or never
    ("never": NOT_APPROVED at max_iterations=3), or with too little confidence
    ("unsure", confidence_value=0.5). Its deadline is far off (inputs stamped in 2023)."""
    from eddies import ReActOptions, ReflectionAgent, ReflectionOptions
    from eddies.engine import ChatModelSetup, ResourceType

    agent = ReflectionAgent("reflect", drafter="writer", critic="editor", options=ReflectionOptions(
        max_iterations=3, confidence_value=0.5, loop=ReActOptions(request_timeout=2e9)))
    agent.add_resource("w", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(draft_by_version))
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(critic_by_version))
    agent.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("w", prompt="You draft."))
    agent.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("c", prompt="You review."))
    return agent


def boss_model(messages: list[Any], tools: list[Any]) -> Any:
    """The boss asks the reviewer and general-purpose at once, then answers with both;
    general-purpose (its own system prompt) answers at once."""
    from eddies.engine.react import GENERAL_PURPOSE_PROMPT
    from eddies.events import ChatMessage, MessageRole, ToolCall

    if messages[0].content == GENERAL_PURPOSE_PROMPT:
        return ChatMessage(MessageRole.ASSISTANT, f"summary of {messages[-1].content}")
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if results:
        return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))
    task = next(m.content for m in messages if m.role is MessageRole.USER)
    return ChatMessage(MessageRole.ASSISTANT, "", [
        ToolCall("r", "reviewer", {"prompt": f"review {task}"}),
        ToolCall("g", "general-purpose", {"prompt": task})])


#: Seconds the reviewer's model takes, when a test needs the boss's two sub-agents to
#: finish in one order (general-purpose first): they run at once, and which result reaches
#: the session first is otherwise the call threads' race.
REVIEWER_DELAY_ENV = "TEST_REVIEWER_DELAY_S"


def reviewer_model(messages: list[Any], tools: list[Any]) -> Any:
    """The reviewer adds the letters of what it reviews with its caller's ``add`` tool."""
    import os
    import time

    from eddies.events import ChatMessage, MessageRole, ToolCall

    time.sleep(float(os.environ.get(REVIEWER_DELAY_ENV, "0")))

    if messages[-1].role is MessageRole.TOOL:
        return ChatMessage(MessageRole.ASSISTANT, f"reviewed, score {messages[-1].content}")
    text = messages[-1].content
    return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("a", "add", {"a": len(text), "b": 1})])


def delegating_agent() -> Any:
    """A ReActAgent whose model calls two sub-agents as tools: an internal ReAct reviewer
    (its own model; its caller's tool) and the built-in general-purpose one."""
    from eddies import ReActAgent, ReActOptions
    from eddies.engine import ChatModelSetup, ResourceType

    reviewer = ReActAgent("reviewer", model="critic", options=ReActOptions(request_timeout=2e9))
    reviewer.description = "Reviews a text and scores it."
    reviewer.add_resource("critic_conn", ResourceType.CHAT_MODEL_CONNECTION,
                          ScriptedChatModel(reviewer_model))
    reviewer.add_resource("critic", ResourceType.CHAT_MODEL, ChatModelSetup("critic_conn", tools=["add"]))
    boss = ReActAgent("boss", model="llm", options=ReActOptions(request_timeout=2e9))
    boss.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(boss_model))
    boss.add_resource("llm", ResourceType.CHAT_MODEL,
                      ChatModelSetup("conn", tools=["reviewer", "general-purpose", "add"]))
    boss.add_resource("add", ResourceType.TOOL, add)
    boss.add_resource("reviewer", ResourceType.AGENT, reviewer)
    return boss


def streaming_travel_agent() -> Any:
    """The demo's travel helper, its answers streamed a word every 10 ms, without the clock
    tool (its answers change with the time: two runners' histories could not be compared).
    Its deadline is far off: conformance inputs are stamped in 2023."""
    from eddies import ReActAgent, ReActOptions
    from eddies.demo import TRAVEL_PROMPT, travel_model, weather
    from eddies.engine import ChatModelSetup, FunctionTool, ResourceType

    agent = ReActAgent("travel", model="llm", prompt=TRAVEL_PROMPT,
                       options=ReActOptions(max_iterations=5, request_timeout=2e9))
    agent.add_resource("weather", ResourceType.TOOL, FunctionTool(weather, idempotent=True))
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION,
                       ScriptedChatModel(travel_model, word_delay=0.01))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("offline", tools=["weather"], stream=True))
    return agent
