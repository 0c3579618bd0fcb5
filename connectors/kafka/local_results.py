"""The results a worker's local executor hands the orchestrator of the same process.

With ``role = "all"`` a call result still goes through APP.input (one partition order
decides what a session sees), but the orchestrator need not wait for a fetch to bring it
back: the result's delivery report carries its partition and offset, and the orchestrator
applies it at once when it is the next record of that partition (nothing unread before
it) and its event is still kept here (a delivery report has no headers: only the kept
event vouches that this process signed those bytes); otherwise the record is applied when
it is read, as any other. On the embedded broker,
whose fetches do not return early when a record arrives, that saves half of
``fetch_wait_ms`` per call on average. Either way the orchestrator takes the event object
kept here by the record's bytes instead of decoding the record.

Example::

    results = LocalResults(on_error=outbox.delivery.report)
    results.sent(data, event, reported=True)
    producer.produce(topic, data, key, on_delivery=results.delivered)
    ...
    for msg in results.take_delivered():   # on the orchestrator's thread
        ...
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from eddies.events import AgentEvent

#: Results never read back here (their partition moved away) are forgotten past this many.
MAX_KEPT = 50_000


class LocalResults:
    """Results by their record bytes, and the delivery reports of those sent."""

    def __init__(self, on_error: Callable[[Any, Any], None] | None) -> None:
        self._on_error = on_error
        self._events: dict[bytes, AgentEvent] = {}
        self._delivered: deque[Any] = deque()
        self._undelivered = 0  # sent with a report asked for, not reported yet
        self._lock = threading.Lock()  # call threads send, the producer's poller reports

    def sent(self, data: bytes, event: AgentEvent, reported: bool = False) -> None:
        """``event`` goes to APP.input as ``data`` (``reported``: with :meth:`delivered`
        as its delivery callback)."""
        events = self._events
        if len(events) >= MAX_KEPT:
            events.clear()
        events[data] = event
        if reported:
            with self._lock:
                self._undelivered += 1

    def delivered(self, err: Any, msg: Any) -> None:
        """A sent result's delivery report."""
        with self._lock:
            self._undelivered -= 1
        if err is None:
            self._delivered.append(msg)
        elif self._on_error is not None:
            self._on_error(err, msg)

    def has_delivered(self) -> bool:
        """Whether a delivery was reported that :meth:`take_delivered` has not taken."""
        return bool(self._delivered)

    @property
    def undelivered(self) -> int:
        """Results sent whose delivery is not reported yet."""
        return self._undelivered

    def take_delivered(self) -> list[Any]:
        """The records delivered since the last call (as their reports show them), oldest
        first."""
        delivered = self._delivered
        out = []
        while delivered:
            out.append(delivered.popleft())
        return out

    def event(self, data: bytes) -> AgentEvent | None:
        """The event sent as ``data`` (once: it is forgotten), or None."""
        return self._events.pop(data, None)
