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
    if ownership.gate.unsure():               # a stall since the last confirmation
        answer = confirm_membership(consumer, names.input, ownership.held, committed)
"""

from __future__ import annotations

from typing import Any

from .claims import Claimant
from .epochs import NO_EPOCH, marker_key
from .outbox import DeliveryFailedError
from .stalls import StallGate, StallWatch

#: How long an epoch marker may take to be delivered.
MARKER_TIMEOUT_S = 30.0


class Ownership:
    """The partitions ``role`` holds in this process, each with its epoch."""

    def __init__(self, role: str, claimant: Claimant, journal: str, marks: Any,
                 stalls: StallWatch) -> None:
        self.role = role
        self.claimant = claimant
        self.journal = journal
        self._marks = marks  # an idempotent producer that sends at once
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
            self._marks.produce(self.journal, self.claimant.token, marker_key(self.role, part),
                                partition=part, on_delivery=report)
        left = self._marks.flush(MARKER_TIMEOUT_S)
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
                       committed: dict[int, int]) -> bool | None:
    """Commit again, synchronously, the offsets of ``held`` partitions of ``topic`` that were
    committed last (``committed``, completed from the group's where it has none): True when
    the broker took them (this consumer is still a member of the current generation), False
    when it refused them because it evicted this member (its partitions are gone), None
    when there is no answer yet (a rebalance in progress, the brokers out of reach)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    if not held:
        return True
    try:
        if not set(committed) >= held:  # nothing committed here yet: the group's offsets
            for tp in consumer.committed([TopicPartition(topic, p) for p in sorted(held)],
                                         timeout=5):
                committed.setdefault(tp.partition, max(tp.offset, 0))
        consumer.commit(offsets=[TopicPartition(topic, p, committed[p]) for p in sorted(held)],
                        asynchronous=False)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION,
                          KafkaError.FENCED_INSTANCE_ID):
            return False
        return None
    return True
