"""ReActAgent's token budget with litellm over real HTTP (a local OpenAI-compatible
server), tokens counted by litellm's own counter: TRIM sends at most the threshold and
drops whole turns oldest first; SUMMARIZE asks for a summary in a call of its own and
sends the prompt, the summary and the latest context; NONE lets an oversized request
fail as the provider fails it. Replays call the server no more."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eddies import ChatModelSetup, LocalRunner, ReActAgent, ReActOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.engine.tokens import SUMMARY_PROMPTS
from eddies.events import OutputEvent
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

PAGES = 5


def page(n: int) -> str:
    """Read page n of the report."""
    return f"page {n}: " + "lorem ipsum dolor " * 60


def reader(body: dict[str, Any]) -> dict[str, Any]:
    """Reads pages 0..PAGES-1 (one per call: the next after the highest it has seen a
    result of, so trimmed turns do not make it repeat itself), then answers; a summary
    request gets a summary."""
    messages = body["messages"]
    if messages[0]["content"] in SUMMARY_PROMPTS.values():
        return {"role": "assistant", "content": "Pages read so far hold lorem ipsum."}
    read = [json.loads(c["function"]["arguments"])["n"] for m in messages for c in m.get("tool_calls") or []]
    nxt = max(read, default=-1) + 1
    if nxt < PAGES:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{nxt}", "type": "function",
            "function": {"name": "page", "arguments": json.dumps({"n": nxt})}}]}
    return {"role": "assistant", "content": f"Read {nxt} pages."}


def agent(server: OpenAIServer, **options: Any) -> ReActAgent:
    a = ReActAgent("reader", model="llm", prompt="You read reports.",
                   options=ReActOptions(handle_exception="CONTINUE", **options),
                   config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    a.add_resource("page", ResourceType.TOOL, page)
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   LiteLLMChatModel(api_base=server.base_url, api_key="none"))
    a.add_resource("llm", ResourceType.CHAT_MODEL,
                   ChatModelSetup("conn", model="openai/test", tools=["page"]))
    return a


def count(messages: list[dict[str, Any]]) -> int:
    import litellm

    return int(litellm.token_counter(model="openai/test", messages=messages))


def pages_in(messages: list[dict[str, Any]]) -> list[int]:
    return [json.loads(c["function"]["arguments"])["n"] for m in messages for c in m.get("tool_calls") or []]


def _replays_without_calls(runner: LocalRunner, server: OpenAIServer) -> None:
    asked = len(server.requests)
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == "s1"]
    assert replay(runner.plan, history, "s1").ok
    assert len(server.requests) == asked


@pytest.fixture
def server() -> Any:
    srv = OpenAIServer(responder=reader).start()
    yield srv
    srv.stop()


def test_trim_sends_at_most_the_threshold_dropping_the_oldest_turns(server: OpenAIServer) -> None:
    turn = count([{"role": "tool", "content": json.dumps(page(0)), "tool_call_id": "x"}])
    threshold = 2 * turn + 120  # two turns and the prompt fit, three do not
    runner = LocalRunner(agent(server, tokens_management_strategy="TRIM", max_tokens_threshold=threshold))
    assert runner.run([("s1", "Read the report.")]) == ["Read 5 pages."]
    sent = [r["messages"] for r in server.requests]
    assert [pages_in(m) for m in sent] == [[], [0], [0, 1], [1, 2], [2, 3], [3, 4]]
    for messages in sent:
        assert [m["content"] for m in messages[:2]] == ["You read reports.", "Read the report."]
        assert count(messages) <= threshold
    # One more turn would have been over: it was not dropped for nothing.
    assert count(sent[2]) + turn > threshold
    _replays_without_calls(runner, server)


def test_summarize_replaces_the_older_turns_by_a_summary_call(server: OpenAIServer) -> None:
    turn = count([{"role": "tool", "content": json.dumps(page(0)), "tool_call_id": "x"}])
    runner = LocalRunner(agent(server, tokens_management_strategy="SUMMARIZE",
                               max_tokens_threshold=2 * turn + 120))
    assert runner.run([("s1", "Read the report.")]) == ["Read 5 pages."]
    sent = [r["messages"] for r in server.requests]
    summaries = [i for i, m in enumerate(sent) if m[0]["content"] == SUMMARY_PROMPTS["CONCISE"]]
    assert summaries == [3, 6]  # each time the budget was reached again
    assert "tools" not in server.requests[3]  # a summary call is offered no tools
    assert "page 0:" in sent[3][1]["content"] and "page 1:" in sent[3][1]["content"]
    assert "page 2:" not in sent[3][1]["content"]  # the latest context is kept, not summarised
    after = sent[4]
    assert [m["content"] for m in after[:3]] == [
        "You read reports.", "Read the report.",
        "Summary of the earlier steps:\nPages read so far hold lorem ipsum."]
    assert pages_in(after) == [2]
    again = sent[6][1]["content"]  # the second folds the first summary in
    assert "(earlier) Summary of the earlier steps" in again and "page 3:" in again
    assert "page 4:" not in again
    _replays_without_calls(runner, server)


def test_none_lets_an_oversized_request_fail_as_the_provider_fails_it() -> None:
    srv = OpenAIServer(responder=reader, context_chars=2_500).start()
    try:
        runner = LocalRunner(agent(srv))
        runner.submit("s1", "Read the report.")
        runner.run_until_idle()
    finally:
        srv.stop()
    [out] = [e.payload for e in runner.outputs if isinstance(e.payload, OutputEvent)]
    assert out.error is not None and out.error.type == "ModelFailedError"
    assert "context_length_exceeded" in out.error.message
    # Two pages fit in the window; the request holding three was refused, not cut.
    assert [pages_in(r["messages"]) for r in srv.requests] == [[], [0], [0, 1], [0, 1, 2]]
