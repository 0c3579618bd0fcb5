"""A worker's Prometheus metrics (``metrics_port``), served with ``prometheus-client`` (the
``metrics`` extra). Only a worker with a port configured imports this module, so
``import eddies`` and a worker without metrics never load the package.

Every metric is labelled with the worker's ``app``; none with a session id (unbounded).
What each role sees is counted where it is seen, at little cost per event:

- the orchestrator's session machine: inputs, runs (its ``stats``, read when scraped;
  runs started and run latency from the state before and after each record), failed call
  outcomes and failed runs by error class, retries (requests it emits, through
  :class:`MeteredRouter`), signals waiting (its sessions, scanned when scraped), and
  ``ctx.metrics`` of user actions (the machine's ``metrics=`` sink, :meth:`action_metric`);
- the executor: call latency by kind and target, tokens and cost by model, as each call is
  performed (every model call once, also those of a run that later fails, e.g. over
  budget), and timers pending (its held requests, when scraped);
- both: DLQ records and every worker counter; consumer lag per partition of
  ``APP.input`` (orchestrator) and ``APP.requests`` (an executor of its own group).

On the hot path each thread adds to a dict of its own (:class:`Tally`: no lock, no label
lookup, about a microsecond per update); a scrape sums them. Example::

    metrics = WorkerMetrics("support", counters)
    host, port = metrics.serve(0, "127.0.0.1")     # 0: any free port
    metrics.action_metric("counter", "answer.greeted", "s1", 1)
    # curl http://127.0.0.1:PORT/metrics -> eddies_action_counter_total{action="answer",...} 1.0
    metrics.close()
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from eddies.connectors.execution.held_requests import HeldRequests
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.routing import Router
from eddies.connectors.runtime.settings import ConfigError
from eddies.connectors.runtime.sink import SourceRecord
from eddies.engine import SessionState
from eddies.engine.budgets import SPENDING_KINDS, reported_usage
from eddies.engine.state import TERMINAL, RunState
from eddies.events import (
    AgentEvent,
    CallKind,
    ChatMessage,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    OutputEvent,
)

#: Run latency buckets (s): a run is one model call (a second) to hours of waiting.
RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 14400)
#: Call latency buckets (s): a function in milliseconds to a slow model or tool.
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: Buckets of ctx.metrics.observe: prometheus-client's defaults.
ACTION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
#: The longest label value shown: targets and error types come from code, but a record
#: from anyone may name them.
MAX_LABEL_CHARS = 200
#: Runs' start times kept for their latency, at most (one per session running a run; a
#: session that moved to another worker leaves its entry behind until this many).
MAX_RUNS_TIMED = 200_000
#: Calls whose latency is of interest; a timer's or a signal deadline's is its wait.
_TIMED_KINDS = frozenset(k for k in CallKind if k not in (CallKind.TIMER, CallKind.SIGNAL))

#: The metrics counted on the hot path: name -> (help, label names after app, histogram
#: buckets or None for a counter). Exposed as NAME_total (counters) or NAME_bucket/_sum/
#: _count (histograms).
COUNTED: dict[str, tuple[str, tuple[str, ...], tuple[float, ...] | None]] = {
    "eddies_runs_started": ("Runs started by the session machine.", (), None),
    "eddies_run_duration_seconds": ("Wall time from a run's start to its end, on this worker.",
                                    (), RUN_BUCKETS),
    "eddies_errors": ("Failed call outcomes (source: the call kind) and failed runs (source "
                      "RUN), by error category and type.", ("source", "category", "type"), None),
    "eddies_retries": ("Calls asked again (attempt 2 or later), by call kind.", ("kind",), None),
    "eddies_call_duration_seconds": ("Latency of the calls this worker performed, by kind and "
                                     "target (model resource, tool, function).",
                                     ("kind", "target"), CALL_BUCKETS),
    "eddies_model_tokens": ("Tokens of the model calls this worker performed, by model "
                            "resource and type (prompt, completion).", ("model", "type"), None),
    "eddies_model_cost_usd": ("Cost (USD) of the model calls this worker performed, by model "
                              "resource (calls of unknown cost count nothing).", ("model",), None),
    "eddies_action_counter": ("ctx.metrics.inc(name) of user actions.", ("action", "name"), None),
    "eddies_action_observation": ("ctx.metrics.observe(name, value) of user actions.",
                                  ("action", "name"), ACTION_BUCKETS),
    "eddies_hook_counter": ("What an agent's hooks counted (call.count(name, n)), e.g. the personal "
                            "data PiiRedaction redacted, by kind: counts, never the values.",
                            ("hook", "name"), None),
}


class Tally:
    """Counters and histograms keyed by (metric, *label values), each thread counting in
    a dict of its own (no lock on the hot path, as :class:`.counters.Counters`); a scrape
    sums them. A histogram's entry is [sum, count per bucket..., count above the last].

    Example::

        tally = Tally()
        tally.add(("eddies_retries", "TOOL"))
        tally.observe(("eddies_call_duration_seconds", "TOOL", "add"), 0.2, CALL_BUCKETS)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._dicts: list[dict[tuple[str, ...], Any]] = []

    def _own(self) -> dict[tuple[str, ...], Any]:
        mine: dict[tuple[str, ...], Any] = {}
        self._local.values = mine
        with self._lock:
            self._dicts.append(mine)
        return mine

    def add(self, key: tuple[str, ...], n: float = 1) -> None:
        """Add ``n`` to counter ``key``."""
        try:
            mine: dict[tuple[str, ...], Any] = self._local.values
        except AttributeError:
            mine = self._own()
        mine[key] = mine.get(key, 0) + n

    def observe(self, key: tuple[str, ...], value: float, buckets: tuple[float, ...]) -> None:
        """One observation of histogram ``key`` with upper bounds ``buckets``."""
        try:
            mine: dict[tuple[str, ...], Any] = self._local.values
        except AttributeError:
            mine = self._own()
        entry = mine.get(key)
        if entry is None:
            entry = mine[key] = [0.0] + [0] * (len(buckets) + 1)
        entry[0] += value
        entry[1 + bisect_left(buckets, value)] += 1  # the first bound >= value: le semantics

    def snapshot(self) -> dict[tuple[str, ...], Any]:
        """Every counter's total and every histogram's summed entry."""
        total: dict[tuple[str, ...], Any] = {}
        with self._lock:
            dicts = list(self._dicts)
        for d in dicts:
            for key, v in dict(d).items():  # dict(d) is one step under the GIL
                have = total.get(key)
                total[key] = (list(v) if isinstance(v, list) else v) if have is None else _plus(have, v)
        return total


