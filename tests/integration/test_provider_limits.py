"""Provider limits declared on a model connection hold for the fleet: each worker takes the
share of them its partitions are of the app's; a call over a limit waits, in order, before
it starts (the trace says how long), or past ``max_wait_s`` goes to the setup's fallback."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from eddies.connectors.runtime.client import producer, send_input
from eddies.connectors.runtime.settings import load_settings
from tests.integration.workers import answers, eddies_command, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

# Rates and fault schedules in seconds: run alone (make pytest runs the serial ones last).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

AGENT = "tests.integration.provider_agents:limited_agent"


def _busiest_second(arrived: list[float]) -> int:
    """The most requests that arrived within any one second."""
    return max(sum(1 for t in arrived[i:] if t < start + 1.0) for i, start in enumerate(arrived))


def test_one_worker_keeps_to_the_requests_per_minute_and_the_trace_shows_the_wait(
        bootstrap: str, tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": 4})
    server = OpenAIServer(delay=0.2).start()
    env = {"TEST_OPENAI_BASE": server.base_url, "TEST_LIMITS": json.dumps({"requests_per_minute": 1200})}
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, **env)
    try:
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), worker, log)
        first = len(server.arrived)
        prod = producer(settings)
        for n in range(60):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(30)
        wait_until("60 answers", lambda: len(answers(settings)) >= 61, worker, log, timeout=60)
    finally:
        stop_worker(worker)
        server.stop()
    arrived = server.arrived[first:]
    assert len(arrived) == 60
    # 20 a second, spaced: the 60 calls over 59 gaps of 50 ms, never more than 21 in a second.
    assert arrived[-1] - arrived[0] >= 59 * 0.05 * 0.95, arrived[-1] - arrived[0]
    assert _busiest_second(arrived) <= 21
    said = {a.session_id: a.payload.output for a in answers(settings)}
    assert all(said[f"s{n}"] == f"The result is question {n}." for n in range(60))
    traces = [eddies_command(settings, "trace", "--session", f"s{n}", env=env) for n in (57, 58, 59)]
    assert any("for its provider" in t.stdout for t in traces), [t.stdout for t in traces]


def test_two_workers_share_the_limit_by_their_partitions(bootstrap: str, tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": 4})
    server = OpenAIServer(delay=0.2).start()
    env = {"TEST_OPENAI_BASE": server.base_url, "TEST_LIMITS": json.dumps({"requests_per_minute": 1200})}
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [start_worker(settings, AGENT, logs[0], **env)]
    try:
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), workers[0], logs[0])
        workers.append(start_worker(settings, AGENT, logs[1], EDDIES_LOG_LEVEL="INFO", **env))
        wait_until("the second worker's partitions",
                   lambda: "orchestrator assigned partitions" in logs[1].read_text(), workers[1], logs[1])
        time.sleep(2)  # the group settled
        first = len(server.arrived)
        prod = producer(settings)
        for n in range(80):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(30)
        wait_until("80 answers", lambda: len(answers(settings)) >= 81, workers[0], logs[0], timeout=90)
    finally:
        for w in workers:
            stop_worker(w)
        server.stop()
    arrived = server.arrived[first:]
    assert len(arrived) == 80
    # Each worker 10 a second (half the partitions): the fleet within 20 (+1 each), and
    # 80 calls take 4 s at least.
    assert _busiest_second(arrived) <= 22, _busiest_second(arrived)
    assert arrived[-1] - arrived[0] >= 3.5, arrived[-1] - arrived[0]


def test_a_call_over_its_limit_past_max_wait_goes_to_the_fallback(bootstrap: str, tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": 2})
    primary, spare = OpenAIServer(delay=2.0).start(), OpenAIServer().start()
    env = {"TEST_OPENAI_BASE": primary.base_url, "TEST_FALLBACK_BASE": spare.base_url,
           "TEST_LIMITS": json.dumps({"calls_at_once": 1, "max_wait_s": 0.3})}
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, **env)
    try:
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), worker, log)
        prod = producer(settings)
        for n in range(3):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(10)
        wait_until("3 answers", lambda: len(answers(settings)) >= 4, worker, log)
        traces = {n: eddies_command(settings, "trace", "--session", f"s{n}", env=env).stdout
                  for n in range(3)}
    finally:
        stop_worker(worker)
        primary.stop()
        spare.stop()
    # The primary holds one call at a time: one of the three is its; the two that waited
    # 0.3 s for its place were answered by the fallback, not made on the primary.
    assert (len(primary.requests), len(spare.requests)) == (2, 2)  # (with the warm-up's)
    said = {a.session_id: a.payload.output for a in answers(settings)}
    assert all(said[f"s{n}"] == f"The result is question {n}." for n in range(3))
    fell_back = [n for n, t in traces.items() if "model backup -> OK" in t]
    assert len(fell_back) == 2, traces
    assert all("ProviderBusyError" in traces[n] or "model llm -> ERROR" in traces[n] for n in fell_back)
