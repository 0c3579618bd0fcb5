"""An evaluation's own app, served by ordinary workers (``eddies eval --on-workers``), and
the rules by which they answer its calls: from the evaluated app's recording where the
same call was made, live for models and reads and what the evaluation allows, refused for
the rest (:class:`~eddies.connectors.evaluation.policy.CallPolicy`).

The rules belong to the app, not to a worker's flags: they are the one record of
``APP.call-rules``, which the evaluation makes before any other topic of the app and
before the first input, and every worker reads after making or finding the app's topics
(:func:`read_call_rules`). Either a worker finds the app's topics made by the evaluation,
and with them its rules; or it made them itself, before the evaluation looked, and the
evaluation refuses that app. So no worker serves an evaluation's input without its rules,
and a side effect is never made again because a worker started at the wrong moment.
Example::

    rules = CallRules("brief", source_app="travel", from_time_ms=0, sessions=("ana", "bo"))
    create_evaluation_app(dataclasses.replace(settings, app="travel-eval-brief"), rules)
    # eddies worker --app travel-eval-brief --agent brief.yaml, as many as wanted
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from eddies.connectors.evaluation.policy import CallPolicy
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.runtime.settings import ConfigError, Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan


@dataclass(frozen=True)
class CallRules:
    """How the workers of evaluation app ``evaluation`` (a candidate's) answer calls: from
    the recording of ``source_app``'s inputs from ``from_offsets`` or ``from_time_ms``, of
    ``sessions`` (None source: cases from a file, no recording), by ``allow`` and
    ``live_models`` as :class:`CallPolicy` says."""

    evaluation: str
    source_app: str | None = None
    from_offsets: dict[int, int] | None = None
    from_time_ms: int | None = None
    sessions: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    live_models: bool = False

    @property
    def policy(self) -> CallPolicy:
        """Which calls no recording answers are made live."""
        return CallPolicy(frozenset(self.allow), live_models=self.live_models)

    def calls(self, settings: Settings, plan: AgentPlan) -> RecordedCalls:
        """The answers a worker of the app (``settings``, its agent ``plan``) gives: the
        source's recording read now, from the same brokers."""
        from eddies.connectors.inspect.recording import read_recording

        if self.source_app is None:
            return self.policy.calls(plan)
        only = set(self.sessions)
        return self.policy.calls(plan, read_recording(
            dataclasses.replace(settings, app=self.source_app), from_offsets=self.from_offsets,
            from_time_ms=self.from_time_ms, sessions=lambda sid: sid in only))

    def to_json(self) -> bytes:
        """The record's value."""
        data = dataclasses.asdict(self)
        data["sessions"], data["allow"] = list(self.sessions), list(self.allow)
        return json.dumps(data).encode()

    @classmethod
    def from_json(cls, value: bytes) -> CallRules:
        """Rules from a record's value; ValueError if it holds none."""
        try:
            data = json.loads(value)
            offsets = data.get("from_offsets")
            return cls(str(data["evaluation"]), data.get("source_app"),
                       None if offsets is None else {int(p): int(o) for p, o in offsets.items()},
                       data.get("from_time_ms"), tuple(data.get("sessions") or ()),
                       tuple(data.get("allow") or ()), bool(data.get("live_models")))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not call rules: {err}") from None


class AppInUse(ValueError):
    """The app an evaluation would write to has topics already."""


def create_evaluation_app(target: Settings, rules: CallRules) -> None:
    """Make ``target.app`` an evaluation app with ``rules``: its rules topic first (an app
    that has one, or any of the seven topics, is refused: AppInUse), its rules, then its
    topics."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.client import producer
    from eddies.connectors.runtime.sink import produce
    from eddies.connectors.runtime.topics import ensure_topic, ensure_topics

    admin = AdminClient(target.client_config())
    names = TopicNames(target.app)
    topic = names.call_rules
    if not ensure_topic(admin, topic, replication=target.replication):
        raise AppInUse(f"app {target.app} is an evaluation's already ({topic} exists): write to "
                       "another one (--to-app)")
    existing = admin.list_topics(timeout=15).topics
    used = [n for n in names.all() if n in existing]
    if used:  # a worker made them before this evaluation's rules existed: not safe
        for done in admin.delete_topics([topic]).values():
            done.result()
        raise AppInUse(f"app {target.app} has topics already ({', '.join(used)}): an evaluation "
                       "writes to an app of its own (--to-app)")
    prod = producer(target)
    produce(prod, topic, rules.to_json(), rules.evaluation.encode())
    if prod.flush(30):
        raise TimeoutError(f"the call rules were not delivered to {target.bootstrap_servers}")
    ensure_topics(admin, names, target.partitions, target.replication,
                  max_message_bytes=target.write_limit)


def read_call_rules(settings: Settings, wait_s: float = 30.0) -> CallRules | None:
    """The call rules of ``settings.app`` (None: it is no evaluation's app). Called once
    its topics exist: an app whose rules topic exists waits up to ``wait_s`` for its
    record (the evaluation writes it at once); ConfigError if none comes or it is not
    rules, so such a worker does not start."""
    from confluent_kafka.admin import AdminClient

    from eddies.connectors.runtime.client import read_records

    topic = TopicNames(settings.app).call_rules
    meta = AdminClient(settings.client_config()).list_topics(
        timeout=settings.connect_timeout_ms / 1000).topics.get(topic)
    if meta is None or meta.error is not None:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        found: Any = None
        for msg in read_records(settings, topic):
            found = msg.value()
        if found is not None:
            try:
                return CallRules.from_json(found)
            except ValueError as err:
                raise ConfigError(f"app {settings.app}: {topic} holds no call rules ({err})") from None
        if time.monotonic() >= deadline:
            raise ConfigError(f"app {settings.app}: {topic} exists but holds no call rules after "
                              f"{wait_s:.0f} s: an evaluation that did not finish making its app?")
        time.sleep(0.2)


__all__ = ["AppInUse", "CallRules", "create_evaluation_app", "read_call_rules"]
