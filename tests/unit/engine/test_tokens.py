"""ReActAgent's token budget on the LocalRunner with the scripted model (which counts 4
tokens a message plus one per 4 characters): TRIM drops whole turns, oldest first, and
the loop's own conversation shrinks with it; SUMMARIZE replaces the older turns by a
durable summary call; too little to trim or summarise is sent as is; replays call
nothing. The same over real HTTP with litellm's counter: tests/integration/test_tokens.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eddies import ChatModelSetup, LocalRunner, ReActAgent, ReActOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import PlanError
from eddies.engine.tokens import SUMMARY_PROMPTS, split, summarised
from eddies.events import CallKind, ChatMessage, DurableCallRequest, MessageRole, ToolCall

PAGE = "x" * 400  # its JSON result is 402 characters: 104 tokens as a tool message


def page(n: int) -> str:
    """Read page n."""
    return PAGE


class Reader:
    """Reads pages 0..pages-1, one per model call, then answers; records what it was sent."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.read = 0
        self.seen: list[list[ChatMessage]] = []
        self.summaries: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        if messages[0].content in SUMMARY_PROMPTS.values():
            self.summaries.append(messages)
            return ChatMessage(MessageRole.ASSISTANT, "pages read so far: all x")
        self.seen.append(messages)
        if self.read < self.pages:
            self.read += 1
            return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall(f"c{self.read}", "page",
                                                                    {"n": self.read - 1})])
        return ChatMessage(MessageRole.ASSISTANT, f"read {self.read} pages")


def pages_in(messages: list[ChatMessage]) -> list[int]:
    return [c.arguments["n"] for m in messages for c in m.tool_calls]


def reader_agent(reader: Reader, **options: Any) -> ReActAgent:
    a = ReActAgent("reader", model="llm", prompt="You read pages.",
                   options=ReActOptions(**options))
    a.add_resource("page", ResourceType.TOOL, page)
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(reader))
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["page"]))
    return a


def _replays(runner: LocalRunner) -> None:
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == "s1"]
    assert replay(runner.plan, history, "s1").ok


def _requests(runner: LocalRunner) -> list[list[dict[str, Any]]]:
    """The messages of each chat call as the loop asked it (before the executor's cut)."""
    return [json.loads(p.args)["kwargs"]["messages"] for e in runner.history
            if isinstance(p := e.payload, DurableCallRequest) and p.kind is CallKind.CHAT_MODEL]


def test_trim_drops_the_oldest_turns_and_keeps_the_prompt_and_the_latest_context() -> None:
    # Head (system + user) is 12 tokens, a turn (a call and its page) 110: two turns fit
    # in 300, three do not.
    reader = Reader(pages=5)
    runner = LocalRunner(reader_agent(reader, tokens_management_strategy="TRIM", max_tokens_threshold=300))
    assert runner.run([("s1", "read")]) == ["read 5 pages"]
    assert [pages_in(m) for m in reader.seen] == [[], [0], [0, 1], [1, 2], [2, 3], [3, 4]]
    for sent in reader.seen:
        assert [m.content for m in sent[:2]] == ["You read pages.", "read"]
        assert ScriptedChatModel().count_tokens(sent) <= 300
    # The loop dropped what the executor dropped: its own conversation does not grow.
    assert [pages_in([ChatMessage(**{**m, "tool_calls": [ToolCall(**c) for c in m["tool_calls"]]})
                      for m in req]) for req in _requests(runner)] == [[], [0], [0, 1], [0, 1, 2],
                                                                       [1, 2, 3], [2, 3, 4]]
    _replays(runner)


def test_trim_sends_the_latest_context_as_is_when_it_alone_is_over() -> None:
    reader = Reader(pages=2)
    runner = LocalRunner(reader_agent(reader, tokens_management_strategy="TRIM", max_tokens_threshold=100))
    assert runner.run([("s1", "read")]) == ["read 2 pages"]
    # 122 tokens with one turn: nothing before it to drop, so it goes as is.
    assert [pages_in(m) for m in reader.seen] == [[], [0], [1]]


def test_summarize_replaces_the_older_turns_by_a_durable_summary() -> None:
    reader = Reader(pages=5)
    runner = LocalRunner(reader_agent(reader, tokens_management_strategy="SUMMARIZE",
                                      max_tokens_threshold=300, summarization_prompt="STRUCTURED"))
    assert runner.run([("s1", "read")]) == ["read 5 pages"]
    [asked, again] = reader.summaries
    assert asked[0].content == SUMMARY_PROMPTS["STRUCTURED"] and asked[0].role is MessageRole.SYSTEM
    assert '"n": 0' in asked[1].content and '"n": 1' in asked[1].content  # the turns it replaces
    assert '"n": 2' not in asked[1].content  # not the latest context
    assert "(earlier) Summary of the earlier steps:" in again[1].content  # folds the old one in
    after = reader.seen[3]
    assert [m.content for m in after[:2]] == ["You read pages.", "read"]
    assert after[2].content == "Summary of the earlier steps:\npages read so far: all x"
    assert pages_in(after) == [2]
    assert [pages_in(m) for m in reader.seen] == [[], [0], [0, 1], [2], [2, 3], [4]]
    assert '"n": 3' in again[1].content and '"n": 4' not in again[1].content
    summary_calls = [r for r in _requests(runner) if r[0]["content"] == SUMMARY_PROMPTS["STRUCTURED"]]
    assert len(summary_calls) == 2  # each a durable call of its own, journaled
    calls = reader.read
    _replays(runner)
    assert reader.read == calls


def test_summarize_sends_as_is_when_there_is_too_little_to_summarise() -> None:
    reader = Reader(pages=1)
    runner = LocalRunner(reader_agent(reader, tokens_management_strategy="SUMMARIZE",
                                      max_tokens_threshold=50))
    assert runner.run([("s1", "read")]) == ["read 1 pages"]
    assert reader.summaries == []
    assert [pages_in(m) for m in reader.seen] == [[], [0]]


def test_a_history_splits_into_head_turns_and_latest_context() -> None:
    sys_, user = ChatMessage(MessageRole.SYSTEM, "s"), ChatMessage(MessageRole.USER, "u")
    call = ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("a", "t", {})])
    result = ChatMessage(MessageRole.TOOL, "r", [], "a")
    history = [sys_, user, call, result, result, call, result]
    assert split(history) == (2, [2, 5])
    assert split([sys_, user]) == (2, [])
    shorter = summarised(history, "done")
    assert split(shorter) == (3, [3])  # the summary joins the head
    assert shorter[3:] == [call, result]


def test_a_budget_needs_a_connection_that_counts_tokens() -> None:
    class Plain:
        def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
            return ChatMessage(MessageRole.ASSISTANT, "hi")

    a = ReActAgent("reader", model="llm", options=ReActOptions(tokens_management_strategy="TRIM"))
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, Plain())
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    with pytest.raises(PlanError, match="TRIM needs a connection that counts tokens; 'conn' .Plain. has no "
                                        "count_tokens method"):
        LocalRunner(a)
