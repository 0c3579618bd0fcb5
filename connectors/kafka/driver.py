"""A broker-less driver for orchestrators, as Kafka Streams' TopologyTestDriver is for a
topology: real orchestrators (loop, ownership, step, checkpoints) on an in-memory broker
(:mod:`.memory_broker`), turned one loop turn at a time, with the group's decisions
(assign, revoke, evict) and the executors' answers in the test's hands. It checks the order
of records, snapshots, commits and ownership changes in milliseconds, with no thread and
no timing. Example::

    driver = Driver(my_agent, partitions=1)
    a = driver.orchestrator("a")
    driver.assign("a", [0])
    driver.send("alice", "hello")
    driver.settle()                      # turns, performs requests, until quiet
    assert driver.outputs()[0].payload.output == ...
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eddies.connectors.execution.call_hooks import CallAdmission
from eddies.connectors.execution.calls import CallPerformer
from eddies.connectors.journal.claims import Claimant
from eddies.connectors.journal.epochs import ORCHESTRATOR, stamp_of
from eddies.connectors.kafka.memory_broker import (
    MemoryBroker,
    MemoryClients,
    MemoryConsumer,
    MemoryProducer,
    Record,
)
from eddies.connectors.kafka.orchestrator import Orchestrator
from eddies.connectors.kafka.roles import RoleContext
from eddies.connectors.kafka.stalls import StallWatch
from eddies.connectors.runtime.client import input_event, signal_event
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.records import CANCEL_HEADER, HEADERS, header, journal_partition, outcome_key
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import Agent, AgentPlan
from eddies.events import (
    AgentEvent,
    DurableCallRequest,
    decode,
    encode,
)


class Driver:
    """Orchestrators of one app on a :class:`MemoryBroker` (see the module docstring).
    ``settings``: overrides (``partitions`` is set from the argument; a commit is due at
    every turn unless ``commit_interval_ms`` is given)."""

    def __init__(self, agent: Agent | AgentPlan, partitions: int = 1, **settings: Any) -> None:
        self.settings: Settings = load_settings(env={}, overrides={
            "bootstrap_servers": "memory", "app": "driven", "partitions": partitions,
            "role": "orchestrator", **settings})
        self._every_turn = "commit_interval_ms" not in settings
        self.names = TopicNames(self.settings.app)
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        self.broker = MemoryBroker()
        for topic in self.names.all():
            self.broker.create(topic, partitions)
        self.signer = ResultSigner([DEV_KEY])
        self.orchestrators: dict[str, Orchestrator] = {}
        self._clients: dict[str, MemoryClients] = {}
        self._producer = MemoryProducer(self.broker)
        self._requests_read = [0] * partitions
        self._performer: CallPerformer | None = None
        self._admission = CallAdmission(self.plan)
        self._outcomes: dict[tuple[str, int], bytes] = {}
        self._redeliver: list[AgentEvent] = []

    # --- orchestrators and the group -------------------------------------------------------
    def orchestrator(self, name: str) -> Orchestrator:
        """A new orchestrator process ``name`` (its claimant's slot and incarnation), joined."""
        clients = MemoryClients(self.broker, self.settings)
        ctx = RoleContext(
            settings=self.settings, names=self.names, plan=self.plan, counters=Counters(),
            membership=Membership(static=False, session_timeout_ms=1500, heartbeat_ms=200),
            signer=self.signer, claimant=Claimant(name, name), clients=clients,
            stalls=StallWatch(0.75))  # not started: a stall is whatever the test notes
        orch = Orchestrator(ctx)
        if self._every_turn:
            orch.checkpoints.interval_s = 0.0
        orch.open()
        self.orchestrators[name] = orch
        self._clients[name] = clients
        return orch

    def clients(self, name: str) -> MemoryClients:
        """The clients of orchestrator ``name`` (a test may wrap their methods)."""
        return self._clients[name]

    def consumer(self, name: str) -> MemoryConsumer:
        """The input consumer of orchestrator ``name``."""
        return self._clients[name].consumers[ORCHESTRATOR]

    def assign(self, name: str, partitions: list[int]) -> None:
        """The group gives ``name`` these input partitions (applied at its next turn)."""
        self.broker.assign(self.consumer(name), partitions)

    def revoke(self, name: str, partitions: list[int]) -> None:
        """The group takes ``partitions`` back from ``name`` cleanly (at its next turn)."""
        self.broker.revoke(self.consumer(name), partitions)

    def evict(self, name: str, notice_after: int = 0) -> None:
        """The group goes on without ``name`` (a pause past its session timeout): its
        commits are refused from now on, and it hears of the loss only after
        ``notice_after`` more polls (librdkafka hands out what it fetched first; a turn
        polls twice)."""
        consumer = self.consumer(name)
        self.broker.evict(consumer)
        consumer.notice_after = notice_after

    def cut(self, name: str, cut: bool = True) -> None:
        """Cut ``name`` off the brokers (its commits fail with a transport error), or not."""
        self.consumer(name).unreachable = cut

    def stall(self, name: str) -> None:
        """``name`` noticed that it stood still (as its stall watch would on waking up)."""
        self.orchestrators[name].stalls.note()

    def turn(self, name: str, times: int = 1) -> None:
        """``times`` turns of ``name``'s loop."""
        for _ in range(times):
            self.orchestrators[name].turn()

    # --- records in and out ----------------------------------------------------------------
    def send(self, session: str, value: Any) -> None:
        """A user's input for ``session``."""
        ev = input_event(session, value)
        self._producer.produce(self.names.input, encode(ev), session.encode(), headers=HEADERS)

    def signal(self, session: str, name: str, value: Any) -> None:
        """A user's signal for ``session``."""
        ev = signal_event(session, name, value)
        self._producer.produce(self.names.input, encode(ev), session.encode(), headers=HEADERS)

    def perform_requests(self, send: bool = True) -> int:
        """Act as an executor: perform the requests on APP.requests not performed yet,
        journal their outcomes, send their signed results (without ``send``: an executor
        that died between the two, whose requests the next call redelivers, as the
        executors' group does). Returns how many."""
        done = 0
        # Requests whose executor died before it sent their result: redelivered (their
        # offsets were not committed), answered from the journal.
        again, self._redeliver = self._redeliver, []
        for request in again:
            self._perform(request)
        for part, log in enumerate(self.broker.topics[self.names.requests]):
            for record in log[self._requests_read[part]:]:
                self._requests_read[part] += 1
                if record is None or record.value() is None or header(
                        record.headers(), CANCEL_HEADER) is not None:
                    continue
                request = decode(record.value() or b"")
                self._perform(request, send)
                if not send:
                    self._redeliver.append(request)
                done += 1
        return done

    def _perform(self, request: AgentEvent, send: bool = True) -> None:
        req = request.payload
        assert isinstance(req, DurableCallRequest)
        data = self._outcomes.get((req.call_id, req.attempt))
        if data is not None:  # as an executor does: answered from the journal
            self._send(request, data)
            return
        if self._performer is None:
            machine = next(iter(self.orchestrators.values())).machine
            self._performer = CallPerformer(self.plan, machine.callable_for)
        returned = self._admission.refused(request)
        if returned is None:
            returned = self._performer.perform(req, request.scope)
        result = self._performer.outcome(request, returned)
        data = self._outcomes[(req.call_id, req.attempt)] = encode(result)
        self._producer.produce(self.names.journal, data, outcome_key(req.call_id, req.attempt),
                               partition=journal_partition(request.session_id,
                                                           self.settings.partitions))
        if send:
            self._send(request, data)

    def _send(self, request: AgentEvent, data: bytes) -> None:
        self._producer.produce(self.names.input, data, request.session_id.encode(),
                               headers=[*HEADERS, (SIGNATURE_HEADER, self.signer.sign(data))])

    def settle(self, names: Iterable[str] | None = None, turns: int = 50) -> None:
        """Turn ``names`` (default: every orchestrator) and perform requests until nothing
        new happens (at most ``turns`` rounds)."""
        chosen = list(self.orchestrators if names is None else names)
        for _ in range(turns):
            before = sum(len(log) for logs in self.broker.topics.values() for log in logs)
            for name in chosen:
                self.turn(name)
            self.perform_requests()
            after = sum(len(log) for logs in self.broker.topics.values() for log in logs)
            if after == before:
                return

    def outputs(self) -> list[AgentEvent]:
        """The events on APP.output, in partition order."""
        return [decode(r.value() or b"") for r in self.broker.records(self.names.output)]

    def journal(self, partition: int = 0) -> list[Record]:
        """The records of one journal partition."""
        return self.broker.records(self.names.journal, partition)

    def snapshots(self, session: str) -> list[tuple[int, int]]:
        """(epoch, seq) of each stamped snapshot of ``session`` in the journal, in order."""
        part = journal_partition(session, self.settings.partitions)
        out = []
        for r in self.journal(part):
            value = r.value()
            key = (r.key() or b"").decode()
            ours = key.startswith("snap") and key.partition("/")[2] == session
            stamp = stamp_of(value) if ours and value is not None else None
            if stamp is not None:
                out.append((stamp.epoch, stamp.seq))
        return out

    def committed(self, partition: int) -> int:
        """The input offset the orchestrators' group committed for ``partition`` (-1: none)."""
        return self.broker.committed.get(
            (f"{self.settings.app}.{ORCHESTRATOR}", self.names.input, partition), -1)

