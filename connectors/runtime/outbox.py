"""The producer of a worker role: Kafka transactions when ``exactly_once`` is set, a plain
idempotent producer otherwise. Either way correctness comes from deterministic ids and
idempotent application; transactions only keep a consumer that reads committed data from
seeing records of work that is about to be redone.

Transactional ids are stable per worker slot (``{app}.{role}.{instance_id}``): after a
crash the restarted slot fences its predecessor and ends the transaction it left open
(on the embedded broker an open transaction blocks committed readers until then).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from eddies.connectors.runtime.settings import Settings

log = logging.getLogger("eddies.worker")


#: How long a role's loop waits for a flush when its input had no backlog: it sends what
#: the turn produced at once instead of after linger.ms; unacknowledged records are not lost
#: when it times out (they stay queued), so a broker that is cut off holds the loop no longer.
IDLE_FLUSH_S = 0.05


class DeliveryFailedError(RuntimeError):
    """A produced record was not delivered (after librdkafka's retries). Offsets must not
    be committed past the work that produced it: the role stops and a restart redoes it."""


class DeliveryErrors:
    """Failed deliveries of one producer. Only failures are reported
    (``delivery.report.only.error``), so a successful record costs nothing here.

    Example::

        errors = DeliveryErrors("input producer")
        prod = Producer({**conf, **errors.config()})
        ...
        prod.flush(30)
        errors.check()   # raises DeliveryFailedError if a record was lost
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.errors: list[str] = []

    def config(self, successes: bool = False) -> dict[str, Any]:
        """Producer settings that route failed deliveries here (``successes``: records
        produced with an ``on_delivery`` of their own get their success reported to it)."""
        return {"on_delivery": self.report, "delivery.report.only.error": not successes}

    def report(self, err: Any, msg: Any) -> None:
        """A delivery report (only failures are kept)."""
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
            log.error("%s: a record to %s[%s] was not delivered: %s", self.what, msg.topic(),
                      msg.partition(), err)

    def check_flushed(self, producer: Any, timeout: float = 30) -> None:
        """Flush ``producer``; raise DeliveryFailedError if a record failed or is still
        undelivered after ``timeout`` seconds."""
        left = producer.flush(timeout)
        self.check()
        if left:
            raise DeliveryFailedError(
                f"{self.what}: {left} record(s) not delivered within {timeout} s")

    def check(self) -> None:
        """Raise DeliveryFailedError if any record failed since this object was made."""
        if self.errors:
            raise DeliveryFailedError(
                f"{self.what}: {len(self.errors)} record(s) not delivered; first: {self.errors[0]}")


class Outbox:
    """produce / poll / flush, and ``commit(consumer)`` that makes the offsets of what was
    consumed durable together with what was produced."""

    def __init__(self, settings: Settings, role: str, successes: bool = False) -> None:
        """``successes``: records produced with their own ``on_delivery`` get their
        successful delivery reported (with partition and offset) to it, not only failures."""
        from confluent_kafka import Producer

        # Batching (linger) matters more than it seems: the broker's cost is mostly per
        # request, and a worker writes to five topics; 5 ms measured ~25% more sessions/s
        # than 1 ms on the embedded broker for ~10 ms more idle latency end to end.
        conf: dict[str, Any] = {"partitioner": "murmur2_random", "enable.idempotence": True,
                                "linger.ms": settings.linger_ms,
                                "message.max.bytes": settings.write_limit}
        self.transactional = settings.exactly_once
        if self.transactional:
            conf["transactional.id"] = f"{settings.app}.{role}.{settings.transactional_slot}"
        self.delivery = DeliveryErrors(f"the {role}'s producer")
        self.producer = Producer(settings.client_config(**conf, **self.delivery.config(successes)))
        self._lock = threading.Lock()  # executor threads produce while the loop commits
        self._open = False
        if self.transactional:
            self.producer.init_transactions(60)
        else:
            # Without transactions a record needs nothing but librdkafka's own call: bind it,
            # so the hot path (~10 records per session) pays no extra Python frame.
            self.produce = self.producer.produce  # type: ignore[method-assign,assignment]

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                **kwargs: Any) -> None:
        """Produce one record (inside the open transaction, if transactional); BufferError
        when librdkafka's queue is full (:func:`.client.produce` waits for room)."""
        with self._lock:
            if not self._open:
                self.producer.begin_transaction()
                self._open = True
            self.producer.produce(topic, value, key, **kwargs)

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports."""
        return int(self.producer.poll(timeout))

    def flush(self, timeout: float = 30) -> int:
        """Wait until everything produced is acknowledged."""
        return int(self.producer.flush(timeout))

    def commit(self, consumer: Any, offsets: list[Any] | None = None, sync: bool = False) -> None:
        """Make ``offsets`` (default: the consumer's positions) durable after everything
        produced so far. Without a consumer: only what was produced."""
        from confluent_kafka import KafkaException

        if not self.transactional:
            self.delivery.check_flushed(self.producer)
            if consumer is None:
                return
            try:
                if offsets is None:
                    consumer.commit(asynchronous=not sync)
                else:
                    consumer.commit(offsets=offsets, asynchronous=not sync)
            except KafkaException:  # nothing consumed since the last commit
                pass
            return
        with self._lock:
            if not self._open:
                self.producer.begin_transaction()
                self._open = True
            positions: list[Any] = []
            if consumer is not None:
                assigned = consumer.assignment()
                owned = {(tp.topic, tp.partition) for tp in assigned}
                positions = offsets if offsets is not None else consumer.position(assigned)
                positions = [tp for tp in positions
                             if tp.offset >= 0 and (tp.topic, tp.partition) in owned]
            try:
                self.delivery.check_flushed(self.producer)
                if positions:
                    self.producer.send_offsets_to_transaction(
                        positions, consumer.consumer_group_metadata(), 30)
                self.producer.commit_transaction(60)
            except DeliveryFailedError:
                self.producer.abort_transaction(30)
                self._open = False
                raise
            except KafkaException as err:
                # The role cannot continue on a state the broker may have discarded: abort,
                # and let the worker stop; a restart recovers from the journal.
                if err.args and err.args[0].txn_requires_abort():
                    self.producer.abort_transaction(30)
                self._open = False
                self.delivery.check()  # the cause, when it was a lost record
                raise
            self._open = False
