"""Where a runner's records go: anything with confluent-kafka's ``Producer.produce``
signature. The Kafka worker's producer is one; the Flink job's collector, which turns each
record into a row for its KafkaSink, is another. So checking, dead-lettering and routing
(``dead_letters.py``, ``routing.py``) are written once for both. Example::

    produce(sink, "app.events", data, b"alice", headers=HEADERS)
"""

from __future__ import annotations

from typing import Any, Protocol

#: confluent-kafka's timestamp type of a record without a timestamp.
TIMESTAMP_NOT_AVAILABLE = 0


class RecordSink(Protocol):
    """What routing and dead-lettering write through."""

    def produce(self, topic: str, value: bytes | None = ..., key: bytes | None = ..., *,
                partition: int = ..., timestamp: int = ...,
                headers: Any = ...) -> None:
        """Queue one record."""

    def poll(self, timeout: float = ...) -> int:
        """Serve delivery reports; returns how many were served."""


class SourceRecord(Protocol):
    """A consumed record, as confluent-kafka's ``Message`` shows it (the Flink job wraps
    its source rows in the same shape)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...
    def timestamp(self) -> tuple[int, int]: ...


def produce(prod: RecordSink, topic: str, value: bytes | None, key: bytes | None,
            **kwargs: Any) -> None:
    """``prod.produce`` that waits for room when the local queue is full (a burst larger
    than ``queue.buffering.max.messages``) instead of raising BufferError."""
    while True:
        try:
            prod.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            prod.poll(0.05)  # serve delivery reports; the queue drains
