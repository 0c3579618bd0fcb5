"""Where an orchestrator's records go: what the session machine emitted, and input records
that arrived on the wrong partition.

Every event goes to ``APP.events`` (the history); requests also to the in-process
executor, or to ``APP.requests`` for executor processes; outputs, and approval requests
(a person must answer them), to ``APP.output``. An
event no record can hold (larger than ``Settings.write_limit``, or not encodable) is
dead-lettered instead, and reported so that its run fails. Example::

    router = Router(settings, names, producer, counters, dead_letters)
    unwritten = router.emit(emitted, key, source=msg)   # None, or (event, why)
    ended = router.emit_or_fail_run(machine, state, emitted, key, msg)  # or fail its run
"""

from __future__ import annotations

import logging
import shlex
import time
from typing import Protocol

import orjson

from eddies.connectors.runtime.admission import FORWARDED_HEADER, Misrouted
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.dead_letters import DeadLetters
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.records import CANCEL_HEADER, HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.sink import TIMESTAMP_NOT_AVAILABLE, RecordSink, SourceRecord, produce
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import SessionMachine, SessionState, halts
from eddies.engine.state import RunState
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    DurableCallRequest,
    EncodingError,
    ErrorInfo,
    OutputEvent,
    encode,
)

log = logging.getLogger("eddies.worker")


class LocalExecutor(Protocol):
    """An executor in the orchestrator's process, handed requests in memory."""

    def submit(self, request: AgentEvent) -> None:
        """Perform ``request`` (a DurableCallRequest event) and answer it."""

    def drop_held(self, refs: list[tuple[str, int]]) -> None:
        """Stop holding the requests of calls ``refs`` ((call id, attempt))."""


class EmittedWatcher(Protocol):
    """Shown every batch of events the router routes (the OpenTelemetry export's
    collector, connectors/observability/otel_export.py)."""

    def saw(self, emitted: list[AgentEvent]) -> None:
        """``emitted`` (one session's) were routed now; must neither block nor raise."""


#: At most one warning per this many seconds about a producer with another partitioner.
FORWARD_WARN_EVERY_S = 60.0


