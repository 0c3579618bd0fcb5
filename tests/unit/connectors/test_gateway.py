"""The HTTP door's pure parts: tokens and their prefixes, an idempotency key's event id,
a chat request's question, and a streamed completion's chunks from a session's events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from eddies.connectors.gateway.openai_api import RequestError, question, streamed
from eddies.connectors.gateway.sending import idempotent_id
from eddies.connectors.gateway.tokens import Tokens
from eddies.connectors.runtime.settings import ConfigError


def test_tokens_reach_every_session_or_those_of_their_prefix() -> None:
    tokens = Tokens.parse(" s3cret , acme-key=acme- ,")
    assert tokens and tokens.prefixes == {"s3cret": "", "acme-key": "acme-"}
    assert tokens.allows("s3cret", "anyone") and tokens.allows("acme-key", "acme-7")
    assert not tokens.allows("acme-key", "other") and not tokens.allows("nope", "acme-7")
    assert not tokens.allows(None, "x") and not Tokens.parse("")
    with pytest.raises(ConfigError, match="EDDIES_SERVE_TOKENS: an entry has no token"):
        Tokens.parse("=acme-", where="EDDIES_SERVE_TOKENS")


def test_a_token_may_prove_who_asks() -> None:
    from eddies.events import Identity

    tokens = Tokens.parse("s3cret, acme-key=acme-;user=ann;tenant=acme, bob-key;user=bob")
    assert tokens.identity("acme-key") == Identity("ann", "acme") and tokens.allows("acme-key", "acme-1")
    assert tokens.identity("bob-key") == Identity("bob") and tokens.allows("bob-key", "any")
    assert tokens.identity("s3cret") is None and tokens.identity("nope") is None
    for bad, said in [("k;tenant=acme", "a tenant needs a user"), ("k;role=admin", "'role' is not user=USER"),
                      ("k;user=", "'user' is not user=USER")]:
        with pytest.raises(ConfigError, match=said) as caught:
            Tokens.parse(bad, where="EDDIES_SERVE_TOKENS")
        assert "k;" not in str(caught.value)  # the entry holds the token: never shown


def test_an_idempotency_key_gives_one_event_id_per_session() -> None:
    assert idempotent_id("s1", "k") == idempotent_id("s1", "k") != idempotent_id("s2", "k")
    assert idempotent_id("s1", "k") != idempotent_id("s1", "k2")


def test_the_question_is_the_last_user_messages_text() -> None:
    body = {"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                         {"role": "user", "content": [{"type": "text", "text": "second"},
                                                      {"type": "image_url", "image_url": {}}]}]}
    assert question(body) == "second"
    for bad, why in (({}, "'messages' list"), ({"messages": [{"role": "system", "content": "x"}]},
                                                "no message with role 'user'")):
        with pytest.raises(RequestError, match=why):
            question(bad)


async def _events(items: list[tuple[str, dict[str, Any]]]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    for item in items:
        yield item


def _chunks(items: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def collect() -> list[bytes]:
        return [c async for c in streamed(_events(items), "chatcmpl-1", "m")]

    out = []
    for raw in asyncio.run(collect()):
        assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
        text = raw[6:-2].decode()
        out.append(text if text == "[DONE]" else json.loads(text))
    return out


def _delta(text: str, scope: list[str] | None = None, restarted: bool = False) -> tuple[str, dict[str, Any]]:
    return "delta", {"text": text, "scope": scope or [], "restarted": restarted}


def test_a_streamed_completion_sends_the_root_models_text_then_stops() -> None:
    out = _chunks([_delta("Hel"), _delta("sub", scope=["helper@c1"]), ("progress", {}), _delta("lo"),
                   _delta("Hi", restarted=True), ("output", {"output": "Hi", "error": None})])
    assert out[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"].get("content") for c in out[1:-2]]
    assert texts == ["Hel", "lo", "\n\nHi"]  # a sub-agent's text is its own; a restart: a new paragraph
    assert out[-2]["choices"][0]["finish_reason"] == "stop" and out[-1] == "[DONE]"


def test_a_completion_that_streamed_nothing_sends_the_output_and_a_failed_run_an_error() -> None:
    out = _chunks([("output", {"output": {"total": 3}, "error": None})])
    assert out[1]["choices"][0]["delta"]["content"] == '{"total": 3}'
    failed = _chunks([("output", {"output": None, "error": {"type": "MaxIterationsError", "message": "20"}})])
    assert failed[1]["error"]["type"] == "agent_error"
    assert "MaxIterationsError: 20" in failed[1]["error"]["message"]
    assert failed[-1] == "[DONE]"
