"""An in-memory stand-in for a Kafka cluster and the parts of confluent-kafka's clients the
worker's roles use, so that a role runs without a broker: in the broker-less driver
(:mod:`.driver`) that tests the order of records, snapshots, commits and ownership
changes, and in ``bench/worker_cpu.py``.

What it keeps of Kafka: topics of partitions, offsets, keys, values, headers and
timestamps; a producer's records land in order, its delivery reports come with ``poll`` or
``flush``; consumers of a group get partitions only when the driver says so, and get the
rebalance callbacks inside ``poll``/``consume``, as librdkafka serves them; a consumer the
group evicted has its commits refused with UNKNOWN_MEMBER_ID, as both brokers do; a paused
partition returns nothing, and stays paused when it is unassigned and assigned again (as
in librdkafka) until it is resumed. What it leaves out: replication, compaction, transactions,
timing. Example::

    broker = MemoryBroker()
    broker.create("app.input", 2)
    producer = MemoryProducer(broker)
    producer.produce("app.input", b"value", b"alice")
    consumer = MemoryConsumer(broker, "app.orchestrator")
    consumer.subscribe(["app.input"], on_assign=print)
    broker.assign(consumer, [0, 1])          # on_assign runs in the next poll
    msg = consumer.poll(0)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.journal.reading import JournalView, fold
from eddies.connectors.runtime.client import PARTITION_EOF, TRANSPORT
from eddies.connectors.runtime.outbox import DeliveryErrors
from eddies.connectors.runtime.settings import Settings
from eddies.events import AgentEvent, decode, partition_for

Headers = list[tuple[str, bytes]]


def _kafka() -> Any:
    import confluent_kafka

    return confluent_kafka


class Record:
    """A record as a confluent-kafka ``Message`` shows it."""

    __slots__ = ("_error", "_headers", "_key", "_offset", "_partition", "_timestamp", "_topic",
                 "_value")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None,
                 value: bytes | None, headers: Headers | None = None, timestamp: int = 0,
                 error: Any = None) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers
        self._timestamp, self._error = timestamp, error

    def error(self) -> Any:
        return self._error

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

    def headers(self) -> Headers | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)


def _eof() -> Any:
    k = _kafka().KafkaError
    return k(PARTITION_EOF)


class MemoryBroker:
    """Topics, committed offsets and group membership, in memory."""

    def __init__(self) -> None:
        #: Per topic, per partition, records by offset (None: compacted away).
        self.topics: dict[str, list[list[Record | None]]] = {}
        #: (group, topic, partition) -> committed offset.
        self.committed: dict[tuple[str, str, int], int] = {}

    def create(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` partitions (if it does not exist)."""
        self.topics.setdefault(topic, [[] for _ in range(partitions)])

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Headers | None = None, timestamp: int = 0) -> Record:
        """Append a record; returns it (with its offset)."""
        log = self.topics[topic][partition]
        record = Record(topic, partition, len(log), key, value, headers,
                        timestamp or int(time.time() * 1000))
        log.append(record)
        return record

    def compact(self, topic: str) -> None:
        """Do what log compaction does to ``topic``: keep only each key's latest record
        (offsets stay: the others leave holes; tombstones stay, as within
        delete.retention.ms)."""
        for log in self.topics[topic]:
            latest = {r.key(): r.offset() for r in log if r is not None}
            for i, r in enumerate(log):
                if r is not None and latest[r.key()] != r.offset():
                    log[i] = None

    def records(self, topic: str, partition: int | None = None) -> list[Record]:
        """The records of ``topic`` (of one partition, or of all in partition order)."""
        parts = self.topics[topic] if partition is None else [self.topics[topic][partition]]
        return [r for log in parts for r in log if r is not None]

    def assign(self, consumer: MemoryConsumer, partitions: list[int]) -> None:
        """The group gives ``consumer`` these partitions (its on_assign runs in its next poll)."""
        consumer.events.append(("assign", partitions, consumer.evictions))

    def revoke(self, consumer: MemoryConsumer, partitions: list[int]) -> None:
        """The group takes ``partitions`` back cleanly (on_revoke in the next poll)."""
        consumer.events.append(("revoke", partitions, consumer.evictions))

    def evict(self, consumer: MemoryConsumer) -> None:
        """The group went on without ``consumer`` (its session timed out): its commits are
        refused from now on; it hears of the loss only at its next poll."""
        consumer.evicted = True
        consumer.evictions += 1
        # What it holds, and what it was given but has not taken yet: all of it is gone.
        held = {tp.partition for tp in consumer.assignment()}
        for what, parts, _ in consumer.events:
            held = held | set(parts) if what == "assign" else held - set(parts)
        consumer.events.append(("lost", sorted(held), consumer.evictions))


