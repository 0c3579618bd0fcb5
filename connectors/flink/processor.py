"""What the Flink job does with one ``APP.input`` record of one session, without Flink.

The same steps as the Kafka worker's orchestrator, with the same shared parts: admission
(:mod:`eddies.connectors.runtime.admission`), dead letters and routing (:mod:`eddies.connectors.
dead_letters`, :mod:`eddies.connectors.runtime.routing`). What differs is where things live: a
session's state is in Flink keyed state (:mod:`.keyed_state`, through a :class:`Store`),
and records go out as rows (:class:`Rows`) that the job's KafkaSinks write. Kafka offsets
and state are checkpointed together by Flink, so there are no snapshots to write and no
offsets to hold back, and no request needs to be issued again after a restore: a request
emitted before the checkpoint was flushed by the sink at that checkpoint, and one after it
is emitted again when its cause is read again (same event id).

Example (the job's process function does this per record)::

    processor = Processor(settings, plan, signer)
    record = InputRecord("support.input", key, value, partition, offset, timestamp, headers)
    rows = processor.handle(record, store)   # rows for the sinks
    timers = processor.timers                # processing-time timers to register
"""

from __future__ import annotations

import logging
import struct
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Protocol

from eddies.connectors.flink import keyed_state
from eddies.connectors.flink.keyed_state import Stored
from eddies.connectors.runtime.admission import Admission, Misrouted, Refused
from eddies.connectors.runtime.applying import apply_record
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.dead_letters import DeadLetters
from eddies.connectors.runtime.records import HEADERS, finished_run_keys, header, journal_partition
from eddies.connectors.runtime.routing import Router
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan, SessionMachine, SessionState
from eddies.engine.state import RunState
from eddies.events import AgentEvent

log = logging.getLogger("eddies.flink")

#: A row for the job's sinks: topic, partition (-1: by key), key, value, headers, timestamp
#: (-1: none); the field order of the Java ``KafkaRecordWriter``.
Row = tuple[str, int, bytes | None, bytes | None, bytes, int]

#: How many sessions' deserialised states a process function keeps between their records
#: (one evicted is read from keyed state again; its suspended action is replayed). About
#: 2-5 KB of Python objects each between runs.
CACHED_SESSIONS = 50_000
#: Journal keys of a finished run wait in keyed state under this prefix for their expiry.
EXPIRING = "x:"
#: When the session may be closed if nothing happens until then (ms, a timer's time).
IDLE_DUE = "k:due"

_LEN = struct.Struct(">i")


def encode_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> bytes:
    """Headers in the Java helper's encoding: per header, name length, name, value length
    (-1: null), value; all lengths 4-byte big-endian."""
    out = bytearray()
    for name, value in headers or ():
        raw = name.encode()
        out += _LEN.pack(len(raw)) + raw
        if value is None:
            out += _LEN.pack(-1)
        else:
            out += _LEN.pack(len(value)) + value
    return bytes(out)


def decode_headers(data: bytes | None) -> list[tuple[str, bytes | None]]:
    """Inverse of :func:`encode_headers`."""
    out: list[tuple[str, bytes | None]] = []
    if not data:
        return out
    i = 0
    while i < len(data):
        (n,) = _LEN.unpack_from(data, i)
        name = data[i + 4:i + 4 + n].decode(errors="replace")
        i += 4 + n
        (m,) = _LEN.unpack_from(data, i)
        i += 4
        if m < 0:
            out.append((name, None))
        else:
            out.append((name, data[i:i + m]))
            i += m
    return out


_NULL = _LEN.pack(-1)
_STAMP = struct.Struct(">q")


def encode_batch(rows: Iterable[Row]) -> bytes:
    """Rows as one element for the Java ``OutputBatch``: per row, topic, partition, key,
    value, headers (length-prefixed; -1: null), timestamp (8 bytes); big-endian."""
    out = bytearray()
    pack = _LEN.pack
    for topic, partition, key, value, headers, timestamp in rows:
        raw = topic.encode()
        out += pack(len(raw))
        out += raw
        out += pack(partition)
        for b in (key, value):
            if b is None:
                out += _NULL
            else:
                out += pack(len(b))
                out += b
        out += pack(len(headers))
        out += headers
        out += _STAMP.pack(timestamp)
    return bytes(out)