def _plus(a: Any, b: Any) -> Any:
    """Two counts (numbers) or histogram entries (lists) added."""
    return [x + y for x, y in zip(a, b, strict=True)] if isinstance(a, list) else a + b


class Watched(NamedTuple):
    """What a worker's roles show when it is scraped (None: no such role in this process)."""

    stats: dict[str, int] | None
    states: Mapping[str, SessionState] | None
    held: HeldRequests[Any] | None
    held_kind: Callable[[Any], str]
    lag: dict[str, dict[int, int]]
    #: By provider: (calls waiting, running, that waited, seconds waited together).
    providers: dict[str, tuple[int, int, int, float]]


class WorkerMetrics:
    """The metrics of one worker process, in a registry of its own (so that several
    workers in one process, as in tests, do not collide). See the module docstring."""

    def __init__(self, app: str, counters: Counters) -> None:
        self.app = app
        self.counters = counters
        self.tally = Tally()
        reg = self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=reg)
        # What is read when scraped; set by the roles this worker runs (watch_*).
        self._stats: dict[str, int] | None = None
        self._states: Mapping[str, SessionState] | None = None
        self._held: HeldRequests[Any] | None = None
        self._held_kind: Callable[[Any], str] = lambda item: "?"
        self._providers: Callable[[], dict[str, tuple[int, int, int, float]]] = dict
        # topic -> {partition: lag}; each consuming thread replaces its topic's entry.
        self._lag: dict[str, dict[int, int]] = {}
        self._run_began: dict[str, float] = {}  # session -> when its running run started
        reg.register(_Scraped(self))
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # --- serving ----------------------------------------------------------------------------
    def serve(self, port: int, host: str) -> tuple[str, int]:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) in a daemon thread; the
        address it listens on. A port that cannot be had is a ConfigError naming it."""
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, host, registry=self.registry)
        except OSError as err:
            raise ConfigError(f"metrics_port: cannot serve metrics on {host}:{port}: {err}") from None
        bound = self._server.server_address
        return str(bound[0]), int(bound[1])

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    # --- what the roles show when scraped -------------------------------------------------
    def watch_sessions(self, stats: dict[str, int], states: Mapping[str, SessionState]) -> None:
        """The orchestrator's session machine ``stats`` and its sessions."""
        self._stats = stats
        self._states = states

    def watch_held(self, held: HeldRequests[Any], kind_of: Callable[[Any], str]) -> None:
        """The executor's held requests (timers, retry back-offs, signal deadlines);
        ``kind_of(item)``: an item's call kind."""
        self._held = held
        self._held_kind = kind_of

    def watch_providers(self, snapshot: Callable[[], dict[str, tuple[int, int, int, float]]]) -> None:
        """The executor's provider gates: ``snapshot()`` gives, by provider, the calls
        waiting, running, that waited, and the seconds they waited together."""
        self._providers = snapshot

    def watched(self) -> Watched:
        """What the roles handed over to be read when scraped."""
        return Watched(self._stats, self._states, self._held, self._held_kind,
                       {topic: dict(parts) for topic, parts in list(self._lag.items())},
                       self._providers())

    def sample_lag(self, consumer: Any, topic: str, applied: Mapping[int, int]) -> None:
        """Consumer lag of ``consumer``'s assigned partitions of ``topic``: the high
        watermark minus the next offset to apply (``applied``, else the consumer's
        position). Call it on the consumer's own thread (librdkafka handles are not safe to
        use while another thread closes them), every second or so: it asks no broker.

        The high watermark is librdkafka's cached one (``cached=True``), which each fetch
        response updates. A queried end offset (ListOffsets, ``cached=False``) is wrong on
        the embedded broker (the last batch's base offset + 1; BROKER-NOTES defect 1); the
        fetch response's high watermark is right there and on Apache Kafka."""
        lag: dict[int, int] = {}
        try:
            assigned = consumer.assignment()
            for tp in assigned:
                if tp.topic != topic:
                    continue
                _low, high = consumer.get_watermark_offsets(tp, cached=True)
                if high < 0:  # no fetch response yet
                    continue
                pos = applied.get(tp.partition)
                if pos is None:
                    [at] = consumer.position([tp])
                    pos = at.offset
                if pos >= 0:
                    lag[tp.partition] = high - pos
        except Exception:  # e.g. closed while stopping: keep the last sample; metrics never
            return         # stop a worker
        self._lag[topic] = lag

    # --- the orchestrator --------------------------------------------------------------------
    def before_apply(self, state: SessionState | None) -> tuple[RunState | None, int, float]:
        """What :meth:`after_apply` compares with: call it just before a record is applied to
        its session's ``state``."""
        stats = self._stats
        ended = 0 if stats is None else stats["runs_completed"] + stats["runs_failed"]
        return (None if state is None else state.run), ended, time.monotonic()

    def after_apply(self, sid: str, state: SessionState,
                    before: tuple[RunState | None, int, float]) -> None:
        """Count the runs that started and time those that ended while one record was
        applied to session ``sid``. Runs of a session are sequential, so of the runs that
        ended (the machine's stats tell how many), the first is the one running before (if
        any) and the others started and ended within this record."""
        prev, ended_before, began = before
        run = state.run
        stats = self._stats
        ended = 0 if stats is None else stats["runs_completed"] + stats["runs_failed"] - ended_before
        if run is prev and not ended:  # the common case: the same run goes on
            return
        now = time.monotonic()
        started = ended + (run is not None) - (prev is not None)
        tally = self.tally
        if started > 0:
            tally.add(("eddies_runs_started",), started)
        timed = self._run_began
        if prev is not None and ended:
            since = timed.pop(sid, None)
            if since is not None:  # None: a run restored from a snapshot, started elsewhere
                tally.observe(("eddies_run_duration_seconds",), now - since, RUN_BUCKETS)
            ended -= 1
        for _ in range(ended):
            tally.observe(("eddies_run_duration_seconds",), now - began, RUN_BUCKETS)
        if run is not None and run is not prev:
            if len(timed) >= MAX_RUNS_TIMED:
                del timed[next(iter(timed))]
            timed[sid] = now

    def forget(self, sessions: Iterable[str]) -> None:
        """Sessions that moved to another worker: their runs end there."""
        timed = self._run_began
        for sid in sessions:
            timed.pop(sid, None)

    def emitted(self, events: list[AgentEvent]) -> None:
        """The events of one session the orchestrator routes: failed outcomes and runs,
        and retries, are counted."""
        for ev in events:
            p = ev.payload
            t = type(p)
            if t is DurableCallResult:
                assert isinstance(p, DurableCallResult)
                if p.error is not None:
                    self._error(p.kind.value, p.error)
            elif t is DurableCallRequest:
                assert isinstance(p, DurableCallRequest)
                if p.attempt > 1:
                    self.tally.add(("eddies_retries", p.kind.value))
            elif t is OutputEvent:
                assert isinstance(p, OutputEvent)
                if p.error is not None:
                    self._error("RUN", p.error)

    def _error(self, source: str, error: ErrorInfo) -> None:
        self.tally.add(("eddies_errors", source, error.category.value, error.type))

    def action_metric(self, kind: str, name: str, session_id: str, value: float) -> None:
        """The session machine's ``metrics=`` sink: ``ctx.metrics.inc(name, n)`` (kind
        "counter") and ``ctx.metrics.observe(name, v)`` ("histogram") of action
        ``name``'s prefix (``"ACTION.NAME"``), reported when the action completes. The
        session is not a label. Kind "hook": what a hook counted, ``name`` being
        ``"HOOK.NAME"`` (:meth:`hook_counted`)."""
        action, _, metric = name.partition(".")
        if kind == "hook":
            self.tally.add(("eddies_hook_counter", action, metric), value)
        elif kind == "counter":
            self.tally.add(("eddies_action_counter", action, metric), value)
        else:
            self.tally.observe(("eddies_action_observation", action, metric), value, ACTION_BUCKETS)

    # --- the executor ------------------------------------------------------------------------
    def hook_counted(self, counts: dict[str, float]) -> None:
        """What an executor's result hooks counted of one result (``"HOOK.NAME" -> n``)."""
        for key, n in counts.items():
            self.action_metric("hook", key, "", n)

    def call_performed(self, req: DurableCallRequest, seconds: float, returned: Any) -> None:
        """A call this worker performed took ``seconds`` and returned ``returned`` (None if
        it raised); a model call's reply carries its tokens and cost."""
        kind = req.kind
        if kind not in _TIMED_KINDS:
            return
        tally = self.tally
        tally.observe(("eddies_call_duration_seconds", kind.value, req.target), seconds, CALL_BUCKETS)
        if kind is CallKind.CHAT_MODEL and type(returned) is ChatMessage:
            self._spent(req.target, returned.extra_args.get("usage"))
        elif kind in SPENDING_KINDS and type(returned) is dict:
            self._spent(req.target, reported_usage(returned))

    def _spent(self, target: str, used: Any) -> None:
        """The tokens and cost a model call (chat or embedding) reported, as reported
        (ints; a float cost or None)."""
        if type(used) is not dict:
            return
        tally = self.tally
        prompt, completion, cost = (used.get("prompt_tokens"), used.get("completion_tokens"),
                                    used.get("cost_usd"))
        if type(prompt) is int and prompt > 0:
            tally.add(("eddies_model_tokens", target, "prompt"), prompt)
        if type(completion) is int and completion > 0:
            tally.add(("eddies_model_tokens", target, "completion"), completion)
        if isinstance(cost, float | int) and not isinstance(cost, bool) and cost > 0:
            tally.add(("eddies_model_cost_usd", target), cost)


