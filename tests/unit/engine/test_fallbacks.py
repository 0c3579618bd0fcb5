"""A chat model setup's fallbacks: asked in turn, the same messages, when a call fails
after its retries; each a durable call of its own, so replay asks none again."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import LocalRunner
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import AgentPlan, ChatModelSetup, PlanError, ResourceType
from eddies.events import CallKind, ChatMessage, DurableCallRequest
from tests.agents import OneCall


def down(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    raise ConnectionError("provider down")


def answers(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    return ChatMessage(content=f"backup: {messages[-1].content}")


def _agent(primary: Any, fallbacks: tuple[str, ...] = ("backup",)) -> OneCall:
    agent = OneCall(config={"retry": {"CHAT_MODEL": {"max_attempts": 2, "base_delay_ms": 1}}})
    agent.add_resource("main", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(primary))
    agent.add_resource("spare", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(answers))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("main", model="m1", fallbacks=fallbacks))
    agent.add_resource("backup", ResourceType.CHAT_MODEL, ChatModelSetup("spare", model="m2"))
    return agent


def _model_calls(runner: LocalRunner) -> list[tuple[str, int]]:
    return [(p.target, p.attempt) for ev in runner.history
            if isinstance(p := ev.payload, DurableCallRequest) and p.kind is CallKind.CHAT_MODEL]


def test_a_primary_that_fails_after_its_retries_is_answered_by_its_fallback() -> None:
    agent = _agent(down)
    runner = LocalRunner(agent)
    assert runner.run([("s1", "hi")]) == ["backup: hi"]
    assert _model_calls(runner) == [("llm", 1), ("llm", 2), ("backup", 1)]  # its retries first
    assert replay(AgentPlan.compile(_agent(down)), list(enumerate(runner.history)), "s1").ok


def test_a_primary_that_answers_asks_no_fallback() -> None:
    runner = LocalRunner(_agent(answers))
    assert runner.run([("s1", "hi")]) == ["backup: hi"]
    assert _model_calls(runner) == [("llm", 1)]


def test_a_fallback_is_another_chat_model_of_the_agent() -> None:
    for wrong in (("nope",), ("main",), ("llm",)):
        with pytest.raises(PlanError, match=f"fallback {wrong[0]!r} is not another CHAT_MODEL"):
            AgentPlan.compile(_agent(answers, wrong))


def test_when_every_model_fails_the_run_fails_with_the_last_ones_error() -> None:
    from eddies.connectors.local import RunFailedError

    agent = _agent(down)
    agent.resources = [r if r.name != "spare" else type(r)(r.name, r.type, ScriptedChatModel(down))
                       for r in agent.resources]
    runner = LocalRunner(agent)
    with pytest.raises(RunFailedError, match="provider down"):
        runner.run([("s1", "hi")])
    assert _model_calls(runner) == [("llm", 1), ("llm", 2), ("backup", 1), ("backup", 2)]
