"""OpenTelemetry spans of sessions: the trip planner's history (two sub-agents, a ReAct
loop and a reflection loop, tools) as spans through the SDK's in-memory exporter, their
ids derived from the session, and the worker's live collector fed as the router feeds it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from eddies.connectors.inspect.otel import span_id_of, spans_of, trace_id_of
from eddies.connectors.inspect.tree import MODEL, RUN, SUBAGENT, TOOL, TraceNode, build_tree
from eddies.connectors.local.runner import LocalRunner
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.connectors.observability.otel_export import LiveSpans, traces_endpoint
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.settings import ConfigError, load_settings
from eddies.demo import PLANNER_PROMPTS, calculator_agent, planner_agent
from eddies.engine.resources import ToolSpec
from eddies.events import AgentEvent, ChatMessage, MessageRole, ToolCall


def _planner(prompts: Sequence[tuple[str, str]] = PLANNER_PROMPTS) -> LocalRunner:
    runner = LocalRunner(planner_agent())
    runner.run(prompts)
    return runner


def _exported(spans: list[ReadableSpan]) -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    return exporter.get_finished_spans()


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _shape(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """What a replay must give again: names, ids, parents, attributes, status."""
    return [(s.name, s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None,
             dict(s.attributes or {}), s.status.status_code, [e.name for e in s.events])
            for s in spans]


def test_the_planners_spans_are_its_tree() -> None:
    runner = _planner()
    spans = _exported(spans_of(runner.history, plan=runner.plan))
    [root] = build_tree(runner.history)
    by_id = {s.context.span_id: s for s in spans}
    assert len(by_id) == len(spans)

    # One span per run, model call, tool call and sub-agent call, each under the span of
    # its nearest such ancestor in the tree (a run-deadline timer that never fired is none).
    expected: dict[str, str | None] = {}

    def walk(node: TraceNode, parent: str | None) -> None:
        me = parent
        if node.kind in (RUN, MODEL, TOOL, SUBAGENT):
            me = "run" if node.kind == RUN else node.call_id
            expected[str(me)] = parent
        for child in node.children:
            walk(child, me)

    walk(root, None)
    key = {s.context.span_id: str(s.attributes.get("eddies.call_id", "run")) for s in spans}
    got = {key[s.context.span_id]: key[s.parent.span_id] if s.parent else None for s in spans}
    assert got == expected

    names = [s.name for s in spans]
    assert names[0] == "invoke_agent planner" and spans[0].parent is None
    assert names.count("invoke_agent travel") == names.count("invoke_agent tagline") == 1
    assert {"execute_tool weather", "execute_tool get_current_time"} <= set(names)
    assert names.count("chat writer") == names.count("chat editor") == 2
    assert {s.context.trace_id for s in spans} == {trace_id_of("erin", 1)}
    assert spans[0].context.span_id == span_id_of("erin", "run:1")

    for s in spans:
        a = _attrs(s)
        assert a["eddies.session_id"] == a["gen_ai.conversation.id"] == "erin"
        assert a["eddies.run"] == 1 and s.status.status_code is StatusCode.UNSET
    travel = next(s for s in spans if s.name == "invoke_agent travel")
    weather = next(s for s in spans if s.name == "execute_tool weather")
    a = _attrs(weather)
    assert (a["gen_ai.tool.name"], a["eddies.scope"], a["eddies.agent"]) == ("weather", "travel@i1c1",
                                                                             "travel")
    assert a["eddies.call_id"].startswith("erin/travel@i1c1:r1:")
    asker = by_id[weather.parent.span_id] if weather.parent else None
    assert asker is not None and asker.name == "chat llm" and asker.parent is not None
    assert by_id[asker.parent.span_id] is travel

    # GenAI attributes: tokens as the model reported them, summed up the tree.
    models = [s for s in spans if s.name.startswith("chat ")]
    for s in models:
        a = _attrs(s)
        assert s.kind is SpanKind.CLIENT and a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == a["eddies.model.resource"]  # the setups name none
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    p, c, _ = root.totals()
    assert sum(_attrs(s)["gen_ai.usage.input_tokens"] for s in models) == p
    assert sum(_attrs(s)["gen_ai.usage.output_tokens"] for s in models) == c
    top = _attrs(spans[0])
    assert (top["gen_ai.usage.input_tokens"], top["gen_ai.usage.output_tokens"]) == (p, c)
    # Non-call events are span events where they happened.
    tagline = next(s for s in spans if s.name == "invoke_agent tagline")
    assert [e.name for e in tagline.events] == ["ReflectionDraft", "ReflectionCritique"] * 2 + ["OutputEvent"]
    assert [e.name for e in spans[0].events] == ["OutputEvent"]
    for s in spans:  # no span ends before it starts, none before its children end
        assert s.end_time is not None and s.start_time is not None and s.end_time >= s.start_time
        if s.parent:
            assert (by_id[s.parent.span_id].end_time or 0) >= s.end_time


def test_ids_derive_from_the_session_and_run() -> None:
    first = _planner()
    again = _planner()  # the same inputs, computed again: a replay
    assert [e.event_id for e in again.history] == [e.event_id for e in first.history]
    assert _shape(spans_of(first.history)) == _shape(spans_of(first.history)) == _shape(
        spans_of(again.history))
    other = _planner([("frank", "Plan my trip to Tokyo.")])
    ids = {s.context.trace_id for s in spans_of(other.history)}
    assert ids == {trace_id_of("frank", 1)} and trace_id_of("frank", 1) != trace_id_of("erin", 1)
    assert not {s.context.span_id for s in spans_of(other.history)} & {
        s.context.span_id for s in spans_of(first.history)}
    # Two runs of a session: two traces.
    two = _planner([("erin", "Plan my trip to Tokyo."), ("erin", "Plan my trip to Paris.")])
    spans = spans_of(two.history)
    roots = [s for s in spans if s.parent is None]
    assert [s.context.trace_id for s in roots] == [trace_id_of("erin", 1), trace_id_of("erin", 2)]
    assert [_attrs(s)["eddies.run"] for s in roots] == [1, 2]


def test_model_names_and_finish_reasons_and_failures() -> None:
    def reply(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage:
        if messages[-1].role is MessageRole.TOOL:
            raise PermissionError("the model is closed")
        return ChatMessage(MessageRole.ASSISTANT, "", extra_args={"finish_reason": "tool_calls"},
                           tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})])

    def broken(a: int, b: int) -> int:
        raise ValueError("no adding today")

    runner = LocalRunner(calculator_agent(ScriptedChatModel(reply), tool=broken, model_name="gpt-test"))
    runner.submit("s", '{"a": 1, "b": 2}')
    runner.run_until_idle()
    spans = _exported(spans_of(runner.history, plan=runner.plan))
    assert [s.name for s in spans] == ["invoke_agent calculator", "chat gpt-test", "execute_tool add",
                                       "chat gpt-test"]
    run, asks, tool, fails = spans
    assert _attrs(asks)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert _attrs(asks)["gen_ai.request.model"] == "gpt-test"
    assert asks.status.status_code is StatusCode.UNSET
    for span, error in ((tool, "ValueError"), (fails, "PermissionError"),
                        (run, "DurableCallError[PermissionError]")):
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert _attrs(span)["error.type"] == error
    assert tool.status.description == "ValueError: no adding today"
    assert "the model is closed" in str(run.status.description)
    assert "gen_ai.response.finish_reasons" not in _attrs(fails)


def _feed(live: LiveSpans, history: list[AgentEvent], step: int = 3) -> None:
    """As the router does: batches of events, in order."""
    for i in range(0, len(history), step):
        live.saw(history[i:i + step])


def test_the_live_collector_exports_what_the_history_gives() -> None:
    runner = _planner([("erin", "Plan my trip to Tokyo."), ("erin", "Plan my trip to Paris.")])
    exporter, counters = InMemorySpanExporter(), Counters()
    live = LiveSpans(exporter, counters, plan=runner.plan)
    _feed(live, runner.history)
    _feed(live, runner.history)  # routed again after a restore: not exported again
    live.close()
    got = exporter.get_finished_spans()
    assert _shape(got) == _shape(spans_of(runner.history, plan=runner.plan))
    assert counters.get("otel_runs_exported") == 2 and counters.get("otel_spans_exported") == len(got)
    assert not live._open and live._bytes == 0  # every run's buffer is gone at its end
    for s in got:  # wall times: when they were routed
        assert s.start_time is not None and s.start_time > 1_600_000_000 * 10**9


def test_the_live_collector_is_bounded() -> None:
    runner = _planner()
    history = runner.history
    # A run over its own budget keeps no more events, but its run span still ends.
    exporter, counters = InMemorySpanExporter(), Counters()
    live = LiveSpans(exporter, counters, max_run_bytes=3000)
    _feed(live, history)
    live.close()
    got = exporter.get_finished_spans()
    assert counters.get("otel_runs_truncated") == 1 and got[0].name == "invoke_agent planner"
    assert 1 < len(got) < len(spans_of(history))
    # Open runs over the budget of all: the oldest are dropped.
    counters = Counters()
    live = LiveSpans(InMemorySpanExporter(), counters, max_bytes=2000)
    open_runs = [e for e in _planner([(f"s{i}", "Plan my trip to Tokyo.") for i in range(3)]).history
                 if e.type != "OutputEvent" or e.scope]
    _feed(live, open_runs)
    assert counters.get("otel_runs_evicted") >= 1 and live._bytes <= 2000
    live.forget(["s0", "s1", "s2"])
    assert not live._open and live._bytes == 0
    live.close()


class _Stuck(SpanExporter):
    """A collector that does not answer until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.release.wait(10)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.release.set()


