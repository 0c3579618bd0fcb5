"""Stream records to ``APP.stream`` on a Kafka producer, keyed by session (the
partitioner of every topic of the app: a session's records share its partition number).
Example::

    batcher = StreamBatcher(topic_publisher(producer, TopicNames("demo").stream))
"""

from __future__ import annotations

from typing import Any

from eddies.connectors.runtime.sink import produce
from eddies.connectors.streaming.call_stream import Publish
from eddies.events.stream import STREAM_SCHEMA, StreamEvent, encode_stream

#: The headers of every stream record: which schema wrote its bytes.
HEADERS = [("eddies.schema", STREAM_SCHEMA.encode())]


def topic_publisher(producer: Any, topic: str) -> Publish:
    """What sends a batch of stream records to ``topic`` on ``producer`` (sent at once:
    the records were gathered already, and a reader waits for them)."""

    def publish(records: list[StreamEvent]) -> None:
        for rec in records:
            produce(producer, topic, encode_stream(rec), rec.session_id.encode(), headers=HEADERS)
        producer.poll(0)  # delivery reports, and librdkafka's wake-up

    return publish
