"""How worker roles join their consumer groups: incremental (cooperative-sticky)
rebalancing, so a worker keeps its partitions, sessions and running calls while others
move; a session timeout suited to the broker; and static membership where the broker
supports it, so a restarted worker takes its partitions back without a rebalance.

The embedded broker (Tansu 0.6) differs from Apache Kafka in two ways that matter here
(both measured, see bench/RESULTS.md):

- Its coordinator re-runs a pending JoinGroup once a second and answers it after half the
  session timeout; a killed member is evicted only after a full session timeout, and a
  rebalance that still counts it waits for it. With session timeouts of 2-6 s a worker
  restarted after SIGKILL got its partitions after 4-11 s; at 1.5 s (heartbeats every
  200 ms), after 2 s, every time. Apache Kafka refuses session timeouts under its
  ``group.min.session.timeout.ms`` (6 s by default), so 1.5 s is used only there.
- It mishandles static membership: a static member restarted under the same id waited
  over 20 s for its partitions and lost some to a newcomer.

Example::

    membership = Membership.for_broker(settings, cluster_id)
    consumer = group_consumer(settings, "orchestrator", membership)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eddies.connectors.runtime.settings import Settings

#: The cluster id the embedded broker reports.
TANSU_CLUSTER_ID = "tansu_cluster"
#: Session timeouts when ``session_timeout_ms`` is 0 (auto).
KAFKA_SESSION_TIMEOUT_MS = 6000
TANSU_SESSION_TIMEOUT_MS = 1500


@dataclass(frozen=True)
class Membership:
    """Group settings of a worker's roles on one broker."""

    static: bool
    session_timeout_ms: int
    heartbeat_ms: int
    #: The broker is the embedded one: readers work around its skipped-record defect
    #: (positions.py), which elsewhere would re-read every hole of a compacted topic.
    embedded: bool = False

    @classmethod
    def for_broker(cls, settings: Settings, cluster_id: str | None) -> Membership:
        """The settings for the broker whose cluster id is ``cluster_id``.

        ``static_membership``: true, false, or auto (when ``instance_id`` is set and the
        broker is not the embedded one); ``session_timeout_ms``: as set, or 0 for 6 s
        (1.5 s on the embedded broker)."""
        embedded = cluster_id == TANSU_CLUSTER_ID
        mode = settings.static_membership
        static = bool(settings.instance_id) and (mode == "true" or (mode == "auto" and not embedded))
        timeout = settings.session_timeout_ms or (
            TANSU_SESSION_TIMEOUT_MS if embedded else KAFKA_SESSION_TIMEOUT_MS)
        # Heartbeats well inside the timeout: a third of it at most, 500 ms at most.
        return cls(static, timeout, min(500, max(100, timeout // 7)), embedded)

    def reread_gaps(self, settings: Settings) -> bool:
        """Whether readers re-read skipped offsets: on the embedded broker, without
        transactions (whose markers leave gaps all the time)."""
        return self.embedded and not settings.exactly_once


def group_consumer(s: Settings, role: str, membership: Membership,
                   client_id: str | None = None) -> Any:
    """The consumer of a role's group ``{app}.{role}``: manual commits, cooperative-sticky
    assignment, ``membership``'s session timeout and heartbeats (and
    ``group.instance.id = {app}.{role}.{instance_id}`` when static), low fetch wait;
    ``client_id`` names the process to the group (see liveness.py)."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "group.id": f"{s.app}.{role}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": membership.session_timeout_ms,
        "heartbeat.interval.ms": membership.heartbeat_ms, "fetch.wait.max.ms": s.fetch_wait_ms,
    }
    if membership.static:
        conf["group.instance.id"] = f"{s.app}.{role}.{s.instance_id}"
    if client_id is not None and "client.id" not in s.kafka:
        conf["client.id"] = client_id
    if role == "orchestrator":  # it learns that it caught up with a partition it gained
        conf["enable.partition.eof"] = True
    return Consumer(s.client_config(**conf))
