"""The worker's Prometheus endpoint on the embedded broker, scraped over HTTP while sessions
wait and after they are done: every metric of issue 11 is there with the values the test
caused (model calls through litellm at a local OpenAI-compatible server, a tool, a 429
retried, a timer, a signal wait, a failed run, a dead letter, ``ctx.metrics``); and the
worker's JSON log lines carry the ids of what they are about."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.client import producer, read_events, send_event, send_input, signal_event
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import OutputEvent
from tests.integration.metered import INPUT_COST, OUTPUT_COST
from tests.integration.sessions import sessions_on_every_partition
from tests.integration.workers import start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, app: str) -> Samples:
    """Every sample of the endpoint by (name, labels without app); all of ours are app's."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            if s.name.startswith("eddies_"):
                assert labels.pop("app") == app, s
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def value(samples: Samples, metric: str, /, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


def _when(samples: Samples, check: Callable[[Samples], bool]) -> Samples | None:
    return samples if check(samples) else None


def _json_lines(log: Path) -> list[dict[str, Any]]:
    """The worker's log lines, each a JSON object (``--log-format json``: every line is)."""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
    return lines


def test_the_metrics_endpoint_shows_what_the_worker_did(settings: Settings, tmp_path: Path) -> None:
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    app = settings.app
    names = TopicNames(app)
    worker = start_worker(settings, "tests.integration.metered:metered_agent", log,
                          TEST_OPENAI_BASE=server.base_url, EDDIES_METRICS_PORT="0",
                          EDDIES_METRICS_HOST="127.0.0.1", EDDIES_LOG_FORMAT="json")

    def outputs() -> dict[str, OutputEvent]:
        return {e.session_id: e.payload for e in read_events(settings, names.output)
                if isinstance(e.payload, OutputEvent)}

    try:
        # Port 0: the worker picked one and logged where, as JSON.
        started = wait_until("start line", lambda: [
            line for line in _json_lines(log) if line["message"].startswith("worker for app")],
            worker, log)[0]
        assert started["level"] == "INFO" and started["logger"] == "eddies.cli" and started["time"]
        url = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", started["message"])[1]  # type: ignore[index]
        assert value(scrape(url, app), "eddies_inputs_total") == 0

        chats = sessions_on_every_partition("chat", settings.partitions, 1)  # lag on each
        prod = producer(settings)
        prod.produce(names.input, b"\x00 not an event", b"junk")  # dead-lettered
        server.fail(429, headers={"Retry-After": "1"})  # one model call retried
        for i, sid in enumerate(chats):
            send_input(settings, sid, {"chat": {"a": i, "b": 40}}, prod=prod)
        send_input(settings, "failing", {"fail": "boom"}, prod=prod)
        prod.flush(30)
        wait_until("five answers", lambda: len(outputs()) >= 5, worker, log, timeout=90)

        # While a timer and a signal wait are pending.
        send_input(settings, "sleeper", {"sleep_s": 4}, prod=prod)
        send_input(settings, "waiter", {"signal": "go"}, prod=prod)
        prod.flush(30)
        during = wait_until("a pending timer and a waiting signal", lambda: _when(
            scrape(url, app), lambda s: (
            value(s, "eddies_timers_pending", kind="TIMER") == 1
            and value(s, "eddies_signals_waiting") == 1)), worker, log, timeout=30)
        assert value(during, "eddies_runs_running") == 2
        assert value(during, "eddies_runs_started_total") == 7
        send_event(settings, signal_event("waiter", "go", "yes"), "signal", prod=prod)
        prod.flush(30)
        wait_until("seven answers", lambda: len(outputs()) >= 7, worker, log, timeout=60)
        wait_until("every run ended", lambda: _when(scrape(url, app), lambda s: (
            value(s, "eddies_runs_running") == 0
            and value(s, "eddies_timers_pending", kind="TIMER") == 0)), worker, log)
        time.sleep(1.5)  # a lag sample after the last record
        done = scrape(url, app)
    finally:
        stop_worker(worker)
        server.stop()

    answers = outputs()
    assert answers["waiter"].output == "yes" and answers["sleeper"].output == "slept"
    assert answers["failing"].error is not None and answers["failing"].error.type == "ValueError"
    chat_answers = [answers[s].output for s in chats]
    assert all(isinstance(a, str) and a.startswith("The result is") for a in chat_answers)

    def v(metric: str, /, **labels: str) -> float | None:
        return value(done, metric, **labels)

    assert v("eddies_inputs_total") == 7
    assert v("eddies_runs_started_total") == 7
    assert v("eddies_runs_finished_total") == 6 and v("eddies_runs_failed_total") == 1
    assert v("eddies_run_duration_seconds_count") == 7
    assert v("eddies_run_duration_seconds_sum") >= 4.0  # type: ignore[operator]  # the sleeper's 4 s
    assert v("eddies_run_duration_seconds_bucket", le="+Inf") == 7

    # Two model calls per chat (then the tool, then the answer) and the 429.
    model_calls = len(server.requests)
    assert model_calls == 2 * len(chats) + 1
    assert v("eddies_call_duration_seconds_count", kind="CHAT_MODEL", target="llm") == model_calls
    assert v("eddies_call_duration_seconds_sum", kind="CHAT_MODEL", target="llm") > 0  # type: ignore[operator]
    assert v("eddies_call_duration_seconds_count", kind="TOOL", target="add") == len(chats)
    assert v("eddies_call_duration_seconds_count", kind="TIMER", target="") is None  # a wait, not a call
    # What the server reported (10 prompt, 5 completion tokens a reply; none for the 429).
    answered = model_calls - 1
    assert v("eddies_model_tokens_total", model="llm", type="prompt") == 10 * answered
    assert v("eddies_model_tokens_total", model="llm", type="completion") == 5 * answered
    cost = v("eddies_model_cost_usd_total", model="llm")
    assert cost == pytest.approx(answered * (10 * INPUT_COST + 5 * OUTPUT_COST))

    assert v("eddies_retries_total", kind="CHAT_MODEL") == 1
    assert v("eddies_errors_total", source="CHAT_MODEL", category="TRANSIENT",
             type="RateLimitError") == 1
    assert v("eddies_errors_total", source="RUN", category="UNCLASSIFIED", type="ValueError") == 1
    assert v("eddies_timers_pending", kind="TIMER") == 0 and v("eddies_signals_waiting") == 0
    assert v("eddies_dlq_records_total") == 1
    assert v("eddies_worker_events_total", counter="inputs") == 7
    for part in range(settings.partitions):
        assert v("eddies_consumer_lag", topic=names.input, partition=str(part)) == 0, done

    assert v("eddies_action_counter_total", action="answer", name="answers") == len(chats)
    assert v("eddies_action_observation_count", action="answer", name="answer_chars") == len(chats)
    assert v("eddies_action_observation_sum", action="answer", name="answer_chars") == sum(
        len(a) for a in chat_answers)
    assert v("process_cpu_seconds_total") is not None

    # JSON logs: the dead letter's line names the session its key names.
    [dead] = [line for line in _json_lines(log) if line["message"].startswith("dead-lettered")]
    assert dead["session_id"] == "junk" and dead["level"] == "WARNING"
