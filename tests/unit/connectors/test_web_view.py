"""The web view's data, no broker: sessions' statuses folded from LocalRunner histories,
and payloads as the page shows them. The JSON API runs on a real broker in
tests/integration/test_web_api.py; the page is looked at in headless Chromium by
tests/integration/test_ui.py."""

from __future__ import annotations

from typing import Any

from eddies import Agent, ChatModelSetup, InputEvent, LocalRunner, ReActAgent, ResourceType, action
from eddies.connectors.inspect.sessions import SessionSummary, summarize
from eddies.events import (
    ChatMessage,
    DurableCallRequest,
    DurableCallResult,
    MessageRole,
)
from tests.agents import shop_agent


def _summary(runner: LocalRunner, session: str) -> SessionSummary:
    return summarize(session, [e for e in runner.history if e.session_id == session])


def _status(runner: LocalRunner, session: str) -> str:
    return _summary(runner, session).status


def test_answered_and_waiting_for_approval_then_answered() -> None:
    runner = LocalRunner(shop_agent())
    runner.submit("s1", "look up and refund o-1")
    runner.run_until_waiting()
    assert _status(runner, "s1") == "waiting for approval"
    [ask] = runner.approval_requests("s1")
    assert _summary(runner, "s1").to_dict()["waits"] == [ask.signal]  # what the page answers
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    summary = summarize("s1", [e for e in runner.history if e.session_id == "s1"])
    assert (summary.status, summary.runs, summary.waits) == ("answered", 1, [])
    assert summary.last_seq == max(e.seq for e in runner.history if e.session_id == "s1")


def test_the_approvals_pending_are_those_neither_answered_nor_past_their_deadline() -> None:
    """What ``eddies approve`` checks an id against, and lists when it is not one of them."""
    runner = LocalRunner(shop_agent(60_000))
    runner.submit("s1", "refund o-1")
    runner.submit("s2", "refund o-1")
    runner.run_until_waiting()
    asks = {s: runner.approval_requests(s)[0] for s in ("s1", "s2")}
    pending = _summary(runner, "s1").approvals
    assert [(e.session_id, e.run, e.payload) for e in pending] == [("s1", 1, asks["s1"])]
    assert _summary(runner, "s1").asked(asks["s1"].signal)
    assert not _summary(runner, "s1").asked(asks["s2"].signal)  # another session's
    runner.approve("s1", asks["s1"].signal)
    runner.run_until_idle()  # s2's deadline passes
    for session in ("s1", "s2"):
        summary = _summary(runner, session)
        assert (summary.approvals, summary.asked(asks[session].signal)) == ([], True), session


def test_waiting_for_a_signal_and_queued_inputs_behind_it() -> None:
    runner = LocalRunner(shop_agent())
    runner.submit("s1", {"signal": "go"})
    runner.submit("s1", {"sleep_s": 1})  # accepted as run 2, waits behind run 1
    runner.run_until_waiting()
    assert _status(runner, "s1") == "waiting for a signal"
    assert _summary(runner, "s1").waits == ["go"]
    runner.signal("s1", "go", "now")
    runner.run_until_idle()
    assert _status(runner, "s1") == "answered" and _summary(runner, "s1").waits == []


class _Flaky:
    def __init__(self) -> None:
        self.fixed = False

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not self.fixed:
            raise ConnectionError("the provider is down")
        return ChatMessage(MessageRole.ASSISTANT, f"answer to {messages[-1].content}")


def test_halted_until_resumed() -> None:
    conn = _Flaky()
    agent = ReActAgent("react", model="llm", prompt="Answer.",
                       config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    runner = LocalRunner(agent)
    runner.submit("s1", "first")
    runner.run_until_idle()
    assert _status(runner, "s1") == "halted"  # its notice is a failed output, yet not "failed"
    [resume] = _summary(runner, "s1").waits
    assert resume.startswith("resume:s1:r1:")
    conn.fixed = True
    runner.resume("s1")
    runner.run_until_idle()
    assert _status(runner, "s1") == "answered"


class _Failing(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        raise ValueError("no")


def test_failed_and_a_copy_of_an_event_folded_once() -> None:
    runner = LocalRunner(_Failing("failing"))
    runner.submit("s1", "x")
    runner.run_until_idle()
    history = list(runner.history)
    assert summarize("s1", history).status == "failed"
    twice = summarize("s1", history + history)  # a worker that crashed writes them again
    assert (twice.events, twice.runs) == (len(history), 1)


def test_payload_data_decodes_what_travels_as_json_text() -> None:
    from eddies.connectors.inspect.web import payload_data

    assert payload_data(DurableCallResult(call_id="c1", value='{"x": [1]}'))["value"] == {"x": [1]}
    assert payload_data(DurableCallRequest(call_id="c1", args="not json"))["args"] == "not json"
    assert payload_data(InputEvent('{"a": 1}'))["input"] == '{"a": 1}'  # a text stays a text