class InputRecord:
    """A source row shown as confluent-kafka's ``Message`` (what admission, dead letters and
    forwarding read): key, value, partition, offset, timestamp, encoded headers."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_raw_headers", "_timestamp",
                 "_topic", "_value")

    def __init__(self, topic: str, key: bytes | None, value: bytes | None, partition: int,
                 offset: int, timestamp: int, headers: bytes | None) -> None:
        self._topic = topic
        self._key = key
        self._value = value
        self._partition = partition
        self._offset = offset
        self._timestamp = timestamp
        self._raw_headers = headers
        self._headers: list[tuple[str, bytes | None]] | None = None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        """(type, ms) as confluent-kafka gives it: type 0 when the record has none."""
        return (1, self._timestamp) if self._timestamp >= 0 else (0, 0)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        if self._headers is None:
            self._headers = decode_headers(self._raw_headers)
        return self._headers or None

    def header(self, name: str) -> bytes | None:
        """The first value of header ``name``."""
        return header(self.headers(), name) if self._raw_headers else None


#: Every event record's headers (the writer schema), encoded once.
_EVENT_HEADERS = encode_headers(HEADERS)


class Rows:
    """Collects what routing and dead-lettering produce as rows for the sinks (a
    :class:`eddies.connectors.runtime.sink.RecordSink`)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
                partition: int = -1, timestamp: int = -1, headers: Any = None) -> None:
        encoded = _EVENT_HEADERS if headers is HEADERS else encode_headers(headers)
        self.rows.append((topic, partition, key, value, encoded, timestamp))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def take(self) -> list[Row]:
        rows, self.rows = self.rows, []
        return rows


class Store(Protocol):
    """The keyed state of the current session: entries of one MapState."""

    def items(self) -> Iterable[tuple[str, bytes]]: ...
    def put(self, key: str, value: bytes) -> None: ...
    def put_all(self, entries: dict[str, bytes]) -> None: ...
    def remove(self, key: str) -> None: ...
    def clear(self) -> None: ...


class KeyedTrust:
    """The last trusted state of the current session (see
    :mod:`eddies.connectors.runtime.isolation`): what its keyed state holds, written after
    each record, so there is nothing to keep on the way."""

    def __init__(self) -> None:
        #: The current session's keyed state.
        self.store: Store | None = None
        self.since: dict[str, list[AgentEvent]] = {}  # (never any: keyed state has it)

    def start(self, sid: str, state: SessionState | None) -> list[AgentEvent] | None:
        return None

    def reset(self, sid: str) -> None:
        pass

    def rebuild(self, machine: SessionMachine, sid: str
                ) -> tuple[SessionState | None, list[AgentEvent]]:
        assert self.store is not None
        loaded = keyed_state.load(self.store.items())
        return (None if loaded is None else loaded[0]), []


