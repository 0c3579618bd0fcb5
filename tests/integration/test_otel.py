"""OpenTelemetry export from a real ``eddies worker``: the trip planner's sessions (a ReAct
loop calling two sub-agents, tools over MCP) exported by the OTLP/HTTP exporter to a
receiver on 127.0.0.1 that decodes ExportTraceServiceRequest. The received spans are the
spans ``spans_of`` builds from the sessions' histories read back from ``APP.events``:
same trace ids, span ids, parents, names and attributes, at the records' times."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


class _Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP traces endpoint: keeps every span it is sent, with its resource."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
        if ok:
            request = ExportTraceServiceRequest.FromString(body)
            got = []
            for rs in request.resource_spans:
                resource = _attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        got.append({
                            "trace_id": s.trace_id, "span_id": s.span_id,
                            "parent": s.parent_span_id or None, "name": s.name,
                            "attributes": _attributes(s.attributes), "status": s.status.code,
                            "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                            "events": [e.name for e in s.events], "resource": resource,
                            "scope": ss.scope.name})
            with self.server.lock:
                self.server.spans += got
                self.server.requests += 1
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, which) if which else None


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_worker_exports_every_run_as_the_history_says(settings: Any, tmp_path: Path,
                                                        receiver: _Receiver) -> None:
    from eddies.connectors.inspect.otel import spans_of
    from eddies.connectors.inspect.sessions import timed_history, wall_times
    from eddies.connectors.runtime.client import producer, send_input
    from tests.integration.workers import answers, start_worker, stop_worker, wait_until

    log = tmp_path / "worker.log"
    began_ns = time.time_ns()
    # A base URL: the worker posts to its /v1/traces.
    worker = start_worker(settings, "eddies.demo:planner_agent", log,
                          args=("--otel-endpoint", receiver.url))
    sessions = {"erin": "Plan my trip to Tokyo.", "olaf": "Plan my trip to Paris."}
    try:
        prod = producer(settings)
        for sid, prompt in sessions.items():
            send_input(settings, sid, prompt, prod=prod)
        send_input(settings, "erin", "Plan my trip to Oslo.", prod=prod)  # erin's second run
        prod.flush(30)
        wait_until("three answers", lambda: len(answers(settings)) >= 3, worker, log, timeout=120)

        def roots() -> int:
            with receiver.lock:
                return sum(1 for s in receiver.spans if s["parent"] is None)

        wait_until("the spans of three runs", lambda: roots() >= 3, worker, log, timeout=60)
        time.sleep(1)  # nothing more comes
    finally:
        stop_worker(worker)
    ended_ns = time.time_ns()
    got = {(s["trace_id"], s["span_id"]): s for s in receiver.spans}
    assert len(got) == len(receiver.spans), "a span was exported twice"

    expected = []
    for sid in sessions:
        records = timed_history(settings, sid)
        assert records, sid
        expected += spans_of([r.event for r in records], wall_times(records))
    assert {(s.context.trace_id.to_bytes(16, "big"), s.context.span_id.to_bytes(8, "big"))
            for s in expected} == set(got)
    for want in expected:
        span = got[(want.context.trace_id.to_bytes(16, "big"), want.context.span_id.to_bytes(8, "big"))]
        parent = want.parent.span_id.to_bytes(8, "big") if want.parent else None
        assert (span["name"], span["parent"]) == (want.name, parent)
        assert span["attributes"] == dict(want.attributes or {}), want.name
        assert span["events"] == [e.name for e in want.events]
        assert span["resource"]["service.name"] == "eddies"
        assert span["resource"]["eddies.app"] == settings.app
        assert span["scope"] == "eddies"
        # Live: stamped as routed; from the topic: the records' times. The same moments.
        assert began_ns <= span["start_ns"] <= span["end_ns"] <= ended_ns
        assert abs(span["start_ns"] - (want.start_time or 0)) < 5 * 10**9

    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in receiver.spans:
        by_name.setdefault(span["name"], []).append(span)
    assert len(by_name["invoke_agent planner"]) == 3
    assert {(s["attributes"]["eddies.session_id"], s["attributes"]["eddies.run"])
            for s in by_name["invoke_agent planner"]} == {("erin", 1), ("erin", 2), ("olaf", 1)}
    # Paris is no city the planner knows: olaf's run asks no sub-agent.
    travels = by_name["invoke_agent travel"]
    assert sorted(s["attributes"]["eddies.run"] for s in travels) == [1, 2]
    assert {s["attributes"]["eddies.session_id"] for s in travels} == {"erin"}
    for weather in by_name["execute_tool weather"]:
        asker = next(s for s in receiver.spans if s["span_id"] == weather["parent"])
        travel = next(s for s in travels if s["span_id"] == asker["parent"])
        assert asker["name"] == "chat llm" and travel["trace_id"] == weather["trace_id"]
        assert weather["attributes"]["eddies.call_id"].startswith("erin/travel@")
        assert weather["attributes"]["eddies.scope"].startswith("travel@")
    for span in by_name["chat llm"]:
        assert span["attributes"]["gen_ai.operation.name"] == "chat"
        assert span["attributes"]["gen_ai.usage.input_tokens"] > 0
        assert span["attributes"]["eddies.session_id"] in sessions
