"""Producing inputs and reading topics, for the CLI, tests and notebooks.

Readers use ``assign`` (no consumer group): they start at once, read a topic's
partitions to their true end (PARTITION_EOF), and optionally keep following. Example::

    send_input(settings, "alice", "what is 2 + 3?")
    for ev in read_events(settings, names.output, follow=True, timeout=30):
        print(ev.payload.output)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from eddies.connectors.runtime.records import HEADERS, Headers
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import IDENTITY_HEADER, ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import AgentEvent, DecodeError, Identity, InputEvent, SignalEvent, decode, encode

#: librdkafka's local error codes, which confluent-kafka names with a leading underscore
#: (``KafkaError._PARTITION_EOF``): numbers of its C API (rd_kafka_resp_err_t), so they are
#: compared here without reaching into the library's private names.
PARTITION_EOF = -191
TRANSPORT = -195
ALL_BROKERS_DOWN = -187
#: How often a wait for records checks whether it was woken (see next_batch).
WOKEN_CHECK_S = 0.001


def next_batch(consumer: Any, size: int, wait: float, touched: set[int] | None = None,
               woken: Callable[[], bool] | None = None) -> list[Any]:
    """Up to ``size`` records: block up to ``wait`` for the first, then take only what has
    already been fetched. (``consume(size, timeout)`` would wait for a full batch.)
    ``woken``: the wait also ends (with no records) within a millisecond of this turning
    true, for what another thread hands the caller.

    ``touched``: the partitions the consumer's rebalance callbacks add to it. A callback
    served while the rest is taken may take the first record's partition (or give it
    anew); librdkafka drops what it fetched for a partition it no longer holds, but not the
    record it already handed out, so that one is left out then."""
    if woken is None:
        first = consumer.poll(wait)
    else:
        first = consumer.poll(0)
        deadline = time.monotonic() + wait
        while first is None and not woken():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            first = consumer.poll(min(left, WOKEN_CHECK_S))
    if first is None:
        return []
    if size <= 1:
        return [first]
    if touched is not None:
        touched.clear()
    rest: list[Any] = consumer.consume(num_messages=size - 1, timeout=0)
    if touched and first.partition() in touched:
        return rest
    return [first, *rest]


def producer(settings: Settings, **extra: Any) -> Any:
    """A producer with the Java-compatible partitioner (``extra``: more client settings)."""
    from confluent_kafka import Producer

    return Producer(settings.client_config(**{"partitioner": "murmur2_random",
                                              "enable.idempotence": True,
                                              "message.max.bytes": settings.write_limit, **extra}))


def input_event(session_id: str, value: Any, event_id: str = "", timestamp: int | None = None,
                identity: Identity | None = None) -> AgentEvent:
    """An InputEvent envelope for ``session_id`` (from ``identity``: it counts only when
    the record is signed, see :func:`send_event`); an empty id is derived from its offset."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return AgentEvent.external(session_id, InputEvent(value, identity), event_id=event_id, timestamp=ts)