class MeteredRouter(Router):
    """The orchestrator's :class:`Router`, showing :meth:`WorkerMetrics.emitted` what it
    routes. Example: ``MeteredRouter(settings, names, producer, counters, dlq, metrics)``."""

    def __init__(self, *args: Any, metrics: WorkerMetrics) -> None:
        super().__init__(*args)
        self.metrics = metrics

    def emit(self, emitted: list[AgentEvent], key: bytes, source: SourceRecord | tuple[str, int]
             ) -> tuple[AgentEvent, str] | None:
        """Count, then route (see :meth:`Router.emit`)."""
        self.metrics.emitted(emitted)
        return super().emit(emitted, key, source)


class _Scraped(Collector):
    """What is read only when scraped: counters, machine stats, sessions, held requests."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterable[Metric]:
        """The metric families, read now."""
        m, app = self.m, self.m.app
        yield from self._tallied(app, m.tally.snapshot())
        counts = m.counters.snapshot()
        dlq = CounterMetricFamily("eddies_dlq_records", "Records written to APP.dlq.", labels=["app"])
        dlq.add_metric([app], counts.get("dlq", 0))
        yield dlq
        halted = CounterMetricFamily("eddies_sessions_halted", "Sessions halted until resumed "
                                     "(eddies resume): a halt announced on APP.output.", labels=["app"])
        halted.add_metric([app], counts.get("sessions_halted", 0))
        yield halted
        every = CounterMetricFamily("eddies_worker_events", "Every worker counter by name (as "
                                    "in the worker's status view).", labels=["app", "counter"])
        for name, value in sorted(counts.items()):
            every.add_metric([app, name], value)
        yield every
        watched = m.watched()
        stats = watched.stats
        if stats is not None:
            for name, key, doc in (
                    ("eddies_inputs", "inputs", "Inputs accepted by the session machine "
                     "(a re-delivered one is not counted again)."),
                    ("eddies_runs_finished", "runs_completed", "Runs that ended without error."),
                    ("eddies_runs_failed", "runs_failed", "Runs that ended with an error.")):
                family = CounterMetricFamily(name, doc, labels=["app"])
                family.add_metric([app], stats.get(key, 0))
                yield family
        states = watched.states
        if states is not None:
            yield from self._sessions(app, states)
        held = watched.held
        if held is not None:
            pending = GaugeMetricFamily("eddies_timers_pending", "Requests held until their due "
                                        "time, by call kind (TIMER: ctx.sleep; SIGNAL: a wait's "
                                        "deadline; others: a retry's back-off).",
                                        labels=["app", "kind"])
            counted = held.count_by(watched.held_kind)
            for kind in ("TIMER", *sorted(set(counted) - {"TIMER"})):
                pending.add_metric([app, kind], counted.get(kind, 0))
            yield pending
        yield from self._providers(app, watched.providers)
        lag = GaugeMetricFamily("eddies_consumer_lag", "Records not yet applied per assigned "
                                "partition (high watermark of the last fetch minus the next "
                                "offset).", labels=["app", "topic", "partition"])
        for topic, parts in watched.lag.items():
            for part, n in sorted(parts.items()):
                lag.add_metric([app, topic, str(part)], n)
        yield lag

    @staticmethod
    def _providers(app: str, providers: dict[str, tuple[int, int, int, float]]) -> Iterable[Metric]:
        families: tuple[GaugeMetricFamily | CounterMetricFamily, ...] = (
            GaugeMetricFamily("eddies_provider_calls_waiting", "Calls waiting for their provider's "
                              "limits or Retry-After before they start, by provider (its "
                              "connection's name).", labels=["app", "provider"]),
            GaugeMetricFamily("eddies_provider_calls_running", "Calls to the provider let "
                              "through and not yet answered.", labels=["app", "provider"]),
            CounterMetricFamily("eddies_provider_waits", "Calls that waited for their provider "
                                "before they started.", labels=["app", "provider"]),
            CounterMetricFamily("eddies_provider_wait_seconds", "Seconds calls waited for their "
                                "provider before they started, together.", labels=["app", "provider"]))
        for provider, values in sorted(providers.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([app, provider[:MAX_LABEL_CHARS]], value)
        yield from families

    @staticmethod
    def _tallied(app: str, tallied: dict[tuple[str, ...], Any]) -> Iterable[Metric]:
        grouped: dict[str, dict[tuple[str, ...], Any]] = {name: {} for name in COUNTED}
        for key, v in tallied.items():
            rows = grouped[key[0]]
            labels = tuple(x[:MAX_LABEL_CHARS] for x in key[1:])  # cut: possibly merged
            have = rows.get(labels)
            rows[labels] = v if have is None else _plus(have, v)
        for name, (doc, label_names, buckets) in COUNTED.items():
            rows = grouped[name]
            if not rows and not label_names:  # present, at zero, before the first one
                rows[()] = 0 if buckets is None else [0.0] + [0] * (len(buckets) + 1)
            if buckets is None:
                counter = CounterMetricFamily(name, doc, labels=["app", *label_names])
                for labels, n in rows.items():
                    counter.add_metric([app, *labels], n)
                yield counter
                continue
            bounds = [*(repr(float(b)) for b in buckets), "+Inf"]  # as prometheus-client writes them
            histogram = HistogramMetricFamily(name, doc, labels=["app", *label_names])
            for labels, entry in rows.items():
                total, cumulative = 0, []
                for bound, count in zip(bounds, entry[1:], strict=True):
                    total += count
                    cumulative.append((bound, total))
                histogram.add_metric([app, *labels], cumulative, entry[0])
            yield histogram

    @staticmethod
    def _sessions(app: str, states: Mapping[str, SessionState]) -> Iterable[Metric]:
        # Copies (one step under the GIL each) while the orchestrator thread changes them.
        sessions = list(states.values())
        running = waiting = 0
        for state in sessions:
            run = state.run
            if run is None:
                continue
            running += 1
            calls = run.calls
            for cid in list(run.waiting):  # the calls its action waits for
                rec = calls.get(cid)
                if rec is not None and rec.kind == CallKind.SIGNAL and rec.status not in TERMINAL:
                    waiting += 1
        for name, doc, value in (
                ("eddies_sessions", "Sessions in this worker's memory.", len(sessions)),
                ("eddies_runs_running", "Runs in progress.", running),
                ("eddies_signals_waiting", "ctx.wait_for_signal waits not yet answered.", waiting)):
            family = GaugeMetricFamily(name, doc, labels=["app"])
            family.add_metric([app], value)
            yield family
