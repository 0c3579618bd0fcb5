"""The topics of an application, created when missing and checked when present.

Every topic is keyed by session id and has the same partition count, so a session's
records share one partition number everywhere (co-partitioning). Example::

    names = TopicNames("demo")
    ensure_topics(admin, names, partitions=4)   # creates demo.input, demo.events, ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: How long APP.stream keeps its records (made by Eddies; change it on the topic).
STREAM_RETENTION_MS = 3_600_000


class TopicError(RuntimeError):
    """A topic is missing or has the wrong shape; the message names the topic."""


@dataclass(frozen=True)
class TopicNames:
    """Names of the topics of application ``app``. Computed once: the per-record path
    asks for them with every record it routes."""

    app: str
    #: InputEvents from users (prompts), and call results.
    input: str = field(init=False, repr=False, compare=False)
    #: Every event of every session, in order: the history.
    events: str = field(init=False, repr=False, compare=False)
    #: Durable-call requests for executor processes (``--role executor``).
    requests: str = field(init=False, repr=False, compare=False)
    #: OutputEvents for downstream consumers.
    output: str = field(init=False, repr=False, compare=False)
    #: Call outcomes, started marks and session snapshots (compacted).
    journal: str = field(init=False, repr=False, compare=False)
    #: Records that could not be decoded or accepted, with the reason in headers.
    dlq: str = field(init=False, repr=False, compare=False)
    #: Answers as they are written and what the agent is doing (StreamEvents): a view for
    #: people, kept an hour, not part of the history (see connectors/streaming).
    stream: str = field(init=False, repr=False, compare=False)
    #: Reports of evaluations of this app (``eddies eval``; ``eddies ui`` lists them). Not
    #: one of the seven a worker needs: made by the first evaluation that keeps a report.
    evaluations: str = field(init=False, repr=False, compare=False)
    #: An evaluation's own app only: the rules its workers answer calls by (one record,
    #: made before the seven; see connectors/evaluation/call_rules.py).
    call_rules: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for topic in ("input", "events", "requests", "output", "journal", "dlq", "stream", "evaluations"):
            object.__setattr__(self, topic, f"{self.app}.{topic}")
        object.__setattr__(self, "call_rules", f"{self.app}.call-rules")

    def all(self) -> list[str]:
        """The names of the seven topics a worker makes."""
        return [self.input, self.events, self.requests, self.output, self.journal, self.dlq,
                self.stream]

    def configs(self, name: str, max_message_bytes: int | None = None) -> dict[str, str]:
        """Topic configs Eddies sets when it creates ``name`` (``max_message_bytes``: the
        largest record its workers write, so the broker takes what their producers send)."""
        conf = {} if max_message_bytes is None else {"max.message.bytes": str(max_message_bytes)}
        if name == self.journal:
            # A call's first started mark must outlive the claim checks that compare
            # against it: compaction keeps only the latest mark of a key (see claims.py).
            conf.update({"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
        if name == self.stream:  # read as it is written: an hour is plenty to catch up
            conf.update({"retention.ms": str(STREAM_RETENTION_MS)})
        return conf


def ensure_topics(admin: Any, names: TopicNames, partitions: int, replication: int = 1,
                  timeout: float = 15.0, max_message_bytes: int | None = None) -> list[str]:
    """Create missing topics; check that existing ones have ``partitions`` partitions.
    ``max_message_bytes``: set on created topics (``Settings.write_limit``).

    Returns the names created. Raises :class:`TopicError` naming a topic whose partition
    count differs (co-partitioning would break) or that could not be created.
    """
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    existing = admin.list_topics(timeout=timeout).topics
    for name in names.all():
        meta = existing.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) != partitions:
            raise TopicError(
                f"topic {name} has {len(meta.partitions)} partitions, expected {partitions}; "
                "all topics of an application must have the same count (set `partitions` to "
                f"{len(meta.partitions)} or use another app id)"
            )
    missing = [n for n in names.all() if n not in existing or existing[n].error is not None]
    return _create(admin, [NewTopic(n, partitions, replication, config=names.configs(n, max_message_bytes))
                           for n in missing], timeout)


def ensure_topic(admin: Any, name: str, partitions: int = 1, replication: int = 1,
                 config: dict[str, str] | None = None, timeout: float = 15.0) -> bool:
    """Create topic ``name`` if it is missing (another process may create it meanwhile);
    whether this call created it. For a topic outside the seven of an app (``APP.evaluations``)."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    meta = admin.list_topics(timeout=timeout).topics.get(name)
    if meta is not None and meta.error is None:
        return False
    return bool(_create(admin, [NewTopic(name, partitions, replication, config=config or {})], timeout))


def _create(admin: Any, topics: list[Any], timeout: float) -> list[str]:
    """Create ``topics``; the names this call created (not those another process created
    meanwhile)."""
    if not topics:
        return []
    created = set()
    for name, future in admin.create_topics(topics, operation_timeout=timeout).items():
        try:
            future.result()
        except Exception as err:
            if "TOPIC_ALREADY_EXISTS" in str(err):  # created meanwhile by another worker
                continue
            raise TopicError(f"topic {name} could not be created: {err}") from err
        created.add(name)
    return [t.topic for t in topics if t.topic in created]  # in the order asked


def check_record_limits(admin: Any, names: TopicNames, need: int, timeout: float = 15.0) -> None:
    """Raise :class:`TopicError` naming a topic whose ``max.message.bytes`` is below
    ``need`` (``Settings.write_limit``): the broker would refuse an event the engine may
    write, and the worker could not get past it. A broker that does not say (the embedded
    one reports only configs that were set; missing rights) passes.

    Example::

        check_record_limits(admin, TopicNames("demo"), settings.write_limit)
    """
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    resources = [ConfigResource("topic", name) for name in names.all()]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout)
    except Exception:  # an older or restricted broker: nothing to check
        return
    for resource, future in futures.items():
        try:
            entry = future.result().get("max.message.bytes")
        except Exception:  # no DescribeConfigs right on this topic
            continue
        limit = int(entry.value) if entry is not None and entry.value else None
        if limit is not None and limit < need:
            raise TopicError(
                f"topic {resource.name} has max.message.bytes={limit}, below the {need} bytes a "
                f"worker may write (max_record_bytes + 64 KiB): raise it (kafka-configs --alter "
                f"--entity-type topics --entity-name {resource.name} --add-config "
                f"max.message.bytes={need}) or lower max_record_bytes to {limit - 65_536}")
