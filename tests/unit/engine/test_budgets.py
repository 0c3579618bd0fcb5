"""Budgets: tokens and cost a run and a session may spend on model calls."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import LocalRunner
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import calculator_agent
from eddies.engine import AgentPlan
from eddies.engine.budgets import Budget, spent
from eddies.engine.plan import PlanError
from eddies.events import ChatMessage, ChatResponseEvent, MessageRole, OutputEvent


class Priced(ScriptedChatModel):
    """The scripted model, reporting 100 tokens and $0.01 per call."""

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        reply = super().chat(messages, **kwargs)
        reply.extra_args["usage"] = {"prompt_tokens": 80, "completion_tokens": 20,
                                     "cost_usd": 0.01, "latency_ms": 7}
        return reply


def _agent(budget: dict[str, Any]) -> Any:
    agent = calculator_agent(Priced())  # two model calls per run (a tool round)
    agent.config["budget"] = budget
    return agent


def _errors(runner: LocalRunner) -> list[str]:
    return [e.payload.error.message for e in runner.outputs  # type: ignore[union-attr]
            if isinstance(e.payload, OutputEvent) and e.payload.error is not None]


def test_a_run_over_its_token_budget_ends_naming_it() -> None:
    runner = LocalRunner(_agent({"run": {"max_total_tokens": 150}}))
    runner.submit("s", '{"a": 1, "b": 2}')
    runner.run_until_idle()
    [message] = _errors(runner)
    assert "run.max_total_tokens=150 (200 tokens spent)" in message
    assert runner.states["s"].tokens == 200 and runner.states["s"].run is None


def test_a_session_over_its_cost_budget_starts_no_more_runs() -> None:
    runner = LocalRunner(_agent({"session": {"max_cost_usd": 0.03}}))
    for k in range(3):
        runner.submit("s", f'{{"a": {k}, "b": 1}}')
    runner.run_until_idle()
    outputs = [e.payload for e in runner.outputs]
    assert [o.error is None for o in outputs] == [True, False, False]  # type: ignore[union-attr]
    second, third = _errors(runner)
    assert "session.max_cost_usd=0.03 (0.04 USD spent)" in second
    assert "run 3 was not started" in third
    calls = [e for e in runner.history if e.type == "DurableCallRequest" and e.run == 3]
    assert calls == []


def test_chat_responses_record_tokens_cost_latency_and_attempts() -> None:
    runner = LocalRunner(calculator_agent(Priced()))
    runner.run([("s", '{"a": 1, "b": 2}')])
    [response] = [e.payload for e in runner.history if isinstance(e.payload, ChatResponseEvent)]
    usage = response.usage
    assert usage is not None and response.response.role is MessageRole.ASSISTANT
    assert (usage.prompt_tokens, usage.completion_tokens, usage.latency_ms, usage.attempts) == (
        160, 40, 14, 2)
    assert usage.cost_usd == pytest.approx(0.02)


def test_an_unknown_cost_stays_unknown() -> None:
    runner = LocalRunner(calculator_agent())  # the plain scripted model reports no cost
    runner.run([("s", '{"a": 1, "b": 2}')])
    [response] = [e.payload for e in runner.history if isinstance(e.payload, ChatResponseEvent)]
    assert response.usage is not None and response.usage.cost_usd is None


@pytest.mark.parametrize(("budget", "named"), [
    ({"call": {}}, "'call' is not a scope"),
    ({"run": {"max_tokens": 5}}, "budget.run.max_tokens': unknown limit"),
    ({"run": {"max_total_tokens": 1.5}}, "budget.run.max_total_tokens': expected a positive integer"),
    ({"session": {"max_cost_usd": 0}}, "budget.session.max_cost_usd': expected a positive number"),
])
def test_a_bad_budget_fails_the_plan_naming_it(budget: Any, named: str) -> None:
    with pytest.raises(PlanError, match=named):
        AgentPlan.compile(_agent(budget))


def test_spent_reads_what_a_reply_reports() -> None:
    assert spent({"extra_args": {"usage": {"prompt_tokens": 3, "completion_tokens": 4,
                                           "cost_usd": 0.5}}}) == (7, 0.5)
    assert spent({"extra_args": {}}) == (0, 0.0) and spent("text") == (0, 0.0)
    assert Budget(max_total_tokens=10).exceeded(10, 99.0) is None
