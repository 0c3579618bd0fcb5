"""The confirmation a role asks for after a stall or a network cut says "still yours" only
for the membership its partitions were given under. A consumer cut off past its session
timeout gives its membership up and joins again under a new member id, and the broker takes
a commit from any member of the group, for any partition, also one another member holds
(seen on the embedded broker, the same in Apache Kafka): the commit alone would confirm
partitions the group gave away."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from eddies.connectors.kafka.ownership import confirm_membership

pytestmark = pytest.mark.integration

PARTITIONS = 4
SESSION_MS = 6000  # Apache Kafka's least by default


def _consumer(bootstrap: str, group: str, topic: str, held: set[int]) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest",
        # Past this without a poll, librdkafka leaves the group, and joins again under a
        # new member id at its next poll (its way out of a session timeout too).
        "max.poll.interval.ms": SESSION_MS})

    def assigned(c: Any, parts: list[Any]) -> None:
        held.update(tp.partition for tp in parts)

    def taken(c: Any, parts: list[Any]) -> None:
        held.difference_update(tp.partition for tp in parts)

    consumer.subscribe([topic], on_assign=assigned, on_revoke=taken, on_lost=taken)
    return consumer


def _poll_until(consumers: list[Any], done: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the group did not settle"
        for c in consumers:
            c.poll(0.05)


def test_an_answer_to_a_new_membership_does_not_confirm_the_old_ones_partitions(
        bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"membership-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (alive until the topic is made)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    a_held: set[int] = set()
    b_held: set[int] = set()
    a = _consumer(bootstrap, group, topic, a_held)
    b: Any = None
    try:
        _poll_until([a], lambda: len(a_held) == PARTITIONS)
        first = a.memberid()
        held, committed = set(a_held), dict.fromkeys(a_held, 0)
        assert confirm_membership(a, topic, held, committed, first) is True

        # A stands still past its poll interval (as long as its session timeout): it
        # leaves the group, B joins and is given A's partitions, and A joins again under a
        # new member id at its next poll; cooperative-sticky then moves part to it.
        b = _consumer(bootstrap, group, topic, b_held)
        deadline = time.monotonic() + SESSION_MS / 1000 + 2
        while time.monotonic() < deadline:
            b.poll(0.1)
        _poll_until([a, b], lambda: bool(a_held) and bool(b_held)
                    and len(a_held) + len(b_held) == PARTITIONS)
        second = a.memberid()
        assert second and second != first
        assert b_held <= held, "B holds some of what A held under its first membership"

        # The broker takes A's commit of all four (its new membership is valid)...
        assert confirm_membership(a, topic, held, dict(committed)) is True
        # ...which says nothing of what A was given under its first one.
        assert confirm_membership(a, topic, held, dict(committed), first) is False
        assert confirm_membership(a, topic, set(a_held), dict.fromkeys(a_held, 0), second) is True
    finally:
        a.close()
        if b is not None:
            b.close()