@dataclass
class _Delivery:
    callback: Callable[[Any, Any], None] | None
    record: Record


class MemoryProducer:
    """confluent-kafka's ``Producer`` on a :class:`MemoryBroker`: records land at once,
    delivery reports wait for ``poll``/``flush``."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker
        self._reports: list[_Delivery] = []
        self.produced = 0

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                partition: int = -1, on_delivery: Callable[[Any, Any], None] | None = None,
                headers: Headers | None = None, timestamp: int = 0, **_: Any) -> None:
        if partition < 0:
            count = len(self.broker.topics[topic])
            partition = partition_for(key.decode(), count) if key is not None else 0
        record = self.broker.append(topic, partition, key, value, headers, timestamp)
        self.produced += 1
        if on_delivery is not None:  # as librdkafka's, a delivery report has no headers
            self._reports.append(_Delivery(on_delivery, Record(
                topic, partition, record.offset(), key, value, None, record.timestamp()[1])))

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        return topic

    def poll(self, timeout: float = 0) -> int:
        reports, self._reports = self._reports, []
        for d in reports:
            if d.callback is not None:
                d.callback(None, d.record)
        return len(reports)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0


@dataclass
class MemoryOutbox:
    """:class:`~.outbox.Outbox` on a :class:`MemoryProducer` (no transactions)."""

    producer: MemoryProducer
    transactional: bool = False
    delivery: DeliveryErrors = field(default_factory=lambda: DeliveryErrors("memory outbox"))

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                **kwargs: Any) -> None:
        self.producer.produce(topic, value, key, **kwargs)

    def poll(self, timeout: float = 0) -> int:
        return self.producer.poll(timeout)

    def flush(self, timeout: float = 30) -> int:
        return self.producer.flush(timeout)

    def commit(self, consumer: Any, offsets: list[Any] | None = None, sync: bool = False) -> None:
        if consumer is None or not offsets:
            return
        try:
            consumer.commit(offsets=offsets, asynchronous=not sync)
        except _kafka().KafkaException:  # as Outbox: a lost commit means re-delivery
            pass


@dataclass
class MemoryConsumer:
    """confluent-kafka's ``Consumer`` of group ``group`` on a :class:`MemoryBroker`."""

    broker: MemoryBroker
    group: str
    #: Rebalance events not yet served: ("assign" | "revoke" | "lost", partitions, the
    #: evictions before it was queued).
    events: list[tuple[str, list[int], int]] = field(default_factory=list)
    evictions: int = 0
    evicted: bool = False
    #: The brokers cannot be reached (commits fail with a transport error).
    unreachable: bool = False
    topic: str = ""
    positions: dict[int, int] = field(default_factory=dict)
    paused: set[int] = field(default_factory=set)
    _callbacks: dict[str, Any] = field(default_factory=dict)
    _explicit: dict[int, int] | None = None
    closed: bool = False
    _eof: dict[int, int] = field(default_factory=dict)  # partition -> end reported
    #: Calls of poll/consume that still hand out records before the pending rebalance
    #: events are served (librdkafka hands out what it fetched before it heard of them).
    notice_after: int = 0

    def subscribe(self, topics: list[str], on_assign: Any = None, on_revoke: Any = None,
                  on_lost: Any = None) -> None:
        self.topic = topics[0]
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}

    def _tps(self, partitions: list[int]) -> list[Any]:
        TopicPartition = _kafka().TopicPartition
        return [TopicPartition(self.topic, p) for p in partitions]

    def _serve(self) -> None:
        while self.events:
            what, parts, evictions = self.events.pop(0)
            callback = self._callbacks.get(what)
            if what == "assign":
                self._explicit = {}
                if callback is not None:
                    callback(self, self._tps(parts))
                chosen, self._explicit = self._explicit, None
                for p in parts:
                    self._eof.pop(p, None)
                    if p in chosen:
                        self.positions[p] = chosen[p]
                    else:
                        self.positions[p] = self.broker.committed.get((self.group, self.topic, p), 0)
                if evictions == self.evictions:  # given after its eviction: a member again
                    self.evicted = False
            else:
                if callback is not None:
                    callback(self, self._tps([p for p in parts if p in self.positions]))
                for p in parts:  # a pause outlives the assignment, as in librdkafka
                    self.positions.pop(p, None)

    def incremental_assign(self, partitions: list[Any]) -> None:
        for tp in partitions:
            if self._explicit is not None:
                self._explicit[tp.partition] = tp.offset
            else:
                self.positions[tp.partition] = tp.offset

    def assignment(self) -> list[Any]:
        return self._tps(sorted(self.positions))

    def pause(self, partitions: list[Any]) -> None:
        self.paused.update(tp.partition for tp in partitions)

    def resume(self, partitions: list[Any]) -> None:
        self.paused.difference_update(tp.partition for tp in partitions)

    def seek(self, tp: Any) -> None:
        self.positions[tp.partition] = tp.offset

    def poll(self, timeout: float = 0) -> Record | None:
        got = self.consume(1, timeout)
        return got[0] if got else None

    def consume(self, num_messages: int = 1, timeout: float = 0) -> list[Record]:
        if self.notice_after > 0:
            self.notice_after -= 1
            return self._fetch(num_messages)
        self._serve()
        return self._fetch(num_messages)

    def _fetch(self, num_messages: int) -> list[Record]:
        out: list[Record] = []
        logs = self.broker.topics.get(self.topic, [])
        for p in sorted(self.positions):
            if p in self.paused:
                continue
            log = logs[p]
            while self.positions[p] < len(log) and len(out) < num_messages:
                record = log[self.positions[p]]
                self.positions[p] += 1
                if record is not None:
                    out.append(record)
            end = len(log)
            if self.positions[p] == end and self._eof.get(p) != end and len(out) < num_messages:
                self._eof[p] = end  # as librdkafka with enable.partition.eof: once per end
                out.append(Record(self.topic, p, end, None, None, error=_eof()))
        return out

    def commit(self, offsets: list[Any] | None = None, asynchronous: bool = True) -> None:
        k = _kafka()
        if self.unreachable:
            raise k.KafkaException(k.KafkaError(TRANSPORT))
        if self.evicted:
            raise k.KafkaException(k.KafkaError(k.KafkaError.UNKNOWN_MEMBER_ID))
        for tp in offsets or []:
            self.broker.committed[(self.group, tp.topic, tp.partition)] = tp.offset

    def memberid(self) -> str | None:
        # librdkafka forgets its member id when it finds itself evicted, and gets a new one
        # when it joins again.
        return None if self.evicted else f"{self.group}-{self.evictions}"

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        k = _kafka()
        if self.unreachable:
            raise k.KafkaException(k.KafkaError(TRANSPORT))
        return topic

    def committed(self, partitions: list[Any], timeout: float = 0) -> list[Any]:
        TopicPartition = _kafka().TopicPartition
        return [TopicPartition(tp.topic, tp.partition,
                               self.broker.committed.get((self.group, tp.topic, tp.partition), -1001))
                for tp in partitions]

    def close(self) -> None:
        self.closed = True


