"""The worker's Prometheus metrics without a broker: runs counted and timed around the
session machine, errors and retries from what it emits, ctx.metrics through its sink,
model calls' tokens and cost, consumer lag, the settings and the optional package."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.execution.calls import result_event
from eddies.connectors.execution.held_requests import HeldRequests
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.settings import ConfigError, load_settings
from eddies.engine import SessionMachine, SessionState
from eddies.engine.embeddings import embedding_value
from eddies.events import (
    AgentEvent,
    CallKind,
    CallStatus,
    ChatMessage,
    DurableCallRequest,
    DurableCallResult,
    ErrorCategory,
    ErrorInfo,
)

pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from eddies.connectors.observability.prometheus import WorkerMetrics

ROOT = Path(__file__).resolve().parents[3]


def samples(metrics: WorkerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            if s.name.startswith("eddies_"):
                assert labels.pop("app") == "app1"
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def value(metrics: WorkerMetrics, metric: str, /, **labels: str) -> float | None:
    return samples(metrics).get((metric, frozenset(labels.items())))


class Napper(Agent):
    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        ctx.metrics.inc("inputs", 2)
        ctx.metrics.observe("size", len(event.input))
        if event.input == "nap":
            ctx.sleep(10)
        ctx.send_event(OutputEvent(output=event.input))


class Runner:
    """A session machine with the metrics wired as the orchestrator wires them."""

    def __init__(self) -> None:
        self.metrics = WorkerMetrics("app1", Counters())
        self.machine = SessionMachine(Napper(), self.metrics.action_metric)
        self.states: dict[str, SessionState] = {}
        self.metrics.watch_sessions(self.machine.stats, self.states)
        self.requests: dict[str, AgentEvent] = {}

    def apply(self, ev: AgentEvent) -> None:
        sid = ev.session_id
        state = self.states.get(sid) or self.machine.new_state(sid)
        before = self.metrics.before_apply(self.states.get(sid))
        state, emitted = self.machine.apply(state, ev)
        self.metrics.after_apply(sid, state, before)
        self.metrics.emitted(emitted)
        self.states[sid] = state
        for e in emitted:
            if isinstance(e.payload, DurableCallRequest):
                self.requests[sid] = e

    def give(self, sid: str, text: str, n: int) -> None:
        self.apply(AgentEvent.external(sid, InputEvent(text), event_id=f"{sid}-{n}", timestamp=n))

    def wake(self, sid: str) -> None:
        self.apply(result_event(self.requests.pop(sid), CallStatus.OK))


def test_runs_are_counted_and_timed_around_the_machine() -> None:
    r = Runner()
    m = r.metrics
    r.give("quick", "now", 1)  # starts and ends within one record
    r.give("slow", "nap", 2)  # starts, waits on its timer
    assert value(m, "eddies_runs_started_total") == 2
    assert value(m, "eddies_run_duration_seconds_count") == 1
    assert value(m, "eddies_runs_running") == 1 and value(m, "eddies_sessions") == 2
    r.wake("slow")
    assert value(m, "eddies_run_duration_seconds_count") == 2
    # A run that ends lets the queued input's run start and end within the same record.
    r.give("queue", "nap", 3)
    r.give("queue", "now", 4)
    assert value(m, "eddies_runs_started_total") == 3
    r.wake("queue")
    assert value(m, "eddies_runs_started_total") == 4
    assert value(m, "eddies_run_duration_seconds_count") == 4
    assert value(m, "eddies_runs_finished_total") == 4 and value(m, "eddies_runs_failed_total") == 0
    assert value(m, "eddies_inputs_total") == 4 and value(m, "eddies_runs_running") == 0
    # ctx.metrics of the action, by action and name, never by session.
    assert value(m, "eddies_action_counter_total", action="go", name="inputs") == 8
    assert value(m, "eddies_action_observation_count", action="go", name="size") == 4
    assert value(m, "eddies_action_observation_sum", action="go", name="size") == 12
    assert not [k for k in samples(m) if any(label == "session_id" for label, _ in k[1])]


def test_a_moved_session_leaves_no_start_time_behind() -> None:
    r = Runner()
    r.give("slow", "nap", 1)
    r.metrics.forget(["slow"])
    r.wake("slow")  # ended here after all (say, restored): counted, not timed
    assert value(r.metrics, "eddies_runs_finished_total") == 1
    assert value(r.metrics, "eddies_run_duration_seconds_count") == 0


def test_failed_outcomes_failed_runs_and_retries_are_counted() -> None:
    m = WorkerMetrics("app1", Counters())
    limited = ErrorInfo("RateLimitError", "429", True, ErrorCategory.TRANSIENT, 429, 1000)
    events = [
        AgentEvent.external("s", DurableCallResult("s:r1:i1:c0", CallKind.CHAT_MODEL, CallStatus.ERROR,
                                                   error=limited), event_id="a", timestamp=0),
        AgentEvent.external("s", DurableCallRequest("s:r1:i1:c0", CallKind.CHAT_MODEL, "llm",
                                                    attempt=2), event_id="b", timestamp=0),
        AgentEvent.external("s", DurableCallRequest("s:r1:i1:c1", CallKind.TOOL, "add"),
                            event_id="c", timestamp=0),
        AgentEvent.external("s", OutputEvent(None, ErrorInfo("BudgetExceededError", "over",
                                                             category=ErrorCategory.PERMANENT)),
                            event_id="d", timestamp=0),
        AgentEvent.external("s", OutputEvent("fine"), event_id="e", timestamp=0),
    ]
    m.emitted(events)
    m.emitted(events[:2])
    assert value(m, "eddies_errors_total", source="CHAT_MODEL", category="TRANSIENT",
                 type="RateLimitError") == 2
    assert value(m, "eddies_errors_total", source="RUN", category="PERMANENT",
                 type="BudgetExceededError") == 1
    assert value(m, "eddies_retries_total", kind="CHAT_MODEL") == 2
    assert value(m, "eddies_retries_total", kind="TOOL") is None  # a first attempt


def test_model_calls_report_latency_tokens_and_cost_by_model() -> None:
    m = WorkerMetrics("app1", Counters())
    reply = ChatMessage(content="hi", extra_args={"usage": {
        "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.25, "latency_ms": 7}})
    model = DurableCallRequest("s:r1:i1:c0", CallKind.CHAT_MODEL, "llm")
    m.call_performed(model, 0.5, reply)
    m.call_performed(model, 1.5, None)  # raised: timed, nothing spent
    m.call_performed(model, 0.1, ChatMessage(extra_args={"usage": {"prompt_tokens": 1,
                                                                   "cost_usd": None}}))
    m.call_performed(DurableCallRequest("s:r1:i1:c1", CallKind.TOOL, "add"), 0.01, 3)
    m.call_performed(DurableCallRequest("s:r1:i1:c2", CallKind.TIMER, ""), 60.0, None)
    assert value(m, "eddies_call_duration_seconds_count", kind="CHAT_MODEL", target="llm") == 3
    assert value(m, "eddies_call_duration_seconds_sum", kind="CHAT_MODEL", target="llm") == 2.1
    assert value(m, "eddies_call_duration_seconds_bucket", kind="TOOL", target="add", le="0.01") == 1
    assert value(m, "eddies_call_duration_seconds_count", kind="TIMER", target="") is None
    assert value(m, "eddies_model_tokens_total", model="llm", type="prompt") == 11
    assert value(m, "eddies_model_tokens_total", model="llm", type="completion") == 5
    assert value(m, "eddies_model_cost_usd_total", model="llm") == 0.25


def test_embedding_calls_report_tokens_and_cost_by_model() -> None:
    m = WorkerMetrics("app1", Counters())
    req = DurableCallRequest("s:r1:i1:c0", CallKind.EMBEDDING, "emb")
    m.call_performed(req, 0.02, embedding_value([[0.1, 0.2]], {"prompt_tokens": 7, "cost_usd": 0.5}))
    m.call_performed(req, 0.02, None)  # raised: timed, nothing spent
    assert value(m, "eddies_model_tokens_total", model="emb", type="prompt") == 7
    assert value(m, "eddies_model_cost_usd_total", model="emb") == 0.5
    assert value(m, "eddies_call_duration_seconds_count", kind="EMBEDDING", target="emb") == 2


class FakeConsumer:
    def __init__(self, high: dict[int, int], position: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        self.tp = TopicPartition
        self.high, self.pos = high, position
        self.closed = False

    def assignment(self) -> list[Any]:
        if self.closed:
            raise RuntimeError("Consumer closed")
        return [self.tp("app1.input", p) for p in self.high] + [self.tp("other", 0)]

    def get_watermark_offsets(self, tp: Any, cached: bool = False) -> tuple[int, int]:
        assert cached, "a queried end offset is wrong on the embedded broker"
        return -1001, self.high[tp.partition]

    def position(self, tps: list[Any]) -> list[Any]:
        return [self.tp(tp.topic, tp.partition, self.pos.get(tp.partition, -1001)) for tp in tps]


def test_consumer_lag_is_the_high_watermark_minus_the_next_offset_to_apply() -> None:
    m = WorkerMetrics("app1", Counters())
    consumer = FakeConsumer(high={0: 10, 1: 4, 2: -1001, 3: 8}, position={1: 3})
    m.sample_lag(consumer, "app1.input", {0: 7})
    lag = {dict(k[1])["partition"]: v for k, v in samples(m).items() if k[0] == "eddies_consumer_lag"}
    # 0: applied up to 7; 1: from its position; 2: no fetch yet; 3: no position yet.
    assert lag == {"0": 3, "1": 1}
    consumer.closed = True
    m.sample_lag(consumer, "app1.input", {0: 10})  # stopping: the last sample stays
    assert value(m, "eddies_consumer_lag", topic="app1.input", partition="0") == 3


def test_timers_pending_by_kind_and_counters() -> None:
    counters = Counters()
    m = WorkerMetrics("app1", counters)
    held: HeldRequests[tuple[str, int]] = HeldRequests()
    m.watch_held(held, lambda item: item[0])
    assert value(m, "eddies_timers_pending", kind="TIMER") == 0
    held.hold(5, "a", ("TIMER", 1))
    held.hold(6, "b", ("TIMER", 2))
    held.hold(7, "c", ("CHAT_MODEL", 3))
    assert value(m, "eddies_timers_pending", kind="TIMER") == 2
    assert value(m, "eddies_timers_pending", kind="CHAT_MODEL") == 1
    counters.inc("dlq", 3)
    counters.inc("input_gaps")
    assert value(m, "eddies_dlq_records_total") == 3
    assert value(m, "eddies_worker_events_total", counter="input_gaps") == 1
    assert value(m, "eddies_sessions_halted_total") == 0
    counters.inc("sessions_halted")
    assert value(m, "eddies_sessions_halted_total") == 1


def test_provider_gates_by_provider() -> None:
    import asyncio

    from eddies.connectors.execution.provider_gates import ProviderGates
    from eddies.connectors.models.provider_limits import ProviderLimits

    m = WorkerMetrics("app1", Counters())
    gates = ProviderGates()
    m.watch_providers(gates.snapshot)
    assert value(m, "eddies_provider_calls_waiting", provider="llm") is None  # none asked yet
    gate = gates.gate("llm", ProviderLimits(calls_at_once=1))

    async def two_calls() -> None:
        assert await gate.enter(1, lambda: True) == 0.0
        second = asyncio.ensure_future(gate.enter(1, lambda: True))
        await asyncio.sleep(0.05)
        assert value(m, "eddies_provider_calls_waiting", provider="llm") == 1
        assert value(m, "eddies_provider_calls_running", provider="llm") == 1
        gate.leave(1, None)
        assert await second is not None

    asyncio.run(two_calls())
    assert value(m, "eddies_provider_waits_total", provider="llm") == 1
    assert value(m, "eddies_provider_wait_seconds_total", provider="llm") >= 0.04
    assert value(m, "eddies_provider_calls_waiting", provider="llm") == 0


def test_it_serves_over_http_on_any_free_port() -> None:
    m = WorkerMetrics("app1", Counters())
    host, port = m.serve(0, "127.0.0.1")
    try:
        assert port > 0
        with pytest.raises(ConfigError, match=f"metrics_port: cannot serve metrics on 127.0.0.1:{port}"):
            WorkerMetrics("app1", Counters()).serve(port, "127.0.0.1")
        body = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
        assert 'eddies_dlq_records_total{app="app1"} 0.0' in body
        assert "_created" not in body
    finally:
        m.close()


@pytest.mark.parametrize(("env", "message"), [
    ({"EDDIES_METRICS_PORT": "65536"}, "metrics_port: 65536 is not a port"),
    ({"EDDIES_METRICS_PORT": "-2"}, "metrics_port: -2 is not a port"),
    ({"EDDIES_METRICS_PORT": "http"}, "metrics_port: 'http' is not a valid int"),
    ({"EDDIES_METRICS_PORT": "0", "EDDIES_METRICS_HOST": ""}, "metrics_host: empty"),
    ({"EDDIES_LOG_FORMAT": "xml"}, "log_format: 'xml' is not one of text, json"),
])
def test_bad_metrics_and_log_settings_name_the_key(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env)


def test_settings_default_to_no_metrics_and_text_logs() -> None:
    s = load_settings(env={})
    assert (s.metrics_port, s.metrics_host, s.log_format) == (-1, "0.0.0.0", "text")
    s = load_settings(env={"EDDIES_METRICS_PORT": "9464", "EDDIES_LOG_FORMAT": "json"})
    assert (s.metrics_port, s.log_format) == (9464, "json")


def test_without_the_package_a_worker_with_a_port_fails_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from eddies.connectors.kafka.worker import Worker
    from eddies.demo import calculator_agent

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "eddies.connectors.observability.prometheus")
    settings = load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9", "metrics_port": 0})
    with pytest.raises(ConfigError, match=r"metrics_port: .*prometheus-client.*eddies\[metrics\]"):
        Worker(settings, calculator_agent())


def test_a_worker_without_a_port_does_not_import_the_package() -> None:
    code = ("import sys; from eddies.connectors.runtime.settings import load_settings; "
            "from eddies.connectors.kafka.worker import Worker; from eddies.demo import calculator_agent; "
            "w = Worker(load_settings(env={}, overrides={'bootstrap_servers': '127.0.0.1:9'}), "
            "calculator_agent()); print(w.metrics, 'prometheus_client' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=ROOT)
    assert out.stdout.split() == ["None", "False"]
