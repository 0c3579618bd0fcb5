"""The Kafka worker: an orchestrator that drives the session machine, and executors that
perform durable calls, in one process by default (``role``: all, orchestrator, executor).

Orchestrator: a consumer group on ``app.input``, which carries everything that enters the
session machine: InputEvents from users and DurableCallResults from executors. One topic
means one order per partition, so re-processing after a crash applies the same records in
the same order and emits the same event ids. It produces what the machine emits (every
event to ``app.events``, the history; requests to ``app.requests``; outputs to
``app.output``) at once. Every ``commit_interval_ms`` it flushes, writes a snapshot of
each session touched since the last commit that is between runs to ``app.journal`` (one
in the middle of a run waits for the run's end, at most ``snapshot_delay_ms``), flushes,
and only then commits its offsets (as Kafka Streams does), never past the first record of
a session that changed since its last snapshot. After a crash it re-reads from the last commit: records
already reflected in a snapshot are dropped by the machine (known input ids, calls that
have their outcome), the others are applied again in the same order and emit the same
event ids, so a consumer that drops seen event ids sees each event once. On assignment
it restores sessions from ``app.journal`` (read to PARTITION_EOF) and re-issues requests
that have no recorded outcome.

Retention: a finished run's call outcomes and started marks are tombstoned
``journal_retention_ms`` after it finished (by then no redelivered request can ask for
them), and a session idle for ``session_ttl_ms`` (by its logical clock) is closed: its
snapshot is tombstoned, so the compacted journal does not grow without bound.

Executor: a consumer group on ``app.requests``; calls run on a thread pool (one slow call
never blocks another session). Before a non-idempotent call it journals a started mark
(flushed); a request found started without an outcome is answered UNKNOWN, so the machine
reconciles or fails closed instead of repeating a side effect.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from typing import Any

from eddies.connectors.calls import CallPerformer, Resolver, result_event
from eddies.engine import Agent, AgentPlan, SessionMachine, SessionState
from eddies.engine.machine import UnsupportedEventError
from eddies.events import (
    AgentEvent,
    CallStatus,
    DecodeError,
    DurableCallRequest,
    DurableCallResult,
    ErrorInfo,
    InputEvent,
    OutputEvent,
    decode,
    encode,
    encode_value,
    partition_for,
)
from eddies.events.ids import run_of_call, session_of_call

from .client import next_batch, produce
from .journal import JournalView, read_journal
from .outbox import DeliveryErrors, Outbox
from .records import (
    HEADERS,
    dlq_headers,
    journal_partition,
    outcome_key,
    snapshot_key,
    started_key,
)
from .settings import Settings, load_agent
from .topics import TopicNames, ensure_topics

log = logging.getLogger("eddies.worker")


def _kafka() -> Any:
    """confluent_kafka, imported on first use (it is not needed to import this module)."""
    import confluent_kafka

    return confluent_kafka


class Counters:
    """Thread-safe counters a worker exposes (dlq, inputs, results, outputs, calls, ...).

    Each thread counts in its own dict (no lock on the hot path); readers sum them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._dicts: list[dict[str, int]] = []

    def _own(self) -> dict[str, int]:
        mine: dict[str, int] = {}
        self._local.values = mine
        with self._lock:
            self._dicts.append(mine)
        return mine

    def inc(self, name: str, n: int = 1) -> None:
        """Add ``n`` to ``name``."""
        try:
            mine: dict[str, int] = self._local.values
        except AttributeError:
            mine = self._own()
        mine[name] = mine.get(name, 0) + n

    def get(self, name: str) -> int:
        """The value of ``name`` (0 if never counted)."""
        return self.snapshot().get(name, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter."""
        total: dict[str, int] = {}
        with self._lock:
            dicts = list(self._dicts)
        for d in dicts:
            for k, v in dict(d).items():  # dict(d) is one step under the GIL
                total[k] = total.get(k, 0) + v
        return total


def group_consumer(s: Settings, role: str) -> Any:
    """The consumer of a role's group ``{app}.{role}``: manual commits, range assignment (so
    co-partitioned topics land together), short session timeout (fast joins on the
    embedded broker), low fetch wait (latency)."""
    return _kafka().Consumer(s.client_config(**{
        "group.id": f"{s.app}.{role}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
        "session.timeout.ms": s.session_timeout_ms, "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": s.fetch_wait_ms,
    }))


class Worker:
    """Runs the roles of ``settings.role`` in threads until :meth:`stop`.

    Example::

        worker = Worker(load_settings(overrides={"bootstrap_servers": "localhost:9092"}))
        worker.start()
        ...
        worker.stop()
    """

    def __init__(self, settings: Settings, agent: Agent | AgentPlan | None = None) -> None:
        self.settings = settings.validate()
        if agent is None:
            agent = load_agent(settings.agent)
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        self.names = TopicNames(settings.app)
        self.counters = Counters()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.orchestrator: Orchestrator | None = None
        self.executor: KafkaExecutor | None = None

    def start(self) -> Worker:
        """Create missing topics, then start the role threads."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.settings.client_config())
        ensure_topics(admin, self.names, self.settings.partitions, self.settings.replication)
        role = self.settings.role
        if role in ("all", "orchestrator"):
            self.orchestrator = Orchestrator(self)
        if role in ("all", "executor"):
            resolver = self.orchestrator.machine.callable_for if self.orchestrator else None
            # With both roles in one process the orchestrator hands its requests to its own
            # executor in memory: no round trip through APP.requests (which stays the work
            # queue of separate executor processes).
            self.executor = KafkaExecutor(self, resolver, local=role == "all")
        if self.orchestrator is not None:
            self.orchestrator.executor = self.executor
            self._spawn("eddies-orchestrator", self.orchestrator.run)
        if self.executor is not None:
            self._spawn("eddies-executor", self.executor.run)
        return self

    def _spawn(self, name: str, target: Any) -> None:
        def guarded() -> None:
            try:
                target(self._stop)
            except BaseException as err:  # surfaced through .errors and wait()
                log.exception("%s stopped with an error", name)
                self.errors.append(err)
                self._stop.set()

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait_assigned(self, timeout: float = 30.0) -> bool:
        """Wait until every role has joined its group and restored its partitions."""
        parts = [p for p in (self.orchestrator, self.executor) if p is not None]
        return all(p.assigned.wait(timeout) for p in parts)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the roles (offsets committed, producers flushed)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    @property
    def stopped(self) -> bool:
        """Whether the worker was stopped (or a role failed)."""
        return self._stop.is_set()


