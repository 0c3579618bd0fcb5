"""An offline, deterministic chat model for tests, demos and benchmarks.

A responder function maps the conversation to the assistant's reply. The default one
calls the first offered tool once, with the arguments found in the last user message if
it is a JSON object, then answers with the tool's result; with no tools it echoes::

    model = ScriptedChatModel()
    model.chat([ChatMessage(content="hi")], model="m", tools=[])  # -> "echo: hi"
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from eddies.engine.resources import ToolSpec
from eddies.events import ChatMessage, MessageRole, ToolCall

Responder = Callable[[list[ChatMessage], list[ToolSpec]], ChatMessage | str]


def tool_then_answer(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage:
    """Default policy: one tool call if tools are offered, then an answer."""
    last = messages[-1] if messages else ChatMessage(content="")
    if last.role is MessageRole.TOOL:
        return ChatMessage(MessageRole.ASSISTANT, f"The result is {last.content}.")
    user = next((m for m in reversed(messages) if m.role is MessageRole.USER), last)
    if tools:
        try:
            args = orjson.loads(user.content)
        except orjson.JSONDecodeError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        return ChatMessage(
            MessageRole.ASSISTANT, "", [ToolCall(f"call-{len(messages)}", tools[0].name, args)]
        )
    return ChatMessage(MessageRole.ASSISTANT, f"echo: {user.content}")


class ScriptedChatModel:
    """A CHAT_MODEL_CONNECTION whose replies come from ``responder``; counts its calls.
    It streams (a setup with ``stream=True``): word by word, ``word_delay`` seconds apart,
    so a demo shows an answer being written."""

    #: Its calls stream when their setup asks (``ChatModelSetup(stream=True)``).
    streams = True

    def __init__(self, responder: Responder | None = None, word_delay: float = 0.0) -> None:
        self.responder: Responder = responder or tool_then_answer
        self.word_delay = word_delay
        self.calls = 0

    def chat(
        self, messages: list[ChatMessage], *, model: str = "", tools: list[ToolSpec] | None = None,
        deltas: Any = None, **arguments: Any,
    ) -> ChatMessage:
        """Reply to ``messages``; usage is a fixed estimate (25 tokens per message in, the
        reply's characters / 4 out), so token budgets can be tested. ``deltas``: the reply
        is written there first, a word at a time."""
        self.calls += 1
        reply = self.responder(messages, list(tools or ()))
        if isinstance(reply, str):
            reply = ChatMessage(MessageRole.ASSISTANT, reply)
        if deltas is not None:
            self._stream(reply, deltas)
        reply.extra_args.setdefault(
            "usage",
            {"prompt_tokens": 25 * len(messages), "completion_tokens": len(reply.content) // 4 + 1},
        )
        return reply

    def _stream(self, reply: ChatMessage, deltas: Any) -> None:
        for i, word in enumerate(reply.content.split(" ") if reply.content else []):
            if i and self.word_delay:
                time.sleep(self.word_delay)
            deltas.text(word if i == 0 else " " + word)
        for i, call in enumerate(reply.tool_calls):
            deltas.tool_call(i, call.id, call.name, orjson.dumps(call.arguments).decode())

    def count_tokens(self, messages: list[ChatMessage], *, model: str = "",
                     tools: list[ToolSpec] | None = None) -> int:
        """A fixed estimate, so token budgets can be tested: 4 tokens per message and one
        per 4 characters of its content and tool calls."""
        total = 0
        for m in messages:
            chars = len(m.content) + sum(len(c.name) + len(orjson.dumps(c.arguments)) for c in m.tool_calls)
            total += 4 + chars // 4
        return total
