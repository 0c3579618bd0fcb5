"""Answer checks: a refused answer goes back to the model once with the reason, and the
second answer goes out; refused twice, the run fails naming the hook and the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eddies import ChatModelSetup, LocalRunner, OutputEvent, ReActAgent, ResourceType
from eddies.connectors.guardrails.answers import JsonSchemaCheck, PatternCheck
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import PlanError
from eddies.events import ChatMessage, MessageRole

PRICE = {"type": "object", "required": ["price"],
         "properties": {"price": {"type": "number", "maximum": 60}}}
SEEN: list[list[str]] = []


def pricing(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """Too dear first; told why, a price within the limit, unless asked to be stubborn."""
    SEEN.append([m.content for m in messages])
    told = [m.content for m in messages if m.role is MessageRole.USER and "cannot be given" in m.content]
    stubborn = "stubborn" in messages[1].content
    price = 112 if not told or stubborn else 55
    return ChatMessage(MessageRole.ASSISTANT, json.dumps({"price": price}))


def agent(*hooks: Any) -> ReActAgent:
    a = ReActAgent("pricer", model="llm", prompt="You price things.")
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(pricing))
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    for hook in hooks:
        a.add_hook(hook)
    return a


def _outputs(runner: LocalRunner) -> list[tuple[Any, str | None]]:
    return [(p.output, p.error and f"{p.error.type}: {p.error.message}") for e in runner.outputs
            if isinstance(p := e.payload, OutputEvent)]


def test_an_answer_that_fails_its_schema_is_sent_back_once_and_the_second_goes_out() -> None:
    SEEN.clear()
    runner = LocalRunner(agent(JsonSchemaCheck(PRICE)))
    runner.submit("s1", "price a lamp")
    runner.run_until_idle()
    assert _outputs(runner) == [('{"price": 55}', None)]
    assert len(SEEN) == 2 and SEEN[1][-1] == ("That answer cannot be given: price: 112 is greater than the "
                                              "maximum of 60. Answer again.")


def test_an_answer_refused_twice_fails_the_run_naming_the_hook() -> None:
    runner = LocalRunner(agent(JsonSchemaCheck(PRICE)))
    runner.submit("s1", "price a lamp, stubborn")
    runner.run_until_idle()
    assert _outputs(runner) == [(None, "OutputRefusedError: refused by hook 'json-schema': "
                                       "price: 112 is greater than the maximum of 60")]


def test_a_pattern_check_refuses_what_must_not_be_said() -> None:
    runner = LocalRunner(agent(PatternCheck(r'"price": 1\d\d', must_match=False, reason="it asks too much")))
    runner.submit("s1", "price a lamp")
    runner.run_until_idle()
    assert _outputs(runner) == [('{"price": 55}', None)]
    with pytest.raises(PlanError, match="is not a regular expression"):
        PatternCheck("(")
    with pytest.raises(PlanError, match="the schema is not valid"):
        JsonSchemaCheck({"type": "price"})
