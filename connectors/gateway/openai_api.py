"""The door's OpenAI-compatible ``POST /v1/chat/completions``: any OpenAI client or chat
screen talks to a durable agent. The last user message is the session's input; the
session is the ``X-Eddies-Session`` header, else the body's ``user``, else a new one
(named in the response's ``X-Eddies-Session`` header: send it back for the next turn).
The agent keeps the conversation, not the request: earlier messages are not sent again
as input. ``"stream": true`` answers in ``chat.completion.chunk`` events, the text as the
agent's models write it (those with ``stream=True``; else the output at the end).

Example::

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="TOKEN")
    reply = client.chat.completions.create(model="support", user="alice",
                                           messages=[{"role": "user", "content": "hi"}])
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from eddies.events import OutputEvent

#: The header naming the session of a chat completion, in the request and the response.
SESSION_HEADER = "X-Eddies-Session"


class RequestError(ValueError):
    """A request the door cannot take; the message says why (HTTP 400)."""


def question(body: Any) -> str:
    """The last user message's text of a chat completion request body."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise RequestError("the body must be a JSON object with a 'messages' list")
    for message in reversed(body["messages"]):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: their texts
                return "\n".join(str(p.get("text", "")) for p in content
                                 if isinstance(p, dict) and p.get("type") == "text")
            raise RequestError("the last user message has no text content")
    raise RequestError("no message with role 'user'")


def answer_text(output: OutputEvent | dict[str, Any]) -> str:
    """An output as a chat answer's text: a string as it is, anything else as JSON."""
    value = output.output if isinstance(output, OutputEvent) else output.get("output")
    return value if isinstance(value, str) else json.dumps(value)


def completion(completion_id: str, model: str, text: str) -> dict[str, Any]:
    """A whole ``chat.completion`` answering with ``text``."""
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` server-sent event."""
    body = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    """An error in the shape OpenAI's clients read."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def streamed(events: AsyncIterator[tuple[str, dict[str, Any]]], completion_id: str,
                   model: str) -> AsyncIterator[bytes]:
    """The chunks of a streamed completion from a session's named events: the root
    agent's model text as it comes (a call made again after a crash starts on a new
    paragraph), the output's text if nothing was streamed, then the finish and ``[DONE]``."""
    yield chunk(completion_id, model, {"role": "assistant", "content": ""})
    wrote = False
    async for name, data in events:
        if name == "keep-alive":
            yield b": keep-alive\n\n"
        elif name == "delta" and not data["scope"] and data["text"]:
            text = data["text"]
            if data["restarted"] and wrote:
                text = "\n\n" + text
            wrote = True
            yield chunk(completion_id, model, {"content": text})
        elif name == "output":
            if data["error"] is not None:
                message = f"{data['error']['type']}: {data['error']['message']}"
                yield b"data: " + json.dumps(error_body(message, "agent_error")).encode() + b"\n\n"
                break
            if not wrote:
                yield chunk(completion_id, model, {"content": answer_text(data)})
            yield chunk(completion_id, model, {}, "stop")
            break
    yield b"data: [DONE]\n\n"
