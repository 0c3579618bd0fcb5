"""The error policy against a model reached through litellm over real HTTP: a 429 with
Retry-After is retried after that delay and then succeeds; a 401 is not retried. In the
LocalRunner (logical time) and in the Kafka worker on the embedded broker (real time)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from eddies import LocalRunner
from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.demo import calculator_agent
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    OutputEvent,
)
from tests.integration.workers import start_worker, stop_worker
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def _model_results(history: list[AgentEvent]) -> list[DurableCallResult]:
    return [e.payload for e in history if isinstance(e.payload, DurableCallResult)
            and e.payload.kind is CallKind.CHAT_MODEL]


def test_local_runner_retries_a_429_after_its_retry_after_and_not_a_401() -> None:
    server = OpenAIServer().start()
    try:
        agent = calculator_agent(LiteLLMChatModel(api_base=server.base_url, api_key="test"),
                                 model_name="openai/test-model", tools=False)
        runner = LocalRunner(agent)
        server.fail(429, headers={"Retry-After": "2"})
        runner.submit("s1", '{"a": 1, "b": 2}', timestamp=1_000)
        runner.run_until_idle()
        assert len(server.requests) == 2 and runner.outputs_for("s1")
        first, second = _model_results(runner.history)
        assert first.status is CallStatus.ERROR and first.error is not None
        assert (first.error.category, first.error.http_status, first.error.retry_after_ms) == (
            ErrorCategory.TRANSIENT, 429, 2_000)
        assert second.status is CallStatus.OK and second.attempt == 2
        [retry] = [e.payload for e in runner.history if isinstance(e.payload, DurableCallRequest)
                   and e.payload.attempt == 2]
        assert retry.not_before is not None and retry.not_before >= 1_000 + 2_000

        server.fail(401)
        runner.submit("s2", '{"a": 1, "b": 2}')
        runner.run_until_idle()
        assert len(server.requests) == 3  # once: a 401 is not retried
        [failed] = [e.payload for e in runner.outputs if e.session_id == "s2"]
        assert isinstance(failed, OutputEvent) and failed.error is not None
        assert "AuthenticationError" in failed.error.message
    finally:
        server.stop()


def test_worker_retries_a_429_after_its_retry_after_and_not_a_401(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:http_calculator", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        server.fail(429, headers={"Retry-After": "2"})
        sent = time.monotonic()
        send_input(settings, "limited", '{"a": 20, "b": 22}')
        outputs = _wait_outputs(settings, 1, worker, log)
        took = time.monotonic() - sent
        server.fail(401)
        send_input(settings, "denied", '{"a": 1, "b": 1}')
        outputs = _wait_outputs(settings, 2, worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    by_session = {e.session_id: e.payload for e in outputs}
    limited, denied = by_session["limited"], by_session["denied"]
    assert isinstance(limited, OutputEvent) and limited.error is None, limited
    assert took >= 2.0, f"answered {took:.2f} s after the prompt: the Retry-After was not waited"
    assert isinstance(denied, OutputEvent) and denied.error is not None
    assert "AuthenticationError" in denied.error.message
    # Three model requests for "limited" (429, then the two of the tool loop) and one for
    # "denied": the 401 was not asked again.
    assert len(server.requests) == 4, len(server.requests)
    from tests.integration.agents import http_calculator

    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    plan = AgentPlan.compile(http_calculator())
    for s in ("limited", "denied"):
        history = load_history(settings, s)
        assert replay(plan, history, s).ok
    attempts = [r.attempt for _, e in load_history(settings, "limited")
                if isinstance((r := e.payload), DurableCallResult) and r.kind is CallKind.CHAT_MODEL]
    assert attempts == [1, 2, 1]


def _wait_outputs(settings: Settings, count: int, proc: subprocess.Popen[bytes],
                  log: Path) -> list[AgentEvent]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        got = {e.event_id: e for e in read_events(settings, TopicNames(settings.app).output)}
        if len(got) >= count:
            return list(got.values())
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} answers; worker log: {log.read_text()[-3000:]}")


def test_worker_abandons_a_slow_call_at_its_timeout_retries_it_and_ends_a_run_at_its_deadline(
        settings: Settings, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    effects = tmp_path / "effects.log"
    worker = start_worker(settings, "tests.integration.agents:Deadlines", log,
                          TEST_EFFECTS=str(effects))
    try:
        send_input(settings, "slow", {"slow": "k1"})
        send_input(settings, "stuck", {"sleep_s": 30})
        outputs = _wait_outputs(settings, 2, worker, log)
    finally:
        stop_worker(worker)
    by_session = {e.session_id: e.payload for e in outputs}
    slow, stuck = by_session["slow"], by_session["stuck"]
    assert isinstance(slow, OutputEvent) and slow.output == "done k1", slow
    # Two executions: the first abandoned at 1 s (it slept 3), the retry quick.
    assert effects.read_text().count("slow k1 ") == 2
    results = [e.payload for _, e in load_history(settings, "slow")
               if isinstance(e.payload, DurableCallResult) and e.payload.kind is CallKind.FUNCTION]
    assert [(r.status, r.attempt) for r in results] == [(CallStatus.ERROR, 1), (CallStatus.OK, 2)]
    assert results[0].error is not None and results[0].error.type == "TimeoutError"
    assert isinstance(stuck, OutputEvent) and stuck.error is not None
    assert stuck.error.type == "RunDeadlineError" and "request_timeout_ms=6000" in stuck.error.message
    from tests.integration.agents import Deadlines

    plan = AgentPlan.compile(Deadlines())
    for s in ("slow", "stuck"):
        assert replay(plan, load_history(settings, s), s).ok
