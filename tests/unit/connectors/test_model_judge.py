"""A guard model as judge of a ReAct agent's answer (issue 57): a FAIL sends the answer
back to the model once with the judge's reason, and the second answer goes out if the judge
passes it; a second FAIL fails the run naming the hook. The judge's call is a durable model
call: journaled, so a replay reads its verdict and does not ask again."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import ChatModelSetup, LocalRunner, OutputEvent, ReActAgent, ResourceType
from eddies.connectors.guardrails.judge import ModelJudge
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import PlanError
from eddies.events import ChatMessage, DurableCallRequest, MessageRole

JUDGED: list[str] = []
ASKED: list[list[str]] = []


def writer(stubborn: bool) -> Any:
    def answer(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        ASKED.append([m.content for m in messages])
        sent_back = any("cannot be given" in m.content for m in messages if m.role is MessageRole.USER)
        if sent_back and not stubborn:
            return ChatMessage(MessageRole.ASSISTANT, "We will look into your order.")
        return ChatMessage(MessageRole.ASSISTANT, "We guarantee a full refund by Friday.")
    return answer


def judge(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    said = messages[-1].content
    JUDGED.append(said)
    if "guarantee" in said:
        return ChatMessage(MessageRole.ASSISTANT, "FAIL: it promises a refund and a date")
    return ChatMessage(MessageRole.ASSISTANT, "PASS")


def agent(stubborn: bool = False) -> ReActAgent:
    support = ReActAgent("support", model="llm", prompt="You help customers.")
    support.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(writer(stubborn)))
    support.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    support.add_resource("guard", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(judge))
    support.add_resource("judge", ResourceType.CHAT_MODEL, ChatModelSetup("guard"))
    return support.add_hook(ModelJudge("judge", "Never promise a refund or a delivery date."))


@pytest.fixture(autouse=True)
def _clear() -> None:
    JUDGED.clear()
    ASKED.clear()


def test_an_answer_the_judge_fails_goes_back_once_and_the_second_goes_out() -> None:
    runner = LocalRunner(agent())
    assert runner.run([("s1", "where is my refund?")]) == ["We will look into your order."]
    assert JUDGED == ["We guarantee a full refund by Friday.", "We will look into your order."]
    # The model was told why.
    assert any("That answer cannot be given: it promises a refund and a date" in text for text in ASKED[-1])
    # The judge's calls are durable model calls of the run, journaled.
    judged = [e for e in runner.history
              if isinstance(p := e.payload, DurableCallRequest) and p.target == "judge"]
    assert len(judged) == 2
    mine = list(enumerate(runner.history))
    report = replay(runner.plan, mine, "s1")
    assert report.ok and not report.extra, report
    assert len(JUDGED) == 2  # the replay read the judge's replies: it was not asked again


def test_a_second_failed_answer_fails_the_run_naming_the_hook() -> None:
    runner = LocalRunner(agent(stubborn=True))
    runner.submit("s1", "where is my refund?")
    runner.run_until_idle()
    [out] = [p for e in runner.outputs if isinstance(p := e.payload, OutputEvent)]
    assert out.error is not None and out.error.type == "OutputRefusedError"
    assert out.error.message == "refused by hook 'judge': it promises a refund and a date"
    assert len(JUDGED) == 2


def test_a_judge_whose_reply_cannot_be_read_does_not_pass_and_its_model_must_exist() -> None:
    hook = ModelJudge("judge", "Be kind.")
    refused = hook.answer_verdict("hi", ChatMessage(MessageRole.ASSISTANT, "Looks fine to me"), None)  # type: ignore[arg-type]
    assert refused is not None and "neither PASS nor FAIL" in refused.reason
    lonely = ReActAgent("lonely", model="llm", prompt="Hi.")
    lonely.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(judge))
    lonely.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    lonely.add_hook(ModelJudge("nobody", "Be kind."))
    with pytest.raises(PlanError, match="model 'nobody' is not a CHAT_MODEL resource"):
        LocalRunner(lonely)
