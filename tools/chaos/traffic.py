"""The campaign's traffic: a feeder producing inputs, a monitor reading answers as they come,
and a watch noting when call outcomes become readable in the journal."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from eddies.connectors.runtime.client import input_event, producer
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import DecodeError, OutputEvent, decode, encode


@dataclass
class Sent:
    """One input the feeder produced: run ``run`` of session ``session``."""

    session: str
    run: int
    kind: str
    body: dict[str, Any]
    t: float
    delivered: bool = False


@dataclass
class Waves:
    """Inputs of the "slow" kind (one model call to the slow provider each), ``size`` at a
    time every ``every`` seconds, to the next ``size`` of ``sessions`` in turn: hundreds of
    calls in flight at once after each wave, at an average rate the 2-core machine keeps
    up with (a steady rate would need ~170 inputs a second for 300 calls of 1.75 s in
    flight), as bursty traffic does."""

    sessions: list[str]
    size: int
    every: float


class Feeder(threading.Thread):
    """Produces inputs to random sessions at random intervals until halted (and, with
    ``waves``, slow inputs in waves between them)."""

    def __init__(self, settings: Settings, sessions: list[str], rng: random.Random, mean_gap: float,
                 mix: dict[str, float], waves: Waves | None = None) -> None:
        super().__init__(daemon=True, name="feeder")
        self.settings = settings
        self.sessions = sessions
        self.rng = rng
        self.mean_gap = mean_gap
        self.mix = mix
        self.waves = waves
        self.waves_sent = 0
        self.halt = threading.Event()
        self.sent: list[Sent] = []
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []

    def body(self, session: str, n: int) -> dict[str, Any]:
        kind = self.rng.choices(list(self.mix), weights=list(self.mix.values()))[0]
        if kind == "effects":
            return {"kind": kind, "key": f"{session}#{n}", "a": self.rng.randint(0, 999), "b": n}
        rounds = self.rng.randint(1, 4 if kind == "react" else 3)
        return {"kind": kind, "ref": f"{session}/{n}", "rounds": rounds}

    def run(self) -> None:
        prod = producer(self.settings)
        topic = TopicNames(self.settings.app).input
        next_wave = time.time()
        while not self.halt.is_set():
            if self.waves is not None and time.time() >= next_wave:
                self.wave(prod, topic, self.waves)
                next_wave += self.waves.every
            session = self.rng.choice(self.sessions)
            n = self.counts[session]
            self.counts[session] += 1
            self.send(prod, topic, session, n, self.body(session, n))
            self.halt.wait(self.rng.expovariate(1 / self.mean_gap))
        left = prod.flush(60)
        if left:
            self.errors.append(f"{left} inputs not flushed")


    def wave(self, prod: Any, topic: str, waves: Waves) -> None:
        """The next ``waves.size`` slow sessions get an input each (the same sessions every
        ``len(sessions) / size`` waves: a session's next input may find its last unanswered)."""
        first = self.waves_sent * waves.size
        self.waves_sent += 1
        for i in range(first, first + waves.size):
            session = waves.sessions[i % len(waves.sessions)]
            n = self.counts[session]
            self.counts[session] += 1
            self.send(prod, topic, session, n, {"kind": "slow", "ref": f"{session}/{n}"})

    def send(self, prod: Any, topic: str, session: str, n: int, body: dict[str, Any]) -> None:
        item = Sent(session, n + 1, body["kind"], body, time.time())

        def report(err: KafkaError | None, _msg: Message, item: Sent = item) -> None:
            if err is not None:
                self.errors.append(f"{item.session} run {item.run}: {err}")
            else:
                item.delivered = True

        prod.produce(topic, encode(input_event(session, json.dumps(body))), session.encode(),
                     headers=HEADERS, on_delivery=report)
        self.sent.append(item)
        prod.poll(0)


@dataclass
class Seen:
    """An output record as the monitor read it, with the time it did."""

    t: float
    partition: int
    session: str
    run: int
    final: bool  # an OutputEvent (not some other record of the output topic)


class _TopicWatch(threading.Thread):
    """Reads every partition of ``topic`` from the start while the round runs, handing each
    record to :meth:`took` with the time it was read."""

    def __init__(self, settings: Settings, topic: str, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.settings = settings
        self.topic = topic
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        s = self.settings
        consumer = Consumer(s.client_config(**{
            "group.id": f"{s.app}.{self.name}.{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
            "fetch.wait.max.ms": 50, "auto.offset.reset": "earliest"}))
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(s.partitions)])
        try:
            while not self.halt.is_set():
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                self.took(msg, time.time())
        finally:
            consumer.close()

    def took(self, msg: Message, now: float) -> None:
        raise NotImplementedError


class OutputMonitor(_TopicWatch):
    """Reads the output topic from the start, noting when each answer arrived."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, TopicNames(settings.app).output, "outputs")
        self.seen: list[Seen] = []

    def took(self, msg: Message, now: float) -> None:
        try:
            e = decode(msg.value() or b"")
        except DecodeError:
            return
        seen = Seen(now, msg.partition() or 0, e.session_id, e.run, isinstance(e.payload, OutputEvent))
        with self.lock:
            self.seen.append(seen)

    def answered(self) -> set[tuple[str, int]]:
        """The (session, run) pairs answered so far."""
        with self.lock:
            return {(o.session, o.run) for o in self.seen if o.final}

    def first_answers(self) -> dict[tuple[str, int], float]:
        """When each (session, run) was first answered."""
        firsts: dict[tuple[str, int], float] = {}
        with self.lock:
            for o in sorted(self.seen, key=lambda o: o.t):
                if o.final:
                    firsts.setdefault((o.session, o.run), o.t)
        return firsts


class JournalWatch(_TopicWatch):
    """Reads the journal from the start, noting when each call outcome could first be read.
    A record's own timestamp is when its producer took it (CreateTime): a worker cut off
    from the brokers delivers its outcomes seconds after it stamped them, and the embedded
    broker keeps no append time. Read here up to ``fetch.wait.max.ms`` (50 ms) late."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, TopicNames(settings.app).journal, "journal")
        #: Each outcome key (``out/CALL/ATTEMPT``), and when it was first read.
        self.readable: dict[bytes, float] = {}

    def took(self, msg: Message, now: float) -> None:
        key = msg.key() or b""
        if key.startswith(b"out/") and msg.value() is not None:
            with self.lock:
                self.readable.setdefault(key, now)
