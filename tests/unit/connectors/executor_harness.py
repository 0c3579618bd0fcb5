"""What the claim and hand-over tests share: a real KafkaExecutor of slot e0 whose
producer is a sink (no broker), and journal tails fed records by hand."""

from __future__ import annotations

from typing import Any

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.kafka.journal_tail import JournalTail
from eddies.connectors.kafka.stalls import StallWatch
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.settings import load_settings
from eddies.events import AgentEvent, CallKind, DurableCallRequest


class Sink:
    """A producer that keeps what it is given: (topic, value, key)."""

    transactional = False

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None]] = []

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                **_kw: Any) -> None:
        self.records.append((topic, value, key))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0


def read_back(tail: JournalTail, records: list[tuple[str, bytes | None, bytes | None]],
              topic: str, start: int, partition: int = 0) -> None:
    """The journal tail reads ``records`` of ``topic`` (as its consumer hands them over)."""
    from eddies.connectors.kafka.memory_broker import Record

    for offset, (t, value, key) in enumerate([r for r in records if r[0] == topic and r[2]],
                                             start=start):
        with tail.lock:
            tail._fold(Record(t, partition, offset, key, value), partition)


def local_executor() -> tuple[Any, Sink]:
    """A real KafkaExecutor of slot e0 in local mode, its producer a sink (no broker)."""
    from eddies.connectors.kafka.executor import KafkaExecutor
    from eddies.connectors.kafka.memory_broker import MemoryBroker, MemoryClients
    from eddies.connectors.kafka.roles import RoleContext
    from eddies.connectors.runtime.signing import ResultSigner
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.engine import AgentPlan
    from tests.agents import Echo

    settings = load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9", "app": "t",
                                                "partitions": 2, "instance_id": "e0"})
    ctx = RoleContext(settings=settings, names=TopicNames("t"), plan=AgentPlan.compile(Echo()),
                      counters=Counters(), membership=Membership(False, 6000, 2000),
                      signer=ResultSigner([b"k" * 32]), claimant=Claimant("e0", "cccc"),
                      clients=MemoryClients(MemoryBroker(), settings), stalls=StallWatch(3.0))
    executor = KafkaExecutor(ctx, None, local=True)
    sink = Sink()
    executor.producer = executor.claims.producer = sink  # type: ignore[assignment]
    return executor, sink


def idempotent_call(session: str) -> AgentEvent:
    return AgentEvent.external(session, DurableCallRequest(
        f"{session}:r1:i1:c0", CallKind.FUNCTION, "builtins:abs", '{"args":[-3],"kwargs":{}}',
        idempotent=True), event_id="req-1", timestamp=0)


def read_back_view(view: Any, records: list[tuple[str, bytes | None, bytes | None]]) -> None:
    """``view`` folds ``records`` as a journal read does (offsets from 0, partition 0)."""
    from eddies.connectors.journal.reading import fold
    from eddies.connectors.kafka.memory_broker import Record

    for offset, (t, value, key) in enumerate(records):
        fold(view, Record(t, 0, offset, key, value))
