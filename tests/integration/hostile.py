"""What hostile-record tests share: running a worker, crashing it before it commits, and
reading back what it wrote."""

from __future__ import annotations

import time
from typing import Any

from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import producer, read_events, read_records
from eddies.connectors.runtime.records import DLQ_REASON_HEADER, header
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import Agent
from eddies.events import AgentEvent, OutputEvent

from .agents import echo_agent


def start(settings: Settings, agent: Agent | None = None) -> Worker:
    """A started worker (the echo agent by default) that has its partitions."""
    worker = Worker(settings, agent or echo_agent()).start()
    assert worker.wait_assigned(60)
    return worker


def crash(worker: Worker) -> None:
    """Stop ``worker`` as a crash would: nothing more committed or snapshotted."""
    orch = worker.orchestrator
    assert orch is not None
    orch.checkpoints.commit = lambda *args, **kwargs: True  # type: ignore[method-assign]
    worker.stop()


def healthy(worker: Worker) -> None:
    """The worker runs and no role failed."""
    assert not worker.errors, worker.errors
    assert not worker.stopped


def big_producer(settings: Settings) -> Any:
    """A producer that sends records of up to 4 MB (larger than a worker's own)."""
    return producer(settings, **{"message.max.bytes": 4_000_000})


def outputs_by_session(settings: Settings, want: set[str], timeout: float = 60.0,
                       each: int = 1) -> dict[str, list[OutputEvent]]:
    """Distinct outputs (by event id) per session, once every session of ``want`` has
    ``each`` (or ``timeout`` passed)."""
    names = TopicNames(settings.app)
    seen: dict[str, AgentEvent] = {}
    deadline = time.monotonic() + timeout
    while True:
        for ev in read_events(settings, names.output):
            seen.setdefault(ev.event_id, ev)
        got: dict[str, list[OutputEvent]] = {}
        for ev in seen.values():
            assert isinstance(ev.payload, OutputEvent)
            got.setdefault(ev.session_id, []).append(ev.payload)
        if all(len(got.get(sid, ())) >= each for sid in want) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def dead_letters(settings: Settings, at_least: int = 0, timeout: float = 30.0) -> list[Any]:
    """The records of ``APP.dlq`` (waiting until there are ``at_least``)."""
    names = TopicNames(settings.app)
    deadline = time.monotonic() + timeout
    while True:
        dead = list(read_records(settings, names.dlq))
        if len(dead) >= at_least or time.monotonic() > deadline:
            return dead
        time.sleep(0.2)


def reason(msg: Any) -> str:
    """A dead letter's reason."""
    return (header(msg.headers(), DLQ_REASON_HEADER) or b"").decode()
