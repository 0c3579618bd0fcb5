"""Writing to ``APP.dlq``: what a runner could not accept, with the reason and its source.

Every dead letter carries ``eddies.dlq.reason`` and ``eddies.dlq.source`` (the source
record's topic/partition/offset), then the source's own headers. A value larger than a
record may be is cut to ``max_record_bytes`` (``eddies.dlq.truncated`` holds its size): the
whole record stays at its source position. Example::

    dlq = DeadLetters(producer, names.dlq, settings.max_record_bytes, counters)
    dlq.write(msg.value(), msg.key(), "record has no key", source=msg)
"""

from __future__ import annotations

import logging
import time

from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.json_logs import ids
from eddies.connectors.runtime.records import dlq_headers, dlq_value
from eddies.connectors.runtime.sink import RecordSink, SourceRecord, produce

log = logging.getLogger("eddies.worker")

#: At most one warning per this many seconds (a flood of bad records must not flood logs).
WARN_EVERY_S = 5.0


class DeadLetters:
    """Dead-letters records through a role's producer, counting them (``dlq``)."""

    def __init__(self, producer: RecordSink, topic: str, limit: int, counters: Counters) -> None:
        self.producer = producer
        self.topic = topic
        self.limit = limit
        self.counters = counters
        self._last_warning = 0.0
        self._quiet = 0  # dead letters not logged since the last warning

    def write(self, value: bytes | None, key: bytes | None, reason: str, *,
              source: SourceRecord | tuple[str, int], partition: int | None = None) -> None:
        """Dead-letter ``value``/``key`` because of ``reason``. ``source``: the consumed
        message it came from (its position and headers are kept), or a (topic, partition)
        it was to be written to; ``partition``: the DLQ partition (default: the source's,
        which is the session's)."""
        if isinstance(source, tuple):
            topic, part, offset, original = source[0], source[1], -1, None
        else:
            p, o = source.partition(), source.offset()
            topic, part, offset = source.topic() or "", 0 if p is None else p, -1 if o is None else o
            original = source.headers()
        headers = dlq_headers(reason, topic, part, offset, original)
        value = dlq_value(value, self.limit, headers)
        produce(self.producer, self.topic, value, key,
                partition=part if partition is None else partition, headers=headers)
        self.counters.inc("dlq")
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:
            more = f" (and {self._quiet} more since the last warning)" if self._quiet else ""
            # The key is the session id of every record a worker or a producer of its
            # sessions writes; the others get none.
            session = key.decode(errors="replace") if key else None
            log.warning("dead-lettered %s/%s/%s: %s%s", topic, part, offset, reason[:500], more,
                        extra=ids(session=session))
            self._last_warning = now
            self._quiet = 0
        else:
            self._quiet += 1
