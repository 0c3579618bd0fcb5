"""Prompts as resources: templates of text or messages, formatted with the values given;
a chat model setup, a ReActAgent or a RagAgent names one, and it opens the conversation
formatted with the agent's config; a placeholder the config lacks fails compilation."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    AgentPlan,
    ChatModelSetup,
    LocalRunner,
    OutputEvent,
    PlanError,
    Prompt,
    ReActAgent,
    ResourceType,
    ScriptedChatModel,
)
from eddies.demo import calculator_agent
from eddies.events import ChatMessage, MessageRole


def test_a_prompt_formats_its_placeholders_and_names_a_missing_one() -> None:
    prompt = Prompt.from_messages([{"role": "system", "content": "You help {user} of {company}."},
                                   ChatMessage(MessageRole.USER, "Say {{hi}} to {user}.")])
    assert prompt.variables == {"user", "company"}
    assert [m.content for m in prompt.format_messages(user="Ana", company="Acme")] == [
        "You help Ana of Acme.", "Say {hi} to Ana."]
    assert Prompt.from_text("Be {tone}.").format(tone="brief") == "Be brief."
    with pytest.raises(KeyError, match="without a value: company"):
        prompt.format(user="Ana")
    with pytest.raises(ValueError, match="placeholder \\{0\\} is not a name"):
        Prompt.from_text("positional {0}")
    with pytest.raises(ValueError, match="a prompt has at least one message"):
        Prompt.from_messages([])


def _seen(model: ScriptedChatModel) -> list[list[ChatMessage]]:
    seen: list[list[ChatMessage]] = []
    inner = model.chat

    def chat(messages: list[ChatMessage], **kw: Any) -> ChatMessage:
        seen.append(list(messages))
        return inner(messages, **kw)

    model.chat = chat  # type: ignore[method-assign]
    return seen


def _support(user_message: str) -> tuple[ReActAgent, list[list[ChatMessage]]]:
    """A ReActAgent whose prompt resource is a system message for {company} (Acme, from the
    config) and ``user_message``; and the messages its model is sent."""
    model = ScriptedChatModel(lambda messages, tools: "ok")
    seen = _seen(model)
    agent = ReActAgent("support", model="llm", prompt="support_prompt", config={"company": "Acme"})
    agent.add_resource("support_prompt", ResourceType.PROMPT, Prompt.from_messages([
        {"role": "system", "content": "You answer for {company}."},
        {"role": "user", "content": user_message}]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    return agent, seen


def test_a_react_agents_prompt_resource_opens_the_conversation_with_the_config() -> None:
    agent, seen = _support("Answer briefly.")
    assert LocalRunner(agent).run([("s1", "hi")]) == ["ok"]
    assert [(m.role, m.content) for m in seen[0]] == [
        (MessageRole.SYSTEM, "You answer for Acme."), (MessageRole.USER, "Answer briefly."),
        (MessageRole.USER, "hi")]


def test_a_chat_model_setups_prompt_resource_and_a_missing_placeholder() -> None:
    model = ScriptedChatModel()
    seen = _seen(model)
    agent = calculator_agent(model)
    agent.config["tone"] = "brief"
    agent.add_resource("calc_prompt", ResourceType.PROMPT, Prompt.from_text("Be {tone}."))
    agent.resources = [r for r in agent.resources if r.name != "llm"]
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", prompt="calc_prompt",
                                                                      tools=["add"]))
    LocalRunner(agent).run([("s1", '{"a": 1, "b": 2}')])
    assert seen[0][0] == ChatMessage(MessageRole.SYSTEM, "Be brief.")
    del agent.config["tone"]
    with pytest.raises(PlanError, match="resource 'llm': prompt 'calc_prompt' has placeholders the "
                                        "agent's config does not hold: tone"):
        LocalRunner(agent)
    agent.add_resource("bad", ResourceType.PROMPT, 3)
    with pytest.raises(PlanError, match="a PROMPT must be a Prompt"):
        LocalRunner(agent)


def test_a_react_prompt_places_the_input_where_it_says_input() -> None:
    agent, seen = _support("A customer asks: {input}\nAnswer in one line.")
    LocalRunner(agent).run([("s1", "where is my order?"), ("s2", {"order": 7})])
    assert [(m.role, m.content) for m in seen[0]] == [  # placed, not appended again
        (MessageRole.SYSTEM, "You answer for Acme."),
        (MessageRole.USER, "A customer asks: where is my order?\nAnswer in one line.")]
    assert seen[1][1].content == 'A customer asks: {"order": 7}\nAnswer in one line.'


def _failures(runner: LocalRunner) -> list[str]:
    return [f"{p.error.type}: {p.error.message}" for e in runner.outputs
            if isinstance(p := e.payload, OutputEvent) and p.error is not None]


def test_a_react_prompt_takes_placeholders_from_the_inputs_fields_as_flink_agents_does() -> None:
    # Flink Agents' ReActAgent example: the input's fields fill the user message.
    agent, seen = _support("What is ({a} + {b}) * {c}?")
    runner = LocalRunner(agent)
    assert runner.run([("s1", {"a": 1, "b": 2.5, "c": "three", "unused": [1]})]) == ["ok"]
    assert [(m.role, m.content) for m in seen[0]] == [  # placed: the input is not appended again
        (MessageRole.SYSTEM, "You answer for Acme."), (MessageRole.USER, "What is (1 + 2.5) * three?")]

    # A value that is not a text is JSON; the config wins over a field of its name (an input
    # cannot rewrite what the agent's author fixed); a field "input" is the input's.
    agent, seen = _support("{input} for {order} of {company}")
    runner = LocalRunner(agent)
    runner.run([("s1", {"input": "Refund", "order": {"id": 7, "paid": True}, "company": "Evil"})])
    assert seen[0][1].content == 'Refund for {"id": 7, "paid": true} of Acme'

    # A placeholder neither the config nor the input holds fails that input's run, naming
    # it; the session goes on with the next input (a text, or an object without the field).
    agent, seen = _support("Answer {question}")
    runner = LocalRunner(agent)
    for asked in ("where is my order?", {"asked": "x"}, {"question": "where?"}):
        runner.submit("s1", asked)
    runner.run_until_idle()
    assert [e.payload.output for e in runner.outputs] == [None, None, "ok"]  # type: ignore[union-attr]
    assert _failures(runner) == [
        "ValueError: ReActAgent 'support': prompt 'support_prompt' has placeholders neither the "
        "agent's config nor the input's fields hold: question"] * 2
    assert [m.content for m in seen[0]] == ["You answer for Acme.", "Answer where?"]


def test_an_mcp_prompt_must_be_fetched_from_an_mcp_server_of_the_agent() -> None:
    from eddies import McpPrompt, McpServer

    agent, _ = _support("hi")
    agent.resources = [r for r in agent.resources if r.name != "support_prompt"]
    served = McpPrompt("guides", "support", {"company": "{company}"})
    agent.add_resource("support_prompt", ResourceType.PROMPT, served)
    with pytest.raises(PlanError, match="server 'guides' is not an MCP_SERVER resource"):
        AgentPlan.compile(agent)
    agent.add_resource("guides", ResourceType.MCP_SERVER, McpServer(url="http://127.0.0.1:9/mcp"))
    with pytest.raises(PlanError, match="prompt 'support' of MCP server 'guides' was not fetched"):
        AgentPlan.compile(agent)
    served.discovered.append(ChatMessage(MessageRole.USER, "Answer for {company}."))  # as a runner does
    plan = AgentPlan.compile(agent)
    assert plan.resources["support_prompt"][1].format(company="Acme") == "Answer for Acme."