class MemoryClients:
    """:class:`~.roles.Clients` on a :class:`MemoryBroker`: each role's consumer joins
    ``{app}.{role}``; ``consumers`` keeps them for the driver."""

    def __init__(self, broker: MemoryBroker, settings: Settings) -> None:
        self.broker = broker
        self.settings = settings
        self.consumers: dict[str, MemoryConsumer] = {}

    def group_consumer(self, role: str) -> MemoryConsumer:
        consumer = MemoryConsumer(self.broker, f"{self.settings.app}.{role}")
        self.consumers[role] = consumer
        return consumer

    def outbox(self, role: str, successes: bool = False) -> Any:
        return MemoryOutbox(MemoryProducer(self.broker))

    def marks_producer(self) -> MemoryProducer:
        return MemoryProducer(self.broker)

    def stream_producer(self) -> MemoryProducer:
        return MemoryProducer(self.broker)

    def group_members(self) -> None:
        return None

    def read_history(self, partition: int, sessions: set[str]) -> dict[str, list[AgentEvent]]:
        out: dict[str, list[AgentEvent]] = {sid: [] for sid in sessions}
        seen: set[str] = set()
        keys = {sid.encode() for sid in sessions}
        for record in self.broker.topics[f"{self.settings.app}.events"][partition]:
            if record is not None and record.key() in keys:
                ev = decode(record.value() or b"")
                if ev.event_id not in seen:
                    seen.add(ev.event_id)
                    out[ev.session_id].append(ev)
        return out

    def read_journal(self, partitions: set[int], timeout: float = 60.0) -> JournalView:
        view = JournalView()
        topic = f"{self.settings.app}.journal"
        for part in sorted(partitions):
            log = self.broker.topics[topic][part]
            for record in log:
                if record is not None and record.key() is not None:
                    view.records += 1
                    fold(view, record)
            view.ends[part] = len(log)
        return view
