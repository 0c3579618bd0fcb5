"""What followers of sessions read (the HTTP door, the web view): one consumer per process
of ``APP.stream`` and ``APP.output`` (every partition, from where they end when it starts),
its records handed
to the followers of their session, and the last ``keep_s`` seconds of each session kept
for a follower that comes a little after its input (a retried request, a page reloaded).

One consumer, not one per follower: a door holds thousands of followers, and a librdkafka
consumer costs threads and a connection per broker. Example::

    hub = SessionHub(settings).start()
    follower = hub.follow("alice", loop)          # records from now, and the kept ones
    record = await follower.queue.get()           # a StreamEvent or an output AgentEvent
    hub.leave(follower)
    hub.close()
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import AgentEvent, DecodeError, decode
from eddies.events.stream import StreamEvent, decode_stream

log = logging.getLogger("eddies.serve")

Record = StreamEvent | AgentEvent


@dataclass(eq=False)
class Follower:
    """One reader of one session: its records arrive on ``queue``, in each topic's order."""

    session_id: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Record] = field(default_factory=asyncio.Queue)


class SessionHub:
    """Records of ``APP.stream`` and ``APP.output``, by session, for followers."""

    def __init__(self, settings: Settings, keep_s: float = 120.0, keep_per_session: int = 5000) -> None:
        self.settings = settings
        self.keep_s = keep_s
        self.keep_per_session = keep_per_session
        names = TopicNames(settings.app)
        self._topics = (names.stream, names.output)
        self._lock = threading.Lock()
        self._followers: dict[str, set[Follower]] = {}
        # Each session's records of the last keep_s seconds: (monotonic time, record).
        self._kept: dict[str, collections.deque[tuple[float, Record]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self.ready = threading.Event()

    def start(self) -> SessionHub:
        """Assign every partition of the two topics at their end, then read on a thread."""
        from confluent_kafka import Consumer, TopicPartition

        s = self.settings
        consumer = Consumer(s.client_config(**{
            "group.id": f"{s.app}.serve.{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "fetch.wait.max.ms": 10, "auto.offset.reset": "earliest"}))
        wait = s.connect_timeout_ms / 1000
        starts = []
        for topic in self._topics:
            meta = consumer.list_topics(topic, timeout=wait).topics.get(topic)
            if meta is None or meta.error is not None:
                consumer.close()
                raise LookupError(f"topic {topic} does not exist: is a worker of app {s.app} up?")
            for p in sorted(meta.partitions):
                _, end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=wait)
                starts.append(TopicPartition(topic, p, max(0, end)))
        consumer.assign(starts)
        self._consumer = consumer
        # Some brokers (the embedded one) answer an end a little early: older records are
        # skipped by their time too.
        self._since_ms = int(time.time() * 1000) - 1000
        self._thread = threading.Thread(target=self._run, name="eddies-serve-hub", daemon=True)
        self._thread.start()
        return self

    def follow(self, session_id: str, loop: asyncio.AbstractEventLoop,
               since: float | None = None) -> Follower:
        """A follower of ``session_id`` on ``loop``: the records kept since ``since``
        (monotonic time; None: none), then each new one."""
        follower = Follower(session_id, loop)
        with self._lock:
            self._followers.setdefault(session_id, set()).add(follower)
            if since is not None:
                for at, rec in self._kept.get(session_id, ()):
                    if at >= since:
                        follower.queue.put_nowait(rec)
        return follower

    def leave(self, follower: Follower) -> None:
        """Stop handing records to ``follower``."""
        with self._lock:
            followers = self._followers.get(follower.session_id)
            if followers is not None:
                followers.discard(follower)
                if not followers:
                    del self._followers[follower.session_id]

    def close(self) -> None:
        """Stop reading."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._consumer is not None:
            self._consumer.close()

    def _run(self) -> None:
        last_prune = time.monotonic()
        while not self._stop.is_set():
            try:
                # The first record as soon as it comes, then what is fetched already:
                # consume(500, 0.1) would wait for 500 records or the 100 ms, each time.
                first = self._consumer.poll(0.1)
                msgs = [] if first is None else [first, *self._consumer.consume(499, 0)]
            except Exception:  # a broker cut off: librdkafka reconnects; try again
                log.exception("reading the stream failed")
                time.sleep(0.5)
                continue
            self.ready.set()
            now = time.monotonic()
            for msg in msgs:
                if msg.error() is not None or msg.key() is None or msg.timestamp()[1] < self._since_ms:
                    continue
                record = self._decode(msg)
                if record is not None:
                    self._hand(msg.key().decode(errors="replace"), record, now)
            if now - last_prune > 5:
                self._prune(now)
                last_prune = now

    def _decode(self, msg: Any) -> Record | None:
        try:
            if msg.topic() == self._topics[0]:
                return decode_stream(msg.value())
            return decode(msg.value())
        except DecodeError:
            return None

    def _hand(self, session_id: str, record: Record, now: float) -> None:
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None:
                kept = self._kept[session_id] = collections.deque(maxlen=self.keep_per_session)
            kept.append((now, record))
            for follower in self._followers.get(session_id, ()):
                with contextlib.suppress(RuntimeError):  # its loop is closed: the server stops
                    follower.loop.call_soon_threadsafe(follower.queue.put_nowait, record)

    def _prune(self, now: float) -> None:
        with self._lock:
            for sid in [sid for sid, kept in self._kept.items() if kept[-1][0] < now - self.keep_s]:
                del self._kept[sid]
            for kept in self._kept.values():
                while kept and kept[0][0] < now - self.keep_s:
                    kept.popleft()
