"""The personal-data guardrail on a worker (issue 57): a customer's e-mail and card number,
in the input and in a tool's result, never reach the provider (a local OpenAI-compatible
server that keeps every request it gets) nor APP.events; the answer goes out masked;
APP.input keeps what its producer wrote; the worker's metrics count what was redacted,
by kind, and never show it."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import DurableCallResult, InputEvent
from tests.integration.tool_servers import free_port
from tests.integration.workers import answers, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

AGENT = "tests.integration.provider_agents:support_agent"
SECRETS = ("ann.lee@example.com", "4111 1111 1111 1111", "4111111111111111", "5555 5555 5555 4444")


def _support(body: dict[str, Any]) -> dict[str, Any]:
    """Looks the order up, then answers with what it read (the record included)."""
    messages = body["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "customer_record", "arguments": json.dumps({"order": "o-17"})}}]}
    record = json.loads(results[0]["content"])
    asked = next(m["content"] for m in messages if m["role"] == "user")
    said = f"Refunded {record['customer']} ({record['email']}, card {record['card']})."
    return {"role": "assistant", "content": f"{said} You said: {asked}"}


def test_a_customers_data_reaches_neither_the_provider_nor_the_history(
        settings: Settings, tmp_path: Path) -> None:
    server = OpenAIServer(responder=_support).start()
    log = tmp_path / "worker.log"
    port = free_port()
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url,
                          args=("--metrics-port", str(port), "--metrics-host", "127.0.0.1"))
    try:
        send_input(settings, "cust-1", "I am ann.lee@example.com; card 4111 1111 1111 1111 was charged twice")
        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=90)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as got:
            metrics = got.read().decode()
    finally:
        stop_worker(worker)
        server.stop()
    assert out.payload.output == ("Refunded Ann Lee ([email], card [card]). You said: I am [email]; "
                                  "card [card] was charged twice")
    sent = json.dumps(server.requests)
    assert len(server.requests) == 2 and not any(s in sent for s in SECRETS), sent
    assert "[email]" in sent and "[card]" in sent  # what it was sent instead
    names = TopicNames(settings.app)
    history = [repr(e.payload) for e in read_events(settings, names.events)]
    assert history and not any(s in h for s in SECRETS for h in history)
    # The input topic keeps what its producer wrote (give it a short retention if need be);
    # the calls' results an executor writes there were masked before they were written.
    inputs = list(read_events(settings, names.input))
    [raw] = [e.payload.input for e in inputs if isinstance(e.payload, InputEvent)]
    assert "4111 1111 1111 1111" in raw
    results = [repr(e.payload) for e in inputs if isinstance(e.payload, DurableCallResult)]
    assert len(results) == 3 and not any(s in r for s in SECRETS for r in results), results
    # Counted: the input's e-mail and card (at admission), the record's (by the executor
    # that made the call); nothing else held any. Counts only, never what was found.
    counted = {m["name"]: float(m["n"]) for m in re.finditer(
        r'eddies_hook_counter_total\{[^}]*hook="pii",name="(?P<name>\w+)"\} (?P<n>[\d.]+)', metrics)}
    assert counted == {"email": 2.0, "card": 2.0}, metrics
    assert not any(s in metrics for s in SECRETS)


def _judged(body: dict[str, Any]) -> dict[str, Any]:
    """The support model (promises a refund until told it may not) and its judge."""
    messages = body["messages"]
    if body["model"] == "judge-model":
        said = messages[-1]["content"]
        return {"role": "assistant", "content": "FAIL: it promises a refund" if "promise" in said else "PASS"}
    if not [m for m in messages if m["role"] == "tool"]:
        return _support(body)
    told = any("cannot be given" in str(m["content"]) for m in messages if m["role"] == "user")
    return {"role": "assistant", "content": "We are looking into it." if told else "I promise a refund."}


def test_a_guard_model_sends_an_answer_back_once_through_the_provider(
        settings: Settings, tmp_path: Path) -> None:
    """The judge is asked over litellm like any model, after the masks: it never reads the
    customer's data either; the answer it failed goes back once, the second goes out."""
    server = OpenAIServer(responder=_judged).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.provider_agents:judged_support_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "cust-2", "I am ann.lee@example.com, where is my refund?")
        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=90)
    finally:
        stop_worker(worker)
        server.stop()
    assert out.payload.output == "We are looking into it."
    models = [r["model"] for r in server.requests]
    assert models == ["test-model", "test-model", "judge-model", "test-model", "judge-model"], models
    judged = [r["messages"][-1]["content"] for r in server.requests if r["model"] == "judge-model"]
    assert judged == ["I promise a refund.", "We are looking into it."]
    sent = json.dumps(server.requests)
    assert not any(s in sent for s in SECRETS), sent
