"""How worker roles join their consumer groups: incremental (cooperative-sticky)
rebalancing, so a worker keeps its partitions, sessions and running calls while others
move; and static membership where the broker supports it, so a restarted worker takes its
partitions back without a rebalance.

Static membership (``group.instance.id = {app}.{role}.{instance_id}``) needs an explicit
``instance_id`` unique to the worker slot. The embedded broker (Tansu 0.6) does not
handle it: a static member restarted under the same id waited over 20 s for its
partitions and lost some to a newcomer (measured), so ``static_membership = "auto"``
turns it on only for other brokers. Example::

    consumer = group_consumer(settings, "orchestrator", static=uses_static_membership(settings, cid))
"""

from __future__ import annotations

from typing import Any

from .settings import Settings

#: The cluster id the embedded broker reports.
TANSU_CLUSTER_ID = "tansu_cluster"


def uses_static_membership(settings: Settings, cluster_id: str | None) -> bool:
    """Whether the roles join with ``group.instance.id`` (``static_membership``: true,
    false, or auto: when ``instance_id`` is set and the broker is not the embedded one)."""
    mode = settings.static_membership
    if mode == "false" or not settings.instance_id:
        return False
    return mode == "true" or cluster_id != TANSU_CLUSTER_ID


def group_consumer(s: Settings, role: str, static: bool = False) -> Any:
    """The consumer of a role's group ``{app}.{role}``: manual commits, cooperative-sticky
    assignment, short session timeout (fast joins on the embedded broker), low fetch wait
    (latency); ``static``: with ``group.instance.id``."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "group.id": f"{s.app}.{role}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": s.session_timeout_ms, "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": s.fetch_wait_ms,
    }
    if static:
        conf["group.instance.id"] = f"{s.app}.{role}.{s.instance_id}"
    return Consumer(s.client_config(**conf))