class Router:
    """Produces what the orchestrator emits, through its producer."""

    def __init__(self, settings: Settings, names: TopicNames, producer: RecordSink,
                 counters: Counters, dead_letters: DeadLetters) -> None:
        self.names = names
        self.producer = producer
        self.counters = counters
        self.dead_letters = dead_letters
        self.limit = settings.write_limit  # the largest record the producer takes
        # The in-process executor (role "all"), given requests in memory; else they go to
        # APP.requests for executor processes.
        self.executor: LocalExecutor | None = None
        self._last_forward_warning = 0.0
        #: The OpenTelemetry export's collector, when configured (otel_endpoint).
        self.spans: EmittedWatcher | None = None

    def emit(self, emitted: list[AgentEvent], key: bytes, source: SourceRecord | tuple[str, int]
             ) -> tuple[AgentEvent, str] | None:
        """Route ``emitted`` (the events of one session); the first event that could not be
        written and why (it was dead-lettered, the others routed), or None."""
        unwritten: tuple[AgentEvent, str] | None = None
        limit = self.limit
        for out in emitted:
            dead: bytes | None = None
            try:
                data = encode(out)
            except EncodingError as err:  # e.g. an action's value no Avro reader could read
                why = f"cannot be written: {err}"
            else:
                if len(data) <= limit:  # the common case
                    self.route(out, key, data)
                    continue
                dead = data
                why = (f"is {len(data)} bytes, over the largest record a worker writes "
                       f"({limit}: max_record_bytes + 64 KiB)")
            why = f"event {out.seq} ({out.type}) of session {out.session_id!r} {why}"
            self.dead_letters.write(dead, key, why, source=source)
            if unwritten is None:
                unwritten = (out, why)
        self.counters.inc("events", len(emitted))
        spans = self.spans
        if spans is not None:  # all OpenTelemetry costs without an endpoint configured
            spans.saw(emitted)
        return unwritten

    def emit_or_fail_run(self, machine: SessionMachine, state: SessionState,
                         emitted: list[AgentEvent], key: bytes,
                         source: SourceRecord | tuple[str, int]) -> list[RunState]:
        """Route ``emitted``; a run one of whose events no record can hold fails (once,
        whatever else it wrote; the other sessions go on), and its failed OutputEvent is
        routed too. Returns the runs that ended so, whose calls' journal records expire."""
        ended: list[RunState] = []
        while True:
            unwritten = self.emit(emitted, key, source)
            if unwritten is None:
                return ended
            event, why = unwritten
            run = state.run
            _, emitted = machine.fail_run(state, event.run, ErrorInfo("RecordTooLargeError", why),
                                          cause=event.event_id)
            if run is not None and state.run is not run:
                ended.append(run)

    def route(self, ev: AgentEvent, key: bytes, data: bytes) -> None:
        """Produce one event (``data``: its encoding) where it belongs."""
        prod = self.producer
        try:  # the common case without a wrapper frame; BufferError: wait for room
            prod.produce(self.names.events, data, key, headers=HEADERS)
        except BufferError:
            produce(prod, self.names.events, data, key, headers=HEADERS)
        payload = ev.payload
        if isinstance(payload, DurableCallRequest):
            if not payload.for_executor:  # a signal wait without deadline: events only
                return
            if self.executor is not None:
                self.executor.submit(ev)
            else:
                produce(prod, self.names.requests, data, key, headers=HEADERS)
            self.counters.inc("requests")
        elif isinstance(payload, OutputEvent) and not ev.scope:  # a sub-agent answers its caller only
            produce(prod, self.names.output, data, key, headers=HEADERS)
            error = payload.error
            self.counters.inc("outputs_failed" if error else "outputs")
            if error is not None and error.type == halts.HALTED:  # loud: it needs a person
                self.counters.inc("sessions_halted")
                # The notice names the command, not the app (the engine does not know it).
                log.error("%s (this app: eddies resume %s --app %s)", error.message,
                          shlex.quote(ev.session_id), shlex.quote(self.names.app),
                          extra=ids(session=ev.session_id, run=ev.run))
        elif isinstance(payload, ApprovalRequestEvent):
            produce(prod, self.names.output, data, key, headers=HEADERS)
            self.counters.inc("approval_requests")

    def cancel_held(self, key: bytes, runs: list[RunState],
                    calls: list[tuple[str, int]] | None = None) -> None:
        """Runs of a session that ended (and ``calls`` abandoned in a run that goes on: a
        cancelled sub-agent's): executors stop holding the requests of their calls
        that wait for a due time (a run deadline, an answered wait's deadline, a retry's
        back-off), instead of keeping each in memory, and its offset uncommitted, until it
        is due. The in-process executor is told directly; executor processes by a record on
        APP.requests (CANCEL_HEADER), behind the requests it cancels."""
        refs = [(cid, rec.attempt) for run in runs for cid, rec in run.calls.items()
                if rec.due is not None] + list(calls or ())
        if not refs:
            return
        if self.executor is not None:
            self.executor.drop_held(refs)
        else:
            produce(self.producer, self.names.requests, orjson.dumps(refs), key,
                    headers=[(CANCEL_HEADER, b"1")])
        self.counters.inc("cancels")

    def request(self, ev: AgentEvent) -> None:
        """A request issued again after a restore: to the in-process executor, or to
        APP.requests for executor processes."""
        if self.executor is not None:
            self.executor.submit(ev)
        else:
            produce(self.producer, self.names.requests, encode(ev), ev.session_id.encode(),
                    headers=HEADERS)

    def forward(self, msg: SourceRecord, to: Misrouted) -> None:
        """A record on a partition its session does not hash to goes on to the right one,
        in the order it arrived (one producer, one partition), with its bytes, its
        timestamp and where it arrived (its id, if it has none, derives from there)."""
        origin = f"{msg.topic()}/{msg.partition()}/{msg.offset()}"
        headers = [(k, v) for k, v in (msg.headers() or ()) if k != FORWARDED_HEADER]
        headers.append((FORWARDED_HEADER, origin.encode()))
        kind, ts = msg.timestamp()
        extra = {"timestamp": ts} if kind != TIMESTAMP_NOT_AVAILABLE else {}
        produce(self.producer, self.names.input, msg.value(), msg.key(), partition=to.partition,
                headers=headers, **extra)
        self.counters.inc("forwarded")
        now = time.monotonic()
        if now - self._last_forward_warning >= FORWARD_WARN_EVERY_S:
            self._last_forward_warning = now
            log.warning("record %s of session %r arrived on partition %d, but its session's "
                        "partition is %d: forwarded there (its producer does not partition by "
                        "murmur2 of the key, as Kafka's Java client does; see 'The topics' in "
                        "docs/architecture.md)",
                        origin, to.event.session_id[:100], msg.partition(), to.partition)
