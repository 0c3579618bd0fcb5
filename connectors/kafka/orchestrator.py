"""The orchestrator role: drives the session machine over ``APP.input``.

``APP.input`` carries everything that enters the session machine: InputEvents from users
and DurableCallResults from executors. One topic means one order per partition, so
re-processing after a crash applies the same records in the same order and emits the same
event ids. It produces what the machine emits (every event to ``app.events``, the history;
requests to ``app.requests`` or to its own executor in memory; outputs to ``app.output``)
at once. Every ``commit_interval_ms`` it flushes, writes a snapshot of each session touched
since the last commit that is between runs to ``app.journal`` (one in the middle of a run
waits for the run's end, at most ``snapshot_delay_ms``), flushes, and only then commits its
offsets (as Kafka Streams does), never past the first record of a session that changed
since its last snapshot. After a crash it re-reads from the last commit: records already
reflected in a snapshot are dropped by the machine (known input ids, calls that have their
outcome), the others are applied again in the same order and emit the same event ids, so a
consumer that drops seen event ids sees each event once.

Partitions move incrementally (cooperative-sticky): a gained partition's sessions are
restored from ``app.journal`` (read to PARTITION_EOF) and their requests without a recorded
outcome issued again; a revoked one is committed and snapshotted first; the others keep
running through a rebalance. A lost one (the group went on without this worker) is dropped
without writing anything: its new owner may already be writing.

Retention: a finished run's call outcomes and started marks are tombstoned
``journal_retention_ms`` after it finished (by then no redelivered request can ask for
them), and a session idle for ``session_ttl_ms`` (by its logical clock) is closed: its
snapshot is tombstoned, so the compacted journal does not grow without bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from eddies.connectors.admission import Admission, Misrouted, Refused
from eddies.connectors.applying import apply_record
from eddies.connectors.dead_letters import DeadLetters
from eddies.connectors.inspect.otel_export import LiveSpans, live_spans
from eddies.connectors.json_logs import ids
from eddies.connectors.records import (
    finished_run_keys,
    header,
    journal_partition,
    outcome_key,
    snapshot_key,
    started_key,
)
from eddies.connectors.routing import Router
from eddies.connectors.sink import produce
from eddies.engine import SessionMachine, SessionState
from eddies.engine.state import RunState
from eddies.events import (
    AgentEvent,
    DurableCallRequest,
    ErrorInfo,
    partition_for,
)
from eddies.events.ids import run_of_call, session_of_call

from .client import next_batch
from .executor import KafkaExecutor
from .journal import JournalView, read_journal
from .membership import group_consumer
from .outbox import Outbox
from .positions import Positions

if TYPE_CHECKING:
    from eddies.connectors.prometheus import WorkerMetrics

log = logging.getLogger("eddies.worker")

#: On stop, how long running calls may take to finish before the worker leaves its group.
STOP_CALLS_WAIT_S = 20.0


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


class Orchestrator:
    """Consumes inputs and call results, drives the session machine, produces its output."""

    def __init__(self, worker: Any) -> None:
        s = worker.settings
        self.worker = worker
        self.settings = s
        self.names = worker.names
        self.counters = worker.counters
        self.metrics: WorkerMetrics | None = worker.metrics
        metrics = self.metrics
        self.machine = SessionMachine(worker.plan, None if metrics is None else metrics.action_metric,
                                      max_memory_bytes=s.max_memory_bytes)
        self.states: dict[str, SessionState] = {}
        self.dirty: dict[str, int] = {}  # session -> input partition: changed since the last commit
        # Sessions in the middle of a run are not snapshotted at every commit (most runs end
        # within seconds, and their snapshot then is the one that counts): per partition,
        # session -> (offset of its first record since its last snapshot, since when). A
        # partition's committed offset stays at its first such record, so a restart re-reads
        # from there; one unsaved for longer than ``snapshot_delay_ms`` is snapshotted anyway.
        self._unsaved: dict[int, dict[str, tuple[int, float]]] = {}
        self._delay = s.snapshot_delay_ms / 1000
        self._delay_deadline = float("inf")  # when the oldest unsaved session is due
        self.partitions: set[int] = set()
        # Next offset per input partition of the records actually applied. Offsets are
        # committed from here, never from consumer positions: a rebalance callback can run
        # while records already returned by the consumer wait to be applied. Skipped offsets
        # are re-read on the embedded broker only (positions.py).
        self._positions = Positions(reread_gaps=worker.membership.reread_gaps(s))
        self._assignments = 0  # partitions gained so far (a paused input pauses new ones too)
        self.assigned = threading.Event()
        self._interval = s.commit_interval_ms / 1000
        self._last_commit = time.monotonic()
        # (when, session, journal keys) of finished runs, tombstoned after the retention.
        self._finished: deque[tuple[float, str, list[bytes]]] = deque()
        self._retention = s.journal_retention_ms / 1000
        self._sweep_every = min(60.0, s.session_ttl_ms / 10_000)  # a tenth of the TTL, at most 1 min
        self._last_sweep = time.monotonic()
        # The OpenTelemetry export (otel_endpoint, or the standard OTEL_EXPORTER_OTLP_*
        # variables): None, and nothing of OpenTelemetry imported, unless configured. First:
        # a missing package stops the worker before it has clients to close.
        self.spans: LiveSpans | None = live_spans(s, worker.plan, self.counters)
        self.producer = Outbox(s, "orchestrator")
        self.consumer = group_consumer(s, "orchestrator", worker.membership)
        self.admission = Admission(partitions=s.partitions, max_record_bytes=s.max_record_bytes,
                                   agent_name=worker.plan.agent_name, signer=worker.signer,
                                   input_topic=self.names.input)
        self.dead_letters = DeadLetters(self.producer, self.names.dlq, s.max_record_bytes,
                                        self.counters)
        router_args = (s, self.names, self.producer, self.counters, self.dead_letters)
        if metrics is None:
            self.router = Router(*router_args)
        else:
            from eddies.connectors.prometheus import MeteredRouter

            self.router = MeteredRouter(*router_args, metrics=metrics)
            metrics.watch_sessions(self.machine.stats, self.states)
        self.router.spans = self.spans
        self._executor: KafkaExecutor | None = None
        # Wall time (ms) of each session's last record here: an idle session is closed by
        # the earlier of this and its logical clock (a clock set in the future by its
        # inputs must not keep it forever).
        self._seen: dict[str, float] = {}

    @property
    def executor(self) -> KafkaExecutor | None:
        """The in-process executor (role "all"), given requests in memory; None: they go
        to APP.requests for executor processes."""
        return self._executor

    @executor.setter
    def executor(self, executor: KafkaExecutor | None) -> None:
        self._executor = self.router.executor = executor

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set."""
        self.consumer.subscribe([self.names.input], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        # Requests handed to this process's executor wait in memory, not in Kafka: past this
        # many unfinished calls the input is paused until calls finish (slow models, bursts).
        limit = self.settings.executor_concurrency * 64
        paused = False
        paused_at = 0
        metrics = self.metrics
        next_lag = 0.0  # when consumer lag is sampled next (every second, with metrics)
        try:
            while not stop.is_set():
                local = self.executor  # set only with role "all": the local executor
                if local is not None:
                    busy = len(local.inflight) >= limit
                    if busy != paused or (busy and paused_at != self._assignments):
                        assigned = self.consumer.assignment()
                        if busy:
                            self.consumer.pause(assigned)
                            if not paused:
                                self.counters.inc("input_pauses")
                        else:
                            self.consumer.resume(assigned)
                        paused = busy
                        paused_at = self._assignments
                msgs = next_batch(self.consumer, self.settings.batch_size, 0.05)
                if msgs:
                    self._process(msgs)
                self.producer.poll(0)
                now = time.monotonic()
                if now - self._last_commit >= self._interval and (self.dirty or self._due(now)):
                    self._commit()
                if metrics is not None and now >= next_lag:
                    metrics.sample_lag(self.consumer, self.names.input, self._positions.next)
                    next_lag = now + 1.0
        finally:
            stop.set()  # also when this loop failed: the executor winds down too
            local = self.executor
            # Its running calls journal their outcomes before this worker leaves the group,
            # so the next owner of their sessions finds them.
            if local is not None and not local.finished.wait(STOP_CALLS_WAIT_S):
                log.warning("stopping with %d calls still running after %.0f s: the next owners "
                            "of their sessions wait for their outcomes (outcome_wait_ms), then "
                            "treat them as unknown", len(local.inflight), STOP_CALLS_WAIT_S)
            self._commit(everything=True)
            self.consumer.close()
            if self.spans is not None:  # the runs that ended before the stop go out
                self.spans.close()

    # --- partitions ----------------------------------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions} - self.partitions
        if not numbers:
            self.assigned.set()
            return
        began = time.monotonic()
        local = self.executor
        if local is not None:  # it follows their journal from there on, and owns their calls
            view = local.restore(numbers)
        else:
            view = read_journal(self.settings, self.names.journal, numbers,
                                reread_gaps=self._positions.reread_gaps)
        log.info("orchestrator assigned partitions %s: %d journal records, %d sessions (read in "
                 "%.0f ms)", sorted(numbers), view.records, len(view.snapshots),
                 (time.monotonic() - began) * 1000)
        if view.unreadable:
            log.error("%d records of %s have keys no worker writes; skipped", view.unreadable,
                      self.names.journal)
        seen = time.time() * 1000
        for sid, data in view.snapshots.items():
            try:
                state, requests = self.machine.resume(SessionState.from_bytes(data))
            except Exception as err:  # never written by a worker of this version: keep the
                # partition's other sessions going, and the record where it can be found
                log.error("session %r: its snapshot in %s cannot be restored (%s: %s); the "
                          "session starts over", sid[:100], self.names.journal,
                          type(err).__name__, err, extra=ids(session=sid))
                self.counters.inc("snapshots_unreadable")
                continue
            self.states[sid] = state
            self._seen[sid] = seen
            for req in requests:
                p = req.payload
                assert isinstance(p, DurableCallRequest)
                if local is not None:
                    # It answers a call with a recorded outcome by sending that result again
                    # (it may have been lost in a crash after the outcome was journaled).
                    local.submit(req)
                    self.counters.inc("requests_reissued")
                elif (p.call_id, p.attempt) not in view.outcomes:
                    self.router.request(req)
                    self.counters.inc("requests_reissued")
        self._schedule_finished_from(view)
        self.producer.flush(10)
        self.partitions |= numbers
        self._assignments += 1
        self.counters.inc("sessions_restored", len(view.snapshots))
        self.assigned.set()

    def _schedule_finished_from(self, view: JournalView) -> None:
        """Journal keys of calls whose run is over (found after a restart) expire as if
        their run had just finished."""
        keys: dict[str, list[bytes]] = {}
        refs = [(r, outcome_key(*r)) for r in view.outcomes] + [(r, started_key(*r)) for r in view.started]
        for (cid, _attempt), key in refs:
            sid = session_of_call(cid)
            state = self.states.get(sid)
            current = state.run.number if state is not None and state.run is not None else None
            run = run_of_call(cid)
            if current is None or run < current:
                keys.setdefault(sid, []).append(key)
        now = time.monotonic()
        for sid, ks in keys.items():
            self._finished.append((now, sid, ks))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions} & self.partitions
        if not numbers:
            return
        began = time.monotonic()
        self._commit(sync=True, everything=True)
        self._drop(numbers)
        log.info("orchestrator partitions revoked: %s (committed in %.0f ms)", sorted(numbers),
                 (time.monotonic() - began) * 1000)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions} & self.partitions
        log.warning("orchestrator partitions lost (the group went on without this worker): %s; "
                    "their sessions are dropped here without a snapshot", sorted(numbers))
        self._drop(numbers)

    def _drop(self, numbers: set[int]) -> None:
        """Forget the sessions of ``numbers``; the local executor starts none of their calls."""
        if self.executor is not None:
            self.executor.release(numbers)
        for part in numbers:
            self._positions.forget(part)
            self._unsaved.pop(part, None)
        # Nothing left to snapshot there (after a revoke's commit; never after a loss).
        for sid in [s for s, part in self.dirty.items() if part in numbers]:
            del self.dirty[sid]
        gone = [s for s in self.states if partition_for(s, self.settings.partitions) in numbers]
        for sid in gone:
            del self.states[sid]
            self._seen.pop(sid, None)
        self.machine.evict(*gone)
        if self.metrics is not None:
            self.metrics.forget(gone)
        if self.spans is not None:
            self.spans.forget(gone)
        self.partitions -= numbers

    # --- records -------------------------------------------------------------------------
    def _process(self, msgs: list[Any]) -> None:
        reread: set[int] = set()
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != _kafka().KafkaError._PARTITION_EOF:
                    log.warning("consumer error: %s", err)
                    self.counters.inc("consumer_errors")
                continue
            part = msg.partition()
            if part not in self.partitions or part in reread:
                continue  # revoked while this record waited: its next owner reads it again
            offset = msg.offset()
            back = self._positions.gap(part, offset)
            if back is not None:  # see positions.py: read again once from the gap
                self.counters.inc("input_gaps")
                log.debug("input partition %d: offsets %d-%d skipped by the fetch; reading again",
                          part, back, offset - 1)
                self.consumer.seek(_kafka().TopicPartition(self.names.input, part, back))
                reread.add(part)
                continue
            self._handle(msg)
            self._positions.advance(part, offset)

    def _commit(self, sync: bool = False, everything: bool = False) -> None:
        """Snapshot the sessions changed since the last commit that are between runs (all of
        them with ``everything``, and those unsaved for too long), flush, commit offsets."""
        prod = self.producer
        parts = self.settings.partitions
        # A snapshot must never be durable before the events it reflects: if the process
        # died with the snapshot delivered but an output still queued, a restart would
        # treat the input as done and the output would be lost. (Records to different
        # topics travel in different batches, so a single flush does not order them.)
        # So: flush, then write the snapshots.
        now = time.monotonic()
        unsaved = self._unsaved
        due: list[str] = []
        for sid, part in self.dirty.items():
            state = self.states.get(sid)
            if state is None or everything or state.idle:
                unsaved.get(part, {}).pop(sid, None)
                due.append(sid)
        self.dirty.clear()
        deadline = float("inf")
        for waiting in unsaved.values():
            while waiting:  # oldest first (insertion order = offset order)
                sid, (_, since) = next(iter(waiting.items()))
                if not everything and now - since < self._delay:
                    deadline = min(deadline, since + self._delay)
                    break
                del waiting[sid]
                due.append(sid)
        # Serialised before the flush: a session too large to save is failed here, and the
        # events that says so are flushed with the rest, before its snapshot.
        snapshots = [(sid, data) for sid in due if (data := self._snapshot_of(sid)) is not None]
        prod.flush(30)
        for sid, data in snapshots:
            produce(prod, self.names.journal, data, snapshot_key(sid),
                    partition=journal_partition(sid, parts))
        self._delay_deadline = deadline
        self.counters.inc("snapshots", len(snapshots))
        while self._finished and now - self._finished[0][0] >= self._retention:
            _, sid, keys = self._finished.popleft()
            for key in keys:  # after the snapshot: the partition keeps that order
                produce(prod, self.names.journal, None, key, partition=journal_partition(sid, parts))
            self.counters.inc("tombstones", len(keys))
        if now - self._last_sweep >= self._sweep_every:
            self._last_sweep = now
            self._close_idle_sessions()
        # Everything the applied records caused is durable before their offsets are; a lost
        # commit only means re-delivery, which the machine drops.
        TopicPartition = _kafka().TopicPartition
        offsets = []
        for p, o in self._positions.next.items():
            held = unsaved.get(p)
            if held:  # not past the first record of a session with no snapshot since
                o = next(iter(held.values()))[0]
            offsets.append(TopicPartition(self.names.input, p, o))
        self.producer.commit(self.consumer, offsets=offsets, sync=sync)
        self._last_commit = time.monotonic()

    def _snapshot_of(self, sid: str) -> bytes | None:
        """The snapshot of ``sid`` (None: closed or evicted, nothing to save). A state that
        cannot be a record fails its run and queued inputs (and, if that is not enough, its
        short-term memory) with an error naming the cause; its other state is saved."""
        state = self.states.get(sid)
        if state is None:
            return None
        why = ""
        limit = self.router.limit  # the largest record the producer takes
        data: bytes | None = None
        try:
            data = state.to_bytes()
            if len(data) <= limit:
                return data
            why = f"its state of {len(data)} bytes is larger than a record may be ({limit})"
        except (TypeError, ValueError) as err:  # e.g. an int orjson cannot write
            why = f"its state cannot be serialised ({type(err).__name__}: {err})"
        self.counters.inc("sessions_failed")
        log.error("session %r cannot be saved: %s; failing its run and queued inputs",
                  sid[:100], why, extra=ids(session=sid, run=state.run.number if state.run else None))
        key = sid.encode()
        part = journal_partition(sid, self.settings.partitions)
        self.dead_letters.write(data, key,
                                f"snapshot of session {sid!r}: {why}",
                                source=(self.names.journal, part))
        for clear in (False, True):
            if state.run is not None:
                self._expire_calls_of(sid, state.run)
                self.router.cancel_held(key, [state.run])
            state, failed = self.machine.fail_session(state, ErrorInfo(
                "SessionStateTooLargeError",
                f"session {sid!r}: {why}; its running run and queued inputs were failed"
                + (" and its short-term memory cleared" if clear else "")), clear_memory=clear)
            self.router.emit(failed, key, (self.names.journal, part))
            try:
                data = state.to_bytes()
            except (TypeError, ValueError):
                continue
            if len(data) <= limit:
                return data
        log.error("session %r cannot be saved even empty; it is closed", sid[:100],
                  extra=ids(session=sid))
        del self.states[sid]
        self.machine.evict(sid)
        return None

    def _due(self, now: float) -> bool:
        """Whether delayed snapshots, tombstones or the idle-session sweep are due."""
        if now >= self._delay_deadline:
            return True
        if self._finished and now - self._finished[0][0] >= self._retention:
            return True
        return bool(now - self._last_sweep >= self._sweep_every)

    def _close_idle_sessions(self) -> None:
        """Tombstone the snapshots of sessions idle longer than ``session_ttl_ms``."""
        now = time.time() * 1000
        horizon = now - self.settings.session_ttl_ms
        parts = self.settings.partitions
        seen = self._seen
        closed = [sid for sid, st in self.states.items()
                  if st.idle and min(st.clock, seen.get(sid, now)) < horizon]
        for sid in closed:
            seen.pop(sid, None)
            produce(self.producer, self.names.journal, None, snapshot_key(sid),
                    partition=journal_partition(sid, parts))
            del self.states[sid]
        self.machine.evict(*closed)
        self.counters.inc("sessions_closed", len(closed))

    def _handle(self, msg: Any) -> None:
        key, value = msg.key(), msg.value()
        local = self.executor
        part = msg.partition()
        verdict = self.admission.check(
            key, value, partition=part, offset=msg.offset(), timestamp_ms=msg.timestamp()[1],
            header=lambda name: header(msg.headers(), name),
            decoded=local.sent_results.pop(value, None) if local is not None and value else None)
        if type(verdict) is Refused:
            return self.dead_letters.write(value, key, verdict.reason, source=msg)
        if type(verdict) is Misrouted:
            return self.router.forward(msg, verdict)
        assert isinstance(verdict, AgentEvent) and key is not None
        sid = verdict.session_id
        state_before = self.states.get(sid)
        metrics = self.metrics
        before = None if metrics is None else metrics.before_apply(state_before)
        applied = apply_record(self.machine, self.router, state_before, verdict, key, msg)
        if applied is None:
            return None
        state, ended = applied
        if metrics is not None and before is not None:
            metrics.after_apply(sid, state, before)
        for run in ended:
            self._expire_calls_of(sid, run)
        self.states[sid] = state
        self._seen[sid] = time.time() * 1000
        self.dirty[sid] = part
        waiting = self._unsaved.get(part)
        if waiting is None:
            waiting = self._unsaved[part] = {}
        if sid not in waiting:
            now = time.monotonic()
            waiting[sid] = (msg.offset(), now)
            if self._delay_deadline == float("inf"):
                self._delay_deadline = now + self._delay
        return None

    def _expire_calls_of(self, sid: str, run: RunState) -> None:
        """A run is over: its calls' journal records expire after the retention."""
        if run.calls:
            self._finished.append((time.monotonic(), sid, finished_run_keys(run.calls)))
