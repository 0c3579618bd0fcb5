"""What a worker gives its roles (orchestrator, executor): settings, the agent's plan, the
process's identity, its counters and metrics, and the Kafka clients it builds them.

The clients come through :class:`Clients`, so that a role runs unchanged on librdkafka
(:class:`KafkaClients`) or on the in-memory broker of :mod:`.memory_broker`, which the
broker-less driver (:mod:`.driver`) and ``bench/worker_cpu.py`` use. Example::

    ctx = RoleContext(settings=s, names=TopicNames(s.app), plan=plan, counters=Counters(),
                      membership=membership, signer=signer, claimant=Claimant(s.slot, "9f2c"),
                      clients=KafkaClients(s, membership), stalls=StallWatch(0.75).start())
    orchestrator = Orchestrator(ctx)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.journal.reading import JournalView, read_journal
from eddies.connectors.kafka.liveness import GroupMembers, client_id
from eddies.connectors.kafka.stalls import StallWatch
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.membership import Membership, group_consumer
from eddies.connectors.runtime.outbox import Outbox
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import AgentEvent

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics


class Clients(Protocol):
    """Where a role's consumers and producers come from."""

    def group_consumer(self, role: str) -> Any:
        """The consumer of ``role``'s group (manual commits, cooperative-sticky)."""

    def outbox(self, role: str, successes: bool = False) -> Outbox:
        """``role``'s producer of everything but started marks and epoch markers
        (``successes``: see :class:`Outbox`)."""

    def marks_producer(self) -> Any:
        """An idempotent producer that sends at once (started marks, epoch markers): each
        record's delivery report gives its offset."""

    def stream_producer(self) -> Any:
        """A producer for APP.stream: sends at once (a reader waits for each record)."""

    def read_journal(self, partitions: set[int], timeout: float = 60.0) -> JournalView:
        """``partitions`` of the journal, read from their start to their true end
        (TimeoutError after ``timeout`` seconds without progress)."""

    def group_members(self) -> GroupMembers | None:
        """Who the app's groups count as members now (None: not known here)."""

    def read_history(self, partition: int, sessions: set[str]) -> dict[str, list[AgentEvent]]:
        """The recorded history (APP.events) of ``sessions``, all of ``partition``, each
        event once, in order."""


class KafkaClients:
    """:class:`Clients` on librdkafka (confluent-kafka), for the roles of process
    ``claimant`` (named in its consumers' client ids, see liveness.py)."""

    def __init__(self, settings: Settings, membership: Membership,
                 claimant: Claimant | None = None) -> None:
        self.settings = settings
        self.membership = membership
        self.claimant = claimant

    def group_consumer(self, role: str) -> Any:
        return group_consumer(self.settings, role, self.membership,
                              None if self.claimant is None else client_id(self.claimant))

    def group_members(self) -> GroupMembers | None:
        return GroupMembers(self.settings, self.membership)

    def read_history(self, partition: int, sessions: set[str]) -> dict[str, list[AgentEvent]]:
        from eddies.connectors.inspect.replay import Place, records_of

        where = Place(TopicNames(self.settings.app).events, partition,
                      self.membership.reread_gaps(self.settings))
        out: dict[str, list[AgentEvent]] = {sid: [] for sid in sessions}
        for _, _, ev in records_of(self.settings, where, sessions):
            out[ev.session_id].append(ev)
        return out

    def outbox(self, role: str, successes: bool = False) -> Outbox:
        return Outbox(self.settings, role, successes)

    def marks_producer(self) -> Any:
        from confluent_kafka import Producer

        s = self.settings
        return Producer(s.client_config(**{"enable.idempotence": True, "linger.ms": 0,
                                           "message.max.bytes": s.write_limit}))

    def stream_producer(self) -> Any:
        from eddies.connectors.runtime.client import producer

        # Not idempotent: a record the broker took twice is dropped by its reader (seq).
        return producer(self.settings, **{"linger.ms": 0, "enable.idempotence": False, "acks": 1})

    def read_journal(self, partitions: set[int], timeout: float = 60.0) -> JournalView:
        return read_journal(self.settings, TopicNames(self.settings.app).journal, partitions,
                            timeout=timeout, reread_gaps=self.membership.reread_gaps(self.settings))


def _raise(err: BaseException) -> None:
    raise err


@dataclass
class RoleContext:
    """Everything a role takes from its worker."""

    settings: Settings
    names: TopicNames
    plan: AgentPlan
    counters: Counters
    membership: Membership
    signer: ResultSigner
    #: This process, as started marks and epoch markers name it.
    claimant: Claimant
    clients: Clients
    #: Notices this process standing still or cut off (shared by its roles).
    stalls: StallWatch
    metrics: WorkerMetrics | None = None
    #: Called with the error when a role's thread fails: the worker stops.
    fail: Callable[[BaseException], None] = _raise
