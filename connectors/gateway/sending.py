"""What the HTTP door writes to ``APP.input``: inputs and signals on one producer per
process, each request answered once the broker has the record. Example::

    sender = InputSender(settings)
    await sender.send(input_event("alice", "hi", event_id="http-..."))
    sender.close()
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from eddies.connectors.runtime.client import input_headers, producer
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import AgentEvent, encode


class DeliveryError(RuntimeError):
    """The broker did not take a record (the message says why)."""


def idempotent_id(session_id: str, key: str | None) -> str:
    """The event id of an input sent with idempotency key ``key``: the same for every
    retry of one request, so the session applies it once (no key: a new one)."""
    if not key:
        return f"http-{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{session_id}\0{key}".encode()).hexdigest()[:32]
    return f"http-{digest}"


class InputSender:
    """One producer for the door's inputs and signals, polled on a thread of its own."""

    def __init__(self, settings: Settings, signer: ResultSigner | None = None) -> None:
        self.topic = TopicNames(settings.app).input
        #: Vouches for the identity of the inputs that name one (the identity key's).
        self.signer = signer
        # A record the broker does not take within the connect timeout fails, instead of
        # being retried for librdkafka's default 5 minutes while the client waits.
        extra = {} if "message.timeout.ms" in settings.kafka else {
            "message.timeout.ms": settings.connect_timeout_ms}
        self._producer = producer(settings, **{"linger.ms": 1, **extra})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="eddies-serve-send", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    async def send(self, event: AgentEvent) -> None:
        """Produce ``event`` keyed by its session; return once the broker has it."""
        done: Future[None] = Future()

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                done.set_exception(DeliveryError(f"{self.topic}: {err}"))
            else:
                done.set_result(None)

        data = encode(event)
        self._producer.produce(self.topic, data, event.session_id.encode(),
                               headers=input_headers(event, data, self.signer), on_delivery=delivered)
        await asyncio.wrap_future(done)

    def close(self) -> None:
        """Send what is queued (up to 10 s), then stop."""
        self._stop.set()
        self._thread.join(5)
        self._producer.flush(10)
