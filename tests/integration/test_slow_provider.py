"""A worker against a provider that answers the way real ones do, after a second: its model
calls (litellm's acompletion) are tasks on the executor's event loop, so it holds many
more at once than it has call threads (executor_concurrency, 8)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history
from eddies.connectors.runtime.client import producer, send_input
from eddies.connectors.runtime.settings import load_settings
from eddies.events import CallKind, DurableCallResult
from tests.integration.workers import answers, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

SESSIONS = 120
DELAY_S = 1.0


def test_a_worker_holds_many_slow_model_calls_at_once(bootstrap: str, tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": 4})
    server = OpenAIServer(delay=DELAY_S).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:one_call_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        # One answered first: the worker has started and warmed up.
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), worker, log)
        prod = producer(settings)
        start = time.monotonic()
        for n in range(SESSIONS):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(30)
        wait_until(f"{SESSIONS} answers", lambda: len(answers(settings)) >= SESSIONS + 1, worker, log,
                   timeout=120)
        took = time.monotonic() - start  # (shown if the peak is short)
    finally:
        stop_worker(worker)
        server.stop()
    # With a thread per call, 8 at once: 120 calls of 1 s take 15 s and more.
    assert server.peak >= SESSIONS // 2, (server.peak, took)
    said = {a.session_id: a.payload.output for a in answers(settings)}
    assert said == {"warm": "The result is hello.",
                    **{f"s{n}": f"The result is question {n}." for n in range(SESSIONS)}}


def test_a_model_call_on_the_loop_is_cut_off_at_its_timeout(bootstrap: str, tmp_path: Path) -> None:
    """A task, unlike a thread, is stopped at its timeout_ms: the run has its TimeoutError
    long before the provider's 3 s answer, journaled as the call's outcome."""
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": 2})
    server = OpenAIServer(delay=3.0).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:impatient_one_call_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "s1", "hello")
        [out] = wait_until("the answer", lambda: answers(settings), worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    assert out.payload.error is not None and "TimeoutError" in out.payload.error.type, out.payload
    [result] = [ev.payload for _, ev in load_history(settings, "s1")
                if isinstance(ev.payload, DurableCallResult) and ev.payload.kind is CallKind.CHAT_MODEL]
    assert result.error is not None and result.error.type == "TimeoutError", result
    assert "timeout_ms=300" in result.error.message, result.error.message