def signal_event(session_id: str, name: str, value: Any, event_id: str = "",
                 timestamp: int | None = None) -> AgentEvent:
    """A SignalEvent envelope for ``session_id``; an empty id is derived from its offset."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return AgentEvent.external(session_id, SignalEvent(name, value), event_id=event_id, timestamp=ts)


def send_signal(settings: Settings, session_id: str, name: str, value: Any,
                event_id: str = "") -> None:
    """Send signal ``name`` with ``value`` to ``session_id`` (what ``eddies signal`` does;
    ``approve``, ``reject`` and ``resume`` send an approval's or a halt's), waiting for
    the delivery."""
    send_event(settings, signal_event(session_id, name, value, event_id),
               f"signal {name!r} for session {session_id!r}")


def send_input(settings: Settings, session_id: str, value: Any, event_id: str = "",
               prod: Any = None, *, identity: Identity | None = None,
               signer: ResultSigner | None = None) -> str:
    """Produce one input for ``session_id`` to the application's input topic; the input's
    id as the worker names it (see :func:`send_event`), which the run's OutputEvent carries
    as ``input_id``. ``identity``: who asks, vouched for by ``signer`` (the identity key's,
    :func:`eddies.connectors.runtime.signing.identity_signer`); unsigned, it is cleared."""
    return send_event(settings, input_event(session_id, value, event_id, identity=identity),
                      f"input for session {session_id!r}", prod, signer=signer)


def input_headers(ev: AgentEvent, data: bytes, signer: ResultSigner | None) -> Headers:
    """The headers of record ``data`` (``ev`` encoded) for the input topic: the identity of
    an input that names one signed by ``signer`` (the identity key's), when given."""
    asked = ev.payload
    if signer is None or type(asked) is not InputEvent or asked.identity is None:
        return HEADERS
    return [*HEADERS, (IDENTITY_HEADER, signer.sign(data))]


def send_event(settings: Settings, ev: AgentEvent, what: str, prod: Any = None, *,
               signer: ResultSigner | None = None) -> str:
    """Produce ``ev`` (an input or a signal) to the application's input topic, keyed by its
    session (signed by ``signer``, the identity key's, when given); with no ``prod``, on a
    producer of its own, waiting for the delivery. Returns the event's id as the worker
    names it: its own, or for one sent without an id on a producer of its own,
    ``in/PARTITION/OFFSET`` of its record (``""`` on ``prod``, whose delivery this does not
    wait for)."""
    names = TopicNames(settings.app)
    data = encode(ev)
    headers = input_headers(ev, data, signer)
    if prod is not None:
        prod.produce(names.input, data, ev.session_id.encode(), headers=headers)
        return ev.event_id
    from eddies.connectors.runtime.admission import arrival_id
    from eddies.connectors.runtime.outbox import DeliveryErrors

    errors = DeliveryErrors(what)
    delivered: list[tuple[int, int]] = []

    def reported(err: Any, msg: Any) -> None:
        errors.report(err, msg)
        if err is None:
            delivered.append((msg.partition(), msg.offset()))

    # A record the broker does not take within the connect timeout fails with a delivery
    # report, instead of being retried for librdkafka's default 5 minutes.
    extra = {} if "message.timeout.ms" in settings.kafka else {
        "message.timeout.ms": settings.connect_timeout_ms}
    prod = producer(settings, **errors.config(successes=True), **extra)
    prod.produce(names.input, data, ev.session_id.encode(), headers=headers, on_delivery=reported)
    wait = settings.connect_timeout_ms / 1000 + 5  # the report comes at the timeout
    if prod.flush(wait):
        raise TimeoutError(f"{what} not delivered within {wait:g} s (broker "
                           f"{settings.bootstrap_servers})")
    errors.check()
    if ev.event_id or not delivered or not isinstance(ev.payload, (InputEvent, SignalEvent)):
        return ev.event_id
    return arrival_id(ev.payload, lambda name: None, *delivered[0])


def read_records(settings: Settings, topic: str, *, follow: bool = False, timeout: float = 30.0,
                 partitions: list[int] | None = None, start: int | None = None,
                 reread_gaps: bool = False, ends: dict[int, int] | None = None) -> Iterator[Any]:
    """Raw messages of ``topic`` from the beginning (or ``start`` offset) to the end; with
    ``follow``, keep yielding new ones until ``timeout`` seconds pass without any. Without
    ``follow``, TimeoutError if the end is not reached and ``timeout`` seconds pass with no
    record. ``reread_gaps``: read again once from offsets a fetch skipped (see
    :mod:`.positions`; not for topics written in transactions). ``ends`` receives, per
    partition, the offset after the last record read (where reading would go on)."""
    from confluent_kafka import Consumer, TopicPartition

    from eddies.connectors.runtime.positions import Positions

    consumer = Consumer(settings.client_config(**{
        "group.id": f"{settings.app}.reader.{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 10,
        "auto.offset.reset": "earliest",
    }))
    try:
        if partitions is None:
            wait = settings.connect_timeout_ms / 1000
            meta = consumer.list_topics(topic, timeout=wait).topics.get(topic)
            if meta is None or meta.error is not None:
                raise LookupError(f"topic {topic} does not exist")
            partitions = sorted(meta.partitions)
        # Offset 0, not OFFSET_BEGINNING: a logical offset is looked up only once the
        # partition's leader is known, on a 500 ms timer (measured: 520 ms against 13 ms to
        # the end of an empty partition). Where the log starts later, the reset goes there.
        offset = 0 if start is None else start
        consumer.assign([TopicPartition(topic, p, offset) for p in partitions])
        at_end: set[int] = set()
        positions = Positions(reread_gaps)
        for p in partitions:  # an end reported before any record is a gap too
            positions.start(p, offset)
        last = time.monotonic()
        while True:
            msgs = next_batch(consumer, 500, 0.1)
            reread: set[int] = set()
            for msg in msgs:
                part = msg.partition()
                if part in reread:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == PARTITION_EOF:
                        back = positions.gap_at_end(part, msg.offset())
                        if back is None:
                            at_end.add(part)
                            if ends is not None:
                                ends[part] = max(ends.get(part, 0), msg.offset())
                            continue
                    else:
                        raise RuntimeError(f"reading {topic}: {err}")
                else:
                    back = positions.gap(part, msg.offset())
                if back is not None:
                    consumer.seek(TopicPartition(topic, part, back))
                    reread.add(part)
                    at_end.discard(part)
                    continue
                positions.advance(part, msg.offset())
                if ends is not None:
                    ends[part] = msg.offset() + 1
                last = time.monotonic()
                yield msg
            if not follow and at_end >= set(partitions):
                return
            if time.monotonic() - last > timeout:
                if follow:
                    return
                missing = sorted(set(partitions) - at_end)
                raise TimeoutError(f"{topic} partitions {missing} not read to the end: no record "
                                   f"for {timeout}s")
    finally:
        consumer.close()


def read_events(settings: Settings, topic: str, **kwargs: Any) -> Iterator[AgentEvent]:
    """Decoded events of ``topic`` (undecodable records are skipped)."""
    for msg in read_records(settings, topic, **kwargs):
        try:
            yield decode(msg.value())
        except DecodeError:
            continue


def log_end(settings: Settings, topic: str, partition: int) -> int:
    """The offset after the last record of ``partition``. The broker's answer is read up to
    the true end: the embedded broker's is where its last record batch starts (BROKER-NOTES)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.client_config(**{
        "group.id": f"{settings.app}.reader.{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}))
    try:
        wait = settings.connect_timeout_ms / 1000
        reported = int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=wait)[1])
    finally:
        consumer.close()
    ends = {partition: max(0, reported - 1)}
    for _ in read_records(settings, topic, partitions=[partition], start=ends[partition], ends=ends):
        pass  # at most the last batch
    return max(ends[partition], reported)


def offset_for_time(settings: Settings, topic: str, partition: int, timestamp_ms: int) -> int:
    """The first offset of ``partition`` whose record time is at or after ``timestamp_ms``
    (the partition's end if none is; 0 if the broker cannot say). The embedded broker's
    answer is approximate (BROKER-NOTES: it reasons in record batches): callers check it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.client_config(**{
        "group.id": f"{settings.app}.reader.{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}))
    try:
        wait = settings.connect_timeout_ms / 1000
        found = consumer.offsets_for_times([TopicPartition(topic, partition, max(0, timestamp_ms))],
                                           timeout=wait)
        offset = found[0].offset if found and found[0].error is None else 0
        if offset < 0:  # no record that late: the end
            offset = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=wait)[1]
        return max(0, int(offset))
    except Exception:  # an old broker or a timeout: read from the start, slower but right
        return 0
    finally:
        consumer.close()
