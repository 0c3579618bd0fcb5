"""One session's stream records and outputs as they come, read from where the topics end
when the feed is made (what ``eddies send --follow`` prints). Example::

    feed = SessionFeed(settings, "alice")        # before the input is sent
    send_input(settings, "alice", "hi")
    for record in feed.records(idle_s=60):       # StreamEvents and output AgentEvents
        ...
    feed.close()
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import AgentEvent, DecodeError, decode, partition_for
from eddies.events.stream import StreamEvent, decode_stream


class SessionFeed:
    """A reader of session ``session_id``'s partition of ``APP.stream`` and ``APP.output``."""

    def __init__(self, settings: Settings, session_id: str, partitions: int | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.session_id = session_id
        self._key = session_id.encode()
        names = TopicNames(settings.app)
        self._stream, self._output = names.stream, names.output
        count = partitions if partitions is not None else settings.partitions
        part = partition_for(self._key, count)
        self._consumer = Consumer(settings.client_config(**{
            "group.id": f"{settings.app}.follow.{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "fetch.wait.max.ms": 10,
            "auto.offset.reset": "earliest"}))
        # Some brokers (the embedded one) answer an end offset a little early: the records
        # before this moment are skipped by their time as well.
        self._since_ms = int(time.time() * 1000) - 1000
        wait = settings.connect_timeout_ms / 1000
        starts = []
        for topic in (self._stream, self._output):
            _, end = self._consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=wait)
            starts.append(TopicPartition(topic, part, max(0, end)))
        self._consumer.assign(starts)

    def records(self, idle_s: float) -> Iterator[StreamEvent | AgentEvent]:
        """The session's records, in each topic's order, until ``idle_s`` seconds pass
        without one (undecodable ones are skipped: ``eddies tail`` shows them)."""
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            msg = self._consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            if msg.key() != self._key or msg.timestamp()[1] < self._since_ms:
                continue
            last = time.monotonic()
            record = self._decode(msg)
            if record is not None:
                yield record

    def _decode(self, msg: Any) -> StreamEvent | AgentEvent | None:
        try:
            return decode_stream(msg.value()) if msg.topic() == self._stream else decode(msg.value())
        except DecodeError:
            return None

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()