class Orchestrator:
    """Consumes inputs and call results, drives the session machine, produces its output."""

    def __init__(self, worker: Worker) -> None:
        s = worker.settings
        self.worker = worker
        self.settings = s
        self.names = worker.names
        self.counters = worker.counters
        self.machine = SessionMachine(worker.plan)
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
        # while records already returned by the consumer wait to be applied.
        self._processed: dict[int, int] = {}
        self._gaps: dict[int, int] = {}  # partition -> offset after which a gap was re-read
        # With transactions, executors' commit markers leave gaps all the time: not re-read.
        self._reread_gaps = not s.exactly_once
        self.assigned = threading.Event()
        self._interval = s.commit_interval_ms / 1000
        self._last_commit = time.monotonic()
        # (when, session, journal keys) of finished runs, tombstoned after the retention.
        self._finished: deque[tuple[float, str, list[bytes]]] = deque()
        self._retention = s.journal_retention_ms / 1000
        self._sweep_every = min(60.0, s.session_ttl_ms / 10_000)  # a tenth of the TTL, at most 1 min
        self._last_sweep = time.monotonic()
        self.producer = Outbox(s, "orchestrator")
        self.consumer = group_consumer(s, "orchestrator")
        # The in-process executor (role "all"), given requests in memory; else they go to
        # APP.requests for executor processes.
        self.executor: KafkaExecutor | None = None

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set."""
        self.consumer.subscribe([self.names.input], on_assign=self._on_assign,
                                on_revoke=self._on_revoke)
        # Requests handed to this process's executor wait in memory, not in Kafka: past this
        # many unfinished calls the input is paused until calls finish (slow models, bursts).
        limit = self.settings.executor_concurrency * 64
        paused = False
        try:
            while not stop.is_set():
                local = self.executor  # set only with role "all": the local executor
                if local is not None:
                    busy = len(local.inflight) >= limit
                    if busy != paused:
                        assigned = self.consumer.assignment()
                        if busy:
                            self.consumer.pause(assigned)
                            self.counters.inc("input_pauses")
                        else:
                            self.consumer.resume(assigned)
                        paused = busy
                msgs = next_batch(self.consumer, self.settings.batch_size, 0.05)
                if msgs:
                    self._process(msgs)
                self.producer.poll(0)
                now = time.monotonic()
                if now - self._last_commit >= self._interval and (self.dirty or self._due(now)):
                    self._commit()
        finally:
            self._commit(everything=True)
            self.consumer.close()

    # --- partitions ----------------------------------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions} - self.partitions
        view = read_journal(self.settings, self.names.journal, numbers)
        log.info("orchestrator assigned partitions %s: %d journal records, %d sessions",
                 sorted(numbers), view.records, len(view.snapshots))
        local = self.executor
        if local is not None:
            local.submit_view(view)  # before the requests it decides about
        for sid, data in view.snapshots.items():
            state, requests = self.machine.resume(SessionState.from_bytes(data))
            self.states[sid] = state
            for req in requests:
                p = req.payload
                assert isinstance(p, DurableCallRequest)
                if local is not None:
                    # It answers a call with a recorded outcome by sending that result again
                    # (it may have been lost in a crash after the outcome was journaled).
                    local.submit(req)
                    self.counters.inc("requests_reissued")
                elif (p.call_id, p.attempt) not in view.outcomes:
                    self._produce_event(self.names.requests, req)
                    self.counters.inc("requests_reissued")
        self._schedule_finished_from(view)
        self.producer.flush(10)
        self.partitions |= numbers
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
        log.info("orchestrator partitions revoked: %s", sorted(tp.partition for tp in partitions))
        self._commit(sync=True, everything=True)
        numbers = {tp.partition for tp in partitions}
        for part in numbers:
            self._processed.pop(part, None)
            self._gaps.pop(part, None)
            self._unsaved.pop(part, None)
        gone = [s for s in self.states if partition_for(s, self.settings.partitions) in numbers]
        for sid in gone:
            del self.states[sid]
        self.machine.evict(*gone)
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
            expected = self._processed.get(part, offset)
            if offset > expected and self._gaps.get(part) != expected and self._reread_gaps:
                # Offsets skipped. Legitimate after transaction markers; on the embedded
                # broker also a defect: under concurrent producers a record can become
                # visible after a reader passed its offset. Read again once from there.
                self._gaps[part] = expected
                self.counters.inc("input_gaps")
                log.debug("input partition %d: offsets %d-%d skipped by the fetch; reading again",
                          part, expected, offset - 1)
                self.consumer.seek(_kafka().TopicPartition(self.names.input, part, expected))
                reread.add(part)
                continue
            self._handle(msg)
            self._processed[part] = offset + 1

    def _commit(self, sync: bool = False, everything: bool = False) -> None:
        """Snapshot the sessions changed since the last commit that are between runs (all of
        them with ``everything``, and those unsaved for too long), flush, commit offsets."""
        prod = self.producer
        parts = self.settings.partitions
        # A snapshot must never be durable before the events it reflects: if the process
        # died with the snapshot delivered but an output still queued, a restart would
        # treat the input as done and the output would be lost. (Records to different
        # topics travel in different batches, so a single flush does not order them.)
        prod.flush(30)
        now = time.monotonic()
        unsaved = self._unsaved
        snapshots = 0

        def snapshot(sid: str) -> None:
            nonlocal snapshots
            state = self.states.get(sid)
            if state is not None:  # else closed or evicted: nothing left to save
                produce(prod, self.names.journal, state.to_bytes(), snapshot_key(sid),
                        partition=journal_partition(sid, parts))
                snapshots += 1

        for sid, part in self.dirty.items():
            state = self.states.get(sid)
            if state is None or everything or state.idle:
                unsaved.get(part, {}).pop(sid, None)
                snapshot(sid)
        self.dirty.clear()
        deadline = float("inf")
        for waiting in unsaved.values():
            while waiting:  # oldest first (insertion order = offset order)
                sid, (_, since) = next(iter(waiting.items()))
                if not everything and now - since < self._delay:
                    deadline = min(deadline, since + self._delay)
                    break
                del waiting[sid]
                snapshot(sid)
        self._delay_deadline = deadline
        self.counters.inc("snapshots", snapshots)
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
        for p, o in self._processed.items():
            waiting = unsaved.get(p)
            if waiting:  # not past the first record of a session with no snapshot since
                o = next(iter(waiting.values()))[0]
            offsets.append(TopicPartition(self.names.input, p, o))
        self.producer.commit(self.consumer, offsets=offsets, sync=sync)
        self._last_commit = time.monotonic()

    def _due(self, now: float) -> bool:
        """Whether delayed snapshots, tombstones or the idle-session sweep are due."""
        if now >= self._delay_deadline:
            return True
        if self._finished and now - self._finished[0][0] >= self._retention:
            return True
        return now - self._last_sweep >= self._sweep_every

    def _close_idle_sessions(self) -> None:
        """Tombstone the snapshots of sessions idle longer than ``session_ttl_ms``."""
        horizon = int(time.time() * 1000) - self.settings.session_ttl_ms
        parts = self.settings.partitions
        closed = [sid for sid, st in self.states.items() if st.idle and st.clock < horizon]
        for sid in closed:
            produce(self.producer, self.names.journal, None, snapshot_key(sid),
                    partition=journal_partition(sid, parts))
            del self.states[sid]
        self.machine.evict(*closed)
        self.counters.inc("sessions_closed", len(closed))

    def _handle(self, msg: Any) -> None:
        key, value = msg.key(), msg.value()
        if key is None:
            return self._dlq(msg, "record has no key; the key must be the session id")
        if value is None:
            return self._dlq(msg, "record has no value")
        if len(value) > self.settings.max_record_bytes:
            return self._dlq(msg, f"record of {len(value)} bytes exceeds max_record_bytes="
                                  f"{self.settings.max_record_bytes}")
        local = self.executor
        ev = local.sent_results.pop(value, None) if local is not None else None
        if ev is None:
            try:
                ev = decode(value)
            except DecodeError as err:
                return self._dlq(msg, f"undecodable: {err}")
        try:
            sid = key.decode()
        except UnicodeDecodeError:
            return self._dlq(msg, "the key is not UTF-8 text")
        if ev.session_id != sid:
            return self._dlq(msg, f"key {sid!r} differs from the event's session_id {ev.session_id!r}")
        if ev.agent and ev.agent != self.worker.plan.agent_name:
            return self._dlq(msg, f"unknown agent {ev.agent!r}; this worker runs "
                                  f"{self.worker.plan.agent_name!r}")
        payload = ev.payload
        if isinstance(payload, InputEvent):
            if not ev.event_id:
                ev.event_id = f"in/{msg.partition()}/{msg.offset()}"
            if not ev.timestamp:
                ev.timestamp = max(msg.timestamp()[1], 0)
            self.counters.inc("inputs")
        elif isinstance(payload, DurableCallResult):
            self.counters.inc("results")
        else:
            return self._dlq(msg, f"{ev.type} is not accepted on {self.names.input}; "
                                  "send InputEvent")
        ev.seq = 0
        state = self.states.get(sid)
        if state is None:
            if isinstance(payload, DurableCallResult):
                log.warning("result %s for session %s, which has no state here",
                            payload.call_id, sid)
                self.counters.inc("orphan_results")
            state = self.machine.new_state(sid)
        before = state.run
        try:
            state, emitted = self.machine.apply(state, ev)
        except (UnsupportedEventError, ValueError) as err:
            return self._dlq(msg, f"not accepted: {err}")
        if before is not None and state.run is not before and before.calls:
            keys = [k for cid, rec in before.calls.items() for a in range(1, rec.attempt + 1)
                    for k in (outcome_key(cid, a), started_key(cid, a))]
            self._finished.append((time.monotonic(), sid, keys))
        self.states[sid] = state
        part = msg.partition()
        self.dirty[sid] = part
        waiting = self._unsaved.get(part)
        if waiting is None:
            waiting = self._unsaved[part] = {}
        if sid not in waiting:
            now = time.monotonic()
            waiting[sid] = (msg.offset(), now)
            if self._delay_deadline == float("inf"):
                self._delay_deadline = now + self._delay
        for out in emitted:
            self._route(out, key)
        self.counters.inc("events", len(emitted))
        return None

    def _route(self, ev: AgentEvent, key: bytes) -> None:
        data = encode(ev)
        prod = self.producer
        try:  # the common case without a wrapper frame; BufferError: wait for room
            prod.produce(self.names.events, data, key, headers=HEADERS)
        except BufferError:
            produce(prod, self.names.events, data, key, headers=HEADERS)
        payload = ev.payload
        if isinstance(payload, DurableCallRequest):
            if self.executor is not None:
                self.executor.submit(ev)
            else:
                produce(prod, self.names.requests, data, key, headers=HEADERS)
            self.counters.inc("requests")
        elif isinstance(payload, OutputEvent):
            produce(prod, self.names.output, data, key, headers=HEADERS)
            self.counters.inc("outputs_failed" if payload.error else "outputs")

    def _produce_event(self, topic: str, ev: AgentEvent) -> None:
        produce(self.producer, topic, encode(ev), ev.session_id.encode(), headers=HEADERS)

    def _dlq(self, msg: Any, reason: str) -> None:
        produce(
            self.producer, self.names.dlq, msg.value(), msg.key(), partition=msg.partition(),
            headers=dlq_headers(reason, msg.topic(), msg.partition(), msg.offset(), msg.headers()),
        )
        self.counters.inc("dlq")
        log.warning("dead-lettered %s/%s/%s: %s", msg.topic(), msg.partition(), msg.offset(), reason)


class KafkaExecutor:
    """Performs requests on a bounded thread pool: those of APP.requests (its own consumer
    group), or with ``local`` those its process's orchestrator hands it in memory."""

    def __init__(self, worker: Worker, resolver: Resolver | None, local: bool = False) -> None:
        from confluent_kafka import Producer

        s = worker.settings
        self.worker = worker
        self.settings = s
        self.names = worker.names
        self.counters = worker.counters
        self.resolver = resolver
        self.assigned = threading.Event()
        self.view = JournalView()
        self.inflight: set[tuple[str, int]] = set()
        self.owned: set[int] = set()
        self._offsets: dict[int, dict[int, bool]] = {}  # partition -> offset -> done
        self._done: queue.SimpleQueue[tuple[int | None, int, tuple[str, int], bytes | None]] = (
            queue.SimpleQueue())
        self._per_thread = threading.local()  # a CallPerformer per call thread
        self._pending_commit: dict[int, int] = {}  # partition -> next offset to commit
        # Outcomes stay in memory briefly: enough for requests re-issued or redelivered while
        # this executor keeps its partitions; every new assignment re-reads the journal.
        self._kept: deque[tuple[float, tuple[str, int]]] = deque()
        self._retention = min(60.0, s.journal_retention_ms / 1000)
        self._interval = s.commit_interval_ms / 1000
        self._last_commit = time.monotonic()
        # Calls run on executor_concurrency threads fed by one queue (lighter per call than
        # concurrent.futures: no future, no callback; a failure stops the worker).
        self._calls: queue.SimpleQueue[tuple[AgentEvent, int | None, int] | None] = queue.SimpleQueue()
        self._call_threads: list[threading.Thread] = []
        self.producer = Outbox(s, "executor")
        # Started marks must be durable before the side effect, outside any transaction.
        self.marks_delivery = DeliveryErrors("the executor's started-mark producer")
        self.marks = Producer(s.client_config(**{"enable.idempotence": True, "linger.ms": 0},
                                              **self.marks_delivery.config()))
        # Local mode: results sent to APP.input by their bytes, so the orchestrator of this
        # process takes the event instead of decoding the record it reads back.
        self.sent_results: dict[bytes, AgentEvent] = {}
        self.consumer = None if local else group_consumer(s, "executor")
        # Local mode: the orchestrator's thread dispatches requests itself (no hop through
        # this executor's loop); the lock guards what dispatching and draining share
        # (inflight, view, the offsets of done requests).
        self._lock = threading.Lock()
        self._uncommitted = False  # local results produced since the last commit

    @property
    def local(self) -> bool:
        """Whether requests come from this process's orchestrator (no consumer of its own)."""
        return self.consumer is None

    def submit(self, request: AgentEvent) -> None:
        """Local mode: perform ``request``, answer it from the journal, or answer UNKNOWN
        (decided at once, on the caller's thread; the call runs on a call thread)."""
        with self._lock:
            self._dispatch(request, None, 0, 0)

    def submit_view(self, view: JournalView) -> None:
        """Local mode: outcomes and started marks journaled for partitions just assigned to
        the orchestrator, known before any request submitted after them is decided."""
        with self._lock:
            self.view.learn_calls(view)

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set; in-flight calls finish before it returns."""
        consumer = self.consumer
        if consumer is None:
            self.assigned.set()
        else:
            consumer.subscribe([self.names.requests], on_assign=self._on_assign,
                               on_revoke=self._on_revoke)
        limit = self.settings.executor_concurrency * 4
        try:
            while not stop.is_set():
                if consumer is None:  # requests arrive through submit()
                    self._drain(block=True)
                    continue
                room = limit - len(self.inflight)
                if room <= 0:
                    self._drain(block=True)
                    continue
                for msg in next_batch(consumer, min(room, self.settings.batch_size), 0.02):
                    self._handle(msg)
                self._drain(block=False)
        finally:
            for _ in self._call_threads:
                self._calls.put(None)
            for thread in self._call_threads:
                thread.join()
            self._drain(block=False, force=True)
            self.producer.flush(10)
            if consumer is not None:
                consumer.close()

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        numbers = {tp.partition for tp in partitions}
        self.view.learn_calls(read_journal(self.settings, self.names.journal, numbers))
        self.owned |= numbers
        self.assigned.set()

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self._drain(block=False, force=True)
        for tp in partitions:
            self.owned.discard(tp.partition)
            self._offsets.pop(tp.partition, None)
            self._pending_commit.pop(tp.partition, None)

    def _handle(self, msg: Any) -> None:
        err = msg.error()
        if err is not None:
            return
        part, offset = msg.partition(), msg.offset()
        if part not in self.owned:
            return  # revoked while this request waited: its next owner reads it again
        self._offsets.setdefault(part, {})[offset] = False
        try:
            request = decode(msg.value() or b"")
            req = request.payload
            if not isinstance(req, DurableCallRequest):
                raise DecodeError(f"{request.type} is not a DurableCallRequest")
        except DecodeError as err:
            produce(self.producer, self.names.dlq, msg.value(), msg.key(), partition=part,
                    headers=dlq_headers(f"undecodable request: {err}", msg.topic(),
                                                      part, offset, msg.headers()))
            self.counters.inc("dlq")
            self._settle(part, offset)
            return
        self._dispatch(request, part, offset, msg.timestamp()[1])

    def _settle(self, part: int | None, offset: int) -> None:
        """A request needs no more work: its APP.requests offset may be committed."""
        if part is not None:
            self._offsets[part][offset] = True

    def _answer(self, result: AgentEvent, part: int | None, offset: int) -> None:
        """Answer a request without performing it."""
        self._send_result(result)
        self._uncommitted = True
        self._settle(part, offset)

    def _dispatch(self, request: AgentEvent, part: int | None, offset: int, produced_ms: int) -> None:
        """Perform a request, answer it from the journal, or answer UNKNOWN. ``part`` is
        its APP.requests partition (None for a local request); ``produced_ms`` its record's
        timestamp (0: unknown)."""
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        if ref in self.inflight:  # a re-issued request for a call already running here
            self._settle(part, offset)
            return
        recorded = self.view.outcomes.get(ref)
        if recorded is not None:
            self._answer(decode(recorded), part, offset)
            self.counters.inc("results_resent")
            return
        too_old = produced_ms > 0 and time.time() * 1000 - produced_ms > self.settings.journal_retention_ms
        if (not req.idempotent and ref in self.view.started) or too_old:
            # A request older than the journal retention may belong to a run whose outcome was
            # already tombstoned: never perform it again; UNKNOWN is ignored by a finished run.
            self._answer(result_event(request, CallStatus.UNKNOWN), part, offset)
            self.counters.inc("results_unknown")
            return
        self.inflight.add(ref)
        if len(self._call_threads) < self.settings.executor_concurrency:
            thread = threading.Thread(target=self._call_loop, daemon=True,
                                      name=f"eddies-call-{len(self._call_threads)}")
            thread.start()
            self._call_threads.append(thread)
        self._calls.put((request, part, offset))

    def _call_loop(self) -> None:
        while (item := self._calls.get()) is not None:
            try:
                self._perform(*item)
            except BaseException as err:  # a bug or a broken producer: stop the worker
                log.error("executor task failed: %r", err)
                self.worker.errors.append(err)
                self.worker._stop.set()

    def _perform(self, request: AgentEvent, part: int | None, offset: int) -> None:
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        ref = (req.call_id, req.attempt)
        jpart = journal_partition(request.session_id, self.settings.partitions)
        try:
            if not req.idempotent:
                # Durable before the side effect: a crash from here on leaves "unknown".
                produce(self.marks, self.names.journal, b"1", started_key(*ref), partition=jpart)
                self.marks_delivery.check_flushed(self.marks)
            performer = getattr(self._per_thread, "performer", None)
            if performer is None:
                performer = self._per_thread.performer = CallPerformer(self.worker.plan, self.resolver)
            try:
                value = encode_value(performer.perform(req), f"result of {req.target}")
                result = result_event(request, CallStatus.OK, value)
            except Exception as err:
                result = result_event(request, CallStatus.ERROR, "null", ErrorInfo.of(err))
            data = encode(result)
            produce(self.producer, self.names.journal, data, outcome_key(*ref), partition=jpart)
            self._send_result(result, data)
            self.counters.inc("calls_performed")
            self._done.put((part, offset, ref, data))
        except BaseException:
            self._done.put((part, offset, ref, None))
            raise

    def _send_result(self, result: AgentEvent, data: bytes | None = None) -> None:
        # Results enter the session machine through the input topic, in partition order.
        if data is None:
            data = encode(result)
        if self.local:
            sent = self.sent_results
            if len(sent) >= 50_000:  # results this process never read back (partition moved)
                sent.clear()
            sent[data] = result
        produce(self.producer, self.names.input, data, result.session_id.encode(), headers=HEADERS)

    def _drain(self, block: bool, force: bool = False) -> None:
        TopicPartition = _kafka().TopicPartition
        done = self._done
        try:
            item: tuple[int | None, int, tuple[str, int], bytes | None] | None = (
                done.get(timeout=0.05) if block else done.get_nowait())
        except queue.Empty:
            item = None
        now = time.monotonic()
        with self._lock:
            while item is not None:
                part, offset, ref, data = item
                if part is None:
                    self._uncommitted = True
                else:
                    pending = self._offsets.get(part, {})
                    if offset in pending:  # not if it was committed meanwhile (a redelivered copy)
                        pending[offset] = True
                self.inflight.discard(ref)
                if data is not None:
                    self.view.outcomes[ref] = data
                    self._kept.append((now, ref))
                try:
                    item = done.get_nowait()
                except queue.Empty:
                    item = None
            for part, offsets in self._offsets.items():  # advance over the done prefix
                while offsets:
                    first = next(iter(offsets))
                    if not offsets[first]:
                        break
                    offsets.pop(first)
                    self._pending_commit[part] = first + 1
            while self._kept and now - self._kept[0][0] >= self._retention:
                _, old = self._kept.popleft()  # the orchestrator tombstones these in the journal
                self.view.outcomes.pop(old, None)
                self.view.started.discard(old)
        # Local results need no offsets, only the transaction (if any) committed.
        work = self._pending_commit or (self._uncommitted and self.producer.transactional)
        due = work and now - self._last_commit >= self._interval
        if not force and not due:
            self.producer.poll(0)
            return
        commits = [TopicPartition(self.names.requests, p, o) for p, o in self._pending_commit.items()]
        self._pending_commit.clear()
        self._uncommitted = False
        self._last_commit = now
        try:  # results durable before their requests are committed
            self.producer.commit(self.consumer, offsets=commits, sync=force)
        except _kafka().KafkaException as err:
            if self.producer.transactional:
                raise  # see Outbox.commit: stop, restart, recover
            log.info("executor commit skipped: %s", err)  # re-delivery is safe
        self.producer.poll(0)