class Processor:
    """Drives the session machine for the records of the sessions one subtask owns."""

    def __init__(self, settings: Settings, plan: AgentPlan, signer: ResultSigner,
                 counters: Counters | None = None, identities: ResultSigner | None = None) -> None:
        self.settings = settings
        self.names = TopicNames(settings.app)
        self.counters = counters or Counters()
        self.machine = SessionMachine(plan, max_memory_bytes=settings.max_memory_bytes)
        self.rows = Rows()
        self.admission = Admission(partitions=settings.partitions,
                                   max_record_bytes=settings.max_record_bytes,
                                   agent_name=plan.agent_name, signer=signer,
                                   input_topic=self.names.input, identities=identities,
                                   counters=self.counters)
        self.dead_letters = DeadLetters(self.rows, self.names.dlq, settings.max_record_bytes,
                                        self.counters)
        self.router = Router(settings, self.names, self.rows, self.counters, self.dead_letters)
        self._trust = KeyedTrust()
        # session -> (state, what keyed state holds for it): the deserialised state of
        # recent sessions, so a run's suspended action resumes in place.
        self._cache: OrderedDict[str, tuple[SessionState, Stored]] = OrderedDict()
        #: Processing-time timers (ms) the current record asks for (the job registers them).
        self.timers: list[int] = []
        # session -> the idle due it stored last, and the time its timer is registered for.
        self._idle_due: dict[str, int] = {}
        self._timer_at: dict[str, int] = {}

    def handle(self, record: InputRecord, store: Store) -> list[Row]:
        """Process one input record of the current key's session; the rows to write."""
        key, value = record.key(), record.value()
        verdict = self.admission.check(
            key, value, partition=record.partition(), offset=record.offset(),
            timestamp_ms=record.timestamp()[1], header=record.header)
        if type(verdict) is Refused:
            self.dead_letters.write(value, key, verdict.reason, source=record)
        elif type(verdict) is Misrouted:
            self.router.forward(record, verdict)
        else:
            assert isinstance(verdict, AgentEvent) and key is not None
            self._apply(verdict, key, record, store)
        return self.rows.take()

    def _apply(self, ev: AgentEvent, key: bytes, record: InputRecord, store: Store) -> None:
        sid = ev.session_id
        cached = self._session(sid, store)
        state, stored = cached if cached is not None else (None, None)
        self._trust.store = store
        applied = apply_record(self.machine, self.router, state, ev, key, record, self._trust)
        if applied is None:  # dead-lettered (after a double fault, half-changed): read it again
            self._forget(sid)
            return
        state, ended = applied
        expiring: dict[str, bytes] = {}
        for run in ended:
            self._expire_calls_of(run, expiring)
        self._save(sid, state, stored, store, expiring)

    def _session(self, sid: str, store: Store) -> tuple[SessionState, Stored] | None:
        cached = self._cache.get(sid)
        if cached is not None:
            self._cache.move_to_end(sid)
            return cached
        loaded = keyed_state.load(store.items())
        if loaded is not None:
            self._remember(sid, loaded)
        return loaded

    def _remember(self, sid: str, entry: tuple[SessionState, Stored]) -> None:
        self._cache[sid] = entry
        if len(self._cache) > CACHED_SESSIONS:
            # A tenth at a time: evicting passes over the machine's caches once, however
            # many sessions go (one at a time, a stream of new sessions was quadratic).
            gone = [self._cache.popitem(last=False)[0] for _ in range(CACHED_SESSIONS // 10)]
            for old in gone:
                self._idle_due.pop(old, None)
                self._timer_at.pop(old, None)
            self.machine.evict(*gone)

    def _forget(self, sid: str) -> None:
        self._cache.pop(sid, None)
        self._idle_due.pop(sid, None)
        self._timer_at.pop(sid, None)
        self.machine.evict(sid)

    def _save(self, sid: str, state: SessionState, stored: Stored | None, store: Store,
              expiring: dict[str, bytes]) -> None:
        """Write what changed (in one call: each is a call into the JVM), and, when the
        session is left idle, when it may be closed if it stays so."""
        change = keyed_state.write(state, stored)
        for k in change.removes:
            store.remove(k)
        self.counters.inc("state_bytes", change.written)
        puts = change.puts
        if expiring:
            puts.update(expiring)
        if state.idle:
            now = int(time.time() * 1000)
            due = _minute_after(now + self.settings.session_ttl_ms)
            if self._idle_due.get(sid) != due:
                self._idle_due[sid] = due
                puts[IDLE_DUE] = str(due).encode()
            first = min(due, *(_due_of(k) for k in expiring)) if expiring else due
            self._timer(sid, first, now)
        if puts:
            store.put_all(puts)
        self._remember(sid, (state, change.stored))

    def _timer(self, sid: str, due: int, now: int) -> None:
        """Have a timer fire at ``due`` at the latest. A session keeps one timer, at the
        first thing it has to do (expire journal records, or close if still idle); the
        timer registers the next (:meth:`on_timer`). One registration per idle period, not
        one per record and purpose: each is a call into the JVM."""
        registered = self._timer_at.get(sid)
        if registered is None or registered > due or registered <= now:
            self._timer_at[sid] = due
            self.timers.append(due)

    # --- retention and idle sessions (processing-time timers) ------------------------------
    def _expire_calls_of(self, run: RunState, expiring: dict[str, bytes]) -> None:
        """A run is over: its calls' journal records are tombstoned after the retention
        (:meth:`on_timer`). The keys wait in keyed state, so a restore keeps them."""
        if not run.calls:
            return
        due = _minute_after(int(time.time() * 1000) + self.settings.journal_retention_ms)
        expiring[f"{EXPIRING}{due}/{run.number}"] = b"\n".join(finished_run_keys(run.calls))

    def on_timer(self, sid: str, now_ms: int, store: Store) -> list[Row]:
        """A timer of this session fired: tombstone the journal records whose retention is
        over, close the session if it has been idle for ``session_ttl_ms``, and have the
        timer fire again for what is left to do."""
        if self._timer_at.get(sid, now_ms) <= now_ms:
            self._timer_at.pop(sid, None)
        part = journal_partition(sid, self.settings.partitions)
        entries = list(store.items())
        later: list[int] = []
        for k, v in entries:
            if not k.startswith(EXPIRING):
                continue
            if _due_of(k) > now_ms:
                later.append(_due_of(k))
                continue
            for jkey in v.decode().split("\n"):
                self.rows.produce(self.names.journal, None, jkey.encode(), partition=part)
            self.counters.inc("tombstones", v.count(b"\n") + 1)
            store.remove(k)
        idle_due = next((int(v) for k, v in entries if k == IDLE_DUE), None)
        if idle_due is not None and idle_due <= now_ms:
            loaded = self._session(sid, store)
            horizon = now_ms - self.settings.session_ttl_ms
            if loaded is None or (loaded[0].idle and loaded[0].clock < horizon):
                expiring = [(k, v) for k, v in store.items() if k.startswith(EXPIRING)]
                store.clear()
                for k, v in expiring:  # tombstones still to write outlive the session
                    store.put(k, v)
                self._forget(sid)
                self.counters.inc("sessions_closed")
        elif idle_due is not None:
            later.append(idle_due)
        # A busy session gets its next timer when it is idle again (_save).
        if later:
            self._timer(sid, min(later), now_ms)
        return self.rows.take()


def _due_of(expiring_key: str) -> int:
    """The due time in an ``x:<due>/<run>`` key."""
    return int(expiring_key[len(EXPIRING):].split("/", 1)[0])


def _minute_after(ms: int) -> int:
    """``ms`` rounded up to a whole minute: Flink keeps one timer per key and timestamp, so
    a busy session registers one a minute, not one per record."""
    return -(-ms // 60_000) * 60_000
