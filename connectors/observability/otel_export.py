"""Live OpenTelemetry export from the Kafka worker: what the orchestrator routes, as spans
(otel.py), sent through the OTLP/HTTP exporter by a thread of its own.

The orchestrator's router hands :meth:`LiveSpans.saw` every batch of events it routes
(only when export is configured: otherwise the router holds None). Each open run's events
are kept, stamped with the wall time they were routed at (what their records on
``app.events`` are stamped with), until its root OutputEvent; then the run goes, as
events, to a bounded queue, and the export thread builds its spans and exports them. The
orchestrator never waits: a full queue drops the run (counted: ``otel_runs_dropped``), a
failed export is logged and counted (``otel_export_failures``). Example::

    spans = live_spans(settings, plan, counters)   # None unless configured
    if spans is not None:
        router.spans = spans
    ...
    spans.close()                                  # exports what is queued, for up to 5 s

Memory: a run's events are forgotten when it ends; what spans never need (prompts and
conversations in requests, tool results, inputs and outputs) is not kept; a run that keeps
more than ``max_run_bytes`` keeps no more events (its spans miss the later steps:
``otel_runs_truncated``), and past ``max_bytes`` in all the oldest open runs are dropped
(``otel_runs_evicted``). A session whose partition moves away drops its open runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eddies.connectors.runtime.counters import Counters
from eddies.engine import AgentPlan
from eddies.events import (
    AgentEvent,
    CallKind,
    CustomEvent,
    DurableCallRequest,
    DurableCallResult,
    InputEvent,
    OutputEvent,
    SubagentCallEvent,
    SubagentResultEvent,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from eddies.connectors.runtime.settings import Settings

log = logging.getLogger("eddies.otel")

#: Per open run and in all, roughly how many bytes of events are kept.
MAX_RUN_BYTES = 4 << 20
MAX_BYTES = 64 << 20
#: Ended runs waiting for the export thread.
MAX_QUEUED_RUNS = 1024
#: Runs whose spans went out, remembered so that a re-applied run does not go out again.
REMEMBERED_RUNS = 10_000
#: At most one warning per this many seconds for each kind of trouble.
WARN_EVERY_S = 60.0
_EVENT_COST = 300  # an event's envelope and ids, roughly, in bytes


def traces_endpoint(settings: Settings, env: Mapping[str, str] | None = None) -> str | None:
    """Where spans go: ``otel_endpoint`` (a base URL gets ``/v1/traces``), else the
    standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (as is) or ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (plus ``/v1/traces``); None: no export (also with ``otel_endpoint = "off"`` or
    ``OTEL_SDK_DISABLED=true``). Example: ``traces_endpoint(settings)`` ->
    ``"http://127.0.0.1:4318/v1/traces"``."""
    environ = os.environ if env is None else env
    given = settings.otel_endpoint
    if given == "off" or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if given:
        return _with_traces_path(given)
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    return None


def _with_traces_path(url: str) -> str:
    return url.rstrip("/") + "/v1/traces" if urlsplit(url).path in ("", "/") else url


def live_spans(settings: Settings, plan: AgentPlan, counters: Counters,
               env: Mapping[str, str] | None = None) -> LiveSpans | None:
    """The live export of a worker, if configured (see :func:`traces_endpoint`); a
    ConfigError naming the extra when the OpenTelemetry packages are missing."""
    endpoint = traces_endpoint(settings, env)
    if endpoint is None:
        return None
    from eddies.connectors.runtime.settings import ConfigError

    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ModuleNotFoundError:
        raise ConfigError("otel_endpoint: exporting spans needs the OpenTelemetry SDK and its "
                          "OTLP/HTTP exporter: pip install 'eddies[otel]'") from None
    # Headers, TLS, compression and timeout: the exporter's OTEL_EXPORTER_OTLP_* variables.
    log.info("exporting OpenTelemetry spans to %s", endpoint)
    return LiveSpans(OTLPSpanExporter(endpoint=endpoint), counters, plan=plan, app=settings.app)


@dataclass
class _Run:
    events: list[AgentEvent] = field(default_factory=list)
    wall: dict[str, int] = field(default_factory=dict)  # event id -> ms; also: seen ids
    size: int = 0
    truncated: bool = False


class LiveSpans:
    """Collects open runs' events from the orchestrator and exports each ended run's spans
    from a thread of its own. Only the orchestrator's thread calls :meth:`saw` and
    :meth:`forget`."""

    def __init__(self, exporter: SpanExporter, counters: Counters, *, plan: AgentPlan | None = None,
                 app: str | None = None, max_run_bytes: int = MAX_RUN_BYTES,
                 max_bytes: int = MAX_BYTES, max_queued_runs: int = MAX_QUEUED_RUNS) -> None:
        from eddies.connectors.inspect.otel import resource_of

        self.exporter = exporter
        self.counters = counters
        self.plan = plan
        self.resource = resource_of(app)
        self.max_run_bytes = max_run_bytes
        self.max_bytes = max_bytes
        self._open: OrderedDict[tuple[str, int], _Run] = OrderedDict()  # oldest first
        self._done: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._bytes = 0
        self._queue: queue.Queue[_Run | None] = queue.Queue(max_queued_runs)
        self._warned: dict[str, float] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._export_loop, name="eddies-otel", daemon=True)
        self._thread.start()

    # --- the orchestrator's side ----------------------------------------------------------
    def saw(self, emitted: list[AgentEvent]) -> None:
        """Keep ``emitted`` (routed now) with their runs; an ended run goes to the export."""
        try:
            self._saw(emitted, time.time_ns() // 1_000_000)
        except Exception:  # a defect here must never stop the orchestrator
            self.counters.inc("otel_errors")
            self._warn("saw", "OpenTelemetry export: cannot collect events", exc_info=True)

    def _saw(self, emitted: list[AgentEvent], now: int) -> None:
        runs, done = self._open, self._done
        for ev in emitted:
            key = (ev.session_id, ev.run)
            run = runs.get(key)
            if run is None:
                if key in done:  # re-applied after a restore: its spans went out already
                    continue
                run = runs[key] = _Run()
            if ev.event_id in run.wall:  # the same event routed again
                continue
            ends = not ev.scope and isinstance(ev.payload, OutputEvent)
            size = _size(ev)
            if run.size + size > self.max_run_bytes and not ends:
                if not run.truncated:
                    run.truncated = True
                    self.counters.inc("otel_runs_truncated")
                    self._warn("truncated", "OpenTelemetry export: run %d of session %r keeps "
                               "more than %d bytes of events; its later steps are not exported",
                               ev.run, ev.session_id[:100], self.max_run_bytes)
                continue
            run.events.append(_slim(ev))
            run.wall[ev.event_id] = now
            run.size += size
            self._bytes += size
            if ends:
                del runs[key]
                self._bytes -= run.size
                done[key] = None
                if len(done) > REMEMBERED_RUNS:
                    done.popitem(last=False)
                self._offer(run)
        while self._bytes > self.max_bytes and runs:
            (sid, number), old = runs.popitem(last=False)
            self._bytes -= old.size
            self.counters.inc("otel_runs_evicted")
            self._warn("evicted", "OpenTelemetry export: open runs keep more than %d bytes of "
                       "events; dropped the oldest (run %d of session %r)", self.max_bytes,
                       number, sid[:100])

    def forget(self, sessions: Iterable[str]) -> None:
        """Drop the open runs of ``sessions`` (their partition moved to another worker)."""
        gone = set(sessions)
        if not gone or not self._open:
            return
        for key in [k for k in self._open if k[0] in gone]:
            self._bytes -= self._open.pop(key).size

    def _offer(self, run: _Run) -> None:
        try:
            self._queue.put_nowait(run)
        except queue.Full:
            self.counters.inc("otel_runs_dropped")
            self._warn("full", "OpenTelemetry export: %d ended runs wait for the exporter; "
                       "dropped one (its spans are not exported)", self._queue.maxsize)

    def close(self, timeout: float = 5.0) -> None:
        """Export what is queued (for up to ``timeout`` s), then shut the exporter down."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        # Full: the thread is stuck on a slow collector; it is a daemon, let it be.
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        try:
            self.exporter.shutdown()
        except Exception:
            log.warning("OpenTelemetry export: the exporter failed to shut down", exc_info=True)

    # --- the export thread ----------------------------------------------------------------
    def _export_loop(self) -> None:
        q = self._queue
        while True:
            first = q.get()
            if first is None:
                return
            batch, more = [first], True
            while more and len(batch) < 64:  # several ended runs: one request
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    more = False
                else:
                    batch.append(item)
            self._export(batch)
            if not more:
                return

    def _export(self, runs: list[_Run]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from eddies.connectors.inspect.otel import spans_of

        spans: list[Any] = []
        for run in runs:
            try:
                spans += spans_of(run.events, run.wall, plan=self.plan, resource=self.resource)
            except Exception:  # a defect: this run is lost, the others go out
                self.counters.inc("otel_build_failures")
                self._warn("build", "OpenTelemetry export: cannot build the spans of a run",
                           exc_info=True)
        if not spans:
            return
        try:
            result = self.exporter.export(spans)
        except Exception as err:
            result = None
            why = f"{type(err).__name__}: {err}"
        else:
            why = "the exporter reported a failure"
        if result is SpanExportResult.SUCCESS:
            self.counters.inc("otel_spans_exported", len(spans))
            self.counters.inc("otel_runs_exported", len(runs))
            return
        self.counters.inc("otel_export_failures")
        self._warn("export", "OpenTelemetry export of %d spans failed (%s); they are dropped",
                   len(spans), why)

    def _warn(self, what: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        now = time.monotonic()
        if now - self._warned.get(what, -WARN_EVERY_S) >= WARN_EVERY_S:
            self._warned[what] = now
            log.warning(msg, *args, exc_info=exc_info)


def _size(ev: AgentEvent) -> int:
    """Roughly what keeping ``ev`` (slimmed) costs, in bytes."""
    p = ev.payload
    if isinstance(p, DurableCallResult) and p.kind is CallKind.CHAT_MODEL:
        return _EVENT_COST + len(p.value)  # kept whole: usage and finish reason are in it
    return _EVENT_COST


def _slim(ev: AgentEvent) -> AgentEvent:
    """``ev`` without what spans never use, so a kept run stays small: a model request's
    conversation, tool arguments and results, inputs and outputs (a model result keeps its
    usage and finish reason; errors stay). Another event is a stand-in of its type."""
    p = ev.payload
    if isinstance(p, DurableCallRequest):
        return replace(ev, payload=replace(p, args=""))
    if isinstance(p, DurableCallResult):
        return ev if p.kind is CallKind.CHAT_MODEL else replace(ev, payload=replace(p, value="null"))
    if isinstance(p, InputEvent | SubagentCallEvent):
        return replace(ev, payload=replace(p, input=None))
    if isinstance(p, OutputEvent | SubagentResultEvent):
        return replace(ev, payload=replace(p, output=None))
    # Drafts, critiques, chat requests with their conversation, ...: only their type and
    # place are on a span (as span events).
    return replace(ev, payload=CustomEvent(type_name=ev.type))

