"""Which partitions a role holds, under which epoch, and whether it may still write for them.

Every write a role makes for a partition asks this object first. A partition is *held*
from the moment the group assigns it and its epoch marker is in the journal
(:meth:`Ownership.claim`), until the group revokes it, reports it lost, or this process
finds out by itself that it lost it (:meth:`Ownership.drop`). After this process stood
still or waited on the brokers too long (:mod:`.stalls`), nothing may be written until the
role has confirmed that the group still counts it as a member (:func:`confirm_membership`:
the offsets committed last, committed again, which a broker refuses from a member it has
evicted; both brokers do), through its :class:`~.stalls.StallGate`. Whatever slips through
that window, the journal's readers refuse (:mod:`.epochs`).

Example::

    ownership = Ownership(ORCHESTRATOR, claimant, names.journal, marks, stalls)
    epochs = ownership.claim({0, 1})          # markers written, their offsets returned
    member = consumer.memberid()              # (in the assignment's callback)
    ...
    if ownership.gate.unsure():               # a stall since the last confirmation
        answer = confirm_membership(consumer, names.input, ownership.held, committed,
                                    member)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.journal.epochs import NO_EPOCH, marker_key
from eddies.connectors.kafka.stalls import StallGate, StallWatch
from eddies.connectors.runtime.outbox import DeliveryFailedError

#: How long an epoch marker may take to be delivered.
MARKER_TIMEOUT_S = 30.0


class Ownership:
    """The partitions ``role`` holds in this process, each with its epoch."""

    def __init__(self, role: str, claimant: Claimant, journal: str, marks: Any,
                 stalls: StallWatch) -> None:
        self.role = role
        self.claimant = claimant
        self.journal = journal
        #: An idempotent producer that sends at once (markers; pings: MembershipCheck).
        self.marks = marks
        self.stalls = stalls
        self.epochs: dict[int, int] = {}
        #: Whether writes must wait for a confirmation after a stall (shared with the
        #: process's local executor).
        self.gate = StallGate(stalls)

    @property
    def held(self) -> set[int]:
        """The partitions held (a copy)."""
        return set(self.epochs)

    def holds(self, partition: int) -> bool:
        """Whether ``partition`` is held here."""
        return partition in self.epochs

    def epoch(self, partition: int) -> int:
        """The epoch ``partition`` is held under (NO_EPOCH if it is not held)."""
        return self.epochs.get(partition, NO_EPOCH)

    def claim(self, partitions: set[int]) -> dict[int, int]:
        """Append an epoch marker to each of ``partitions`` of the journal and hold them
        under the markers' offsets; DeliveryFailedError if a marker is not delivered."""
        if not partitions:
            return {}
        got: dict[int, int] = {}
        errors: list[str] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                got[msg.partition()] = msg.offset()

        for part in sorted(partitions):
            self.marks.produce(self.journal, self.claimant.token, marker_key(self.role, part),
                                partition=part, on_delivery=report)
        left = self.marks.flush(MARKER_TIMEOUT_S)
        if left or errors or set(got) != partitions:
            raise DeliveryFailedError(f"the {self.role}'s epoch markers for partitions "
                                      f"{sorted(partitions)} were not delivered: "
                                      f"{errors[0] if errors else 'timed out'}")
        self.epochs.update(got)
        return got

    def drop(self, partitions: set[int]) -> set[int]:
        """Hold ``partitions`` no more; returns those that were held."""
        gone = partitions & set(self.epochs)
        for part in gone:
            del self.epochs[part]
        return gone


def confirm_membership(consumer: Any, topic: str, held: set[int],
                       committed: dict[int, int], member: str | None = None) -> bool | None:
    """Commit again, synchronously, the offsets of ``held`` partitions of ``topic`` that were
    committed last (``committed``, completed from the group's where it has none): True when
    the broker took them, or answered that a rebalance is in progress (this consumer is
    still a member: what it holds stays its own until it revokes it), False when it
    refused them because it evicted this member (its partitions are gone), None when there
    is no answer (the brokers out of reach). Call it on the thread that polls ``consumer``:
    from another, librdkafka's requests can wait for seconds.

    ``member`` is the member id the consumer had when it was given ``held``. A consumer
    that stood still or was cut off past its session timeout gives that membership up and
    joins again under a new id, and a broker takes a commit from any member of the group,
    for any partition, even one another member holds (both brokers do): an answer to
    another member id says nothing of ``held`` (False)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    if not held:
        return True
    if member is not None and consumer.memberid() != member:
        return False
    try:
        missing = sorted(held - set(committed))
        if missing:  # nothing committed here yet: the group's offsets (0: none)
            for tp in consumer.committed([TopicPartition(topic, p) for p in missing], timeout=2):
                committed.setdefault(tp.partition, max(tp.offset, 0))
        consumer.commit(offsets=[TopicPartition(topic, p, committed[p]) for p in sorted(held)],
                        asynchronous=False)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_INSTANCE_ID):
            return False
        if err.code() in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION):
            # Still a member, in the middle of a rebalance: cooperative rebalancing gives a
            # member's partitions to another only after that member revoked them (a member
            # that stopped answering is evicted first: UNKNOWN_MEMBER_ID).
            return member is None or consumer.memberid() == member
        return None
    # (It may have joined again while the commit waited.)
    return member is None or consumer.memberid() == member


class MembershipCheck:
    """Whether the group still counts a role as a member, asked on the role's loop (a
    consumer is not to be used from two threads: librdkafka's OffsetFetch and metadata
    requests then wait for seconds): :func:`confirm_membership` after a stall (or after a
    request to the brokers that failed or was too slow), and otherwise, every third of the
    gate's lease, a cheap request (``ping``: topic metadata, through a producer) that
    renews the lease without waiting for a rebalance in progress, as a commit does. An
    eviction is handed to ``evicted`` (when it was asked, the partitions and epochs held
    then), for the role to drop them. Example::

        check = MembershipCheck(gate, ask=lambda: (dict(ownership.epochs), ask_the_group()),
                                evicted=lambda asked, held: drop(held),
                                ping=lambda timeout: producer.list_topics(topic, timeout))
        check.check()                        # on each turn of the loop
    """

    def __init__(self, gate: StallGate,
                 ask: Callable[[], tuple[dict[int, int], bool | None]],
                 evicted: Callable[[float, dict[int, int]], None],
                 ping: Callable[[float], object] | None = None) -> None:
        self.gate = gate
        self._ask = ask
        self._evicted = evicted
        self._ping = ping

    def confirm(self) -> bool:
        """Ask the group now: True once it answered (membership shown, or the eviction
        handed over), False without an answer."""
        began = time.monotonic()
        held, answer = self._ask()
        if answer is None:
            return False
        if not answer:
            self._evicted(began, held)
        self.gate.confirmed(began)
        return True

    def check(self) -> None:
        """Ask what is due: the group after a stall, else the brokers when a ping is due."""
        gate = self.gate
        if gate.confirmation_due() or (self._ping is None and gate.reach_due()):
            self.confirm()
            return
        if not gate.reach_due() or self._ping is None:
            return
        began = time.monotonic()
        try:
            self._ping(max(0.1, gate.lease_s / 2))
        except Exception:  # out of reach
            gate.stalls.note()
            return
        if time.monotonic() - began > gate.stalls.threshold_s:
            gate.stalls.note()  # an answer that late: as if cut off meanwhile
        else:
            gate.reached(began)