def test_a_stuck_or_failing_exporter_never_holds_the_orchestrator() -> None:
    counters, stuck = Counters(), _Stuck()
    live = LiveSpans(stuck, counters, max_queued_runs=1)
    histories = [_planner([(f"s{i}", "Plan my trip to Tokyo.")]).history for i in range(4)]
    live.saw(histories[0])
    for _ in range(100):  # the thread has taken the first run and waits on the collector
        if stuck.calls:
            break
        threading.Event().wait(0.05)
    for h in histories[1:]:
        live.saw(h)  # one is queued, the others are dropped: saw() returns at once
    assert counters.get("otel_runs_dropped") == 2
    stuck.release.set()
    live.close()
    assert counters.get("otel_export_failures") >= 1 and counters.get("otel_spans_exported") == 0


def test_where_spans_go() -> None:
    base = load_settings(env={})
    assert traces_endpoint(base, {}) is None
    assert traces_endpoint(base, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom",
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://d:4318"}
    assert traces_endpoint(base, env) == "http://c:4318/custom"
    given = load_settings(env={"EDDIES_OTEL_ENDPOINT": "http://127.0.0.1:4318"})
    assert traces_endpoint(given, env) == "http://127.0.0.1:4318/v1/traces"
    assert traces_endpoint(load_settings(env={}, overrides={"otel_endpoint": "https://x/v1/t"}), {}) == "https://x/v1/t"
    assert traces_endpoint(load_settings(env={}, overrides={"otel_endpoint": "off"}), env) is None
    assert traces_endpoint(given, {"OTEL_SDK_DISABLED": "true"}) is None
    with pytest.raises(ConfigError, match="otel_endpoint: 'collector:4318' is not an http"):
        load_settings(env={"EDDIES_OTEL_ENDPOINT": "collector:4318"})


def test_without_the_packages_the_worker_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from eddies.connectors.observability.otel_export import live_spans

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    settings = load_settings(env={"EDDIES_OTEL_ENDPOINT": "http://127.0.0.1:4318"})
    with pytest.raises(ConfigError, match=r"pip install 'eddies\[otel\]'"):
        live_spans(settings, LocalRunner(calculator_agent()).plan, Counters(), env={})


def test_a_litellm_model_call_records_its_finish_reason() -> None:
    """Over real HTTP, to the OpenAI-compatible test server on 127.0.0.1."""
    from eddies.connectors.models.litellm import LiteLLMChatModel
    from tests.openai_server import OpenAIServer

    server = OpenAIServer().start()
    try:
        conn = LiteLLMChatModel(api_base=server.base_url, api_key="test")
        runner = LocalRunner(calculator_agent(conn, model_name="openai/test-model"))
        assert runner.run([("s", '{"a": 1, "b": 2}')]) == ["The result is 3."]
    finally:
        server.stop()
    chats = [s for s in spans_of(runner.history, plan=runner.plan) if s.name.startswith("chat ")]
    assert [s.name for s in chats] == ["chat openai/test-model"] * 2
    assert [_attrs(s)["gen_ai.response.finish_reasons"] for s in chats] == [("tool_calls",), ("stop",)]
    assert all(_attrs(s)["gen_ai.usage.input_tokens"] > 0 for s in chats)
