"""Checks made before talking to Kafka: the broker answers, the app's topics exist.

Left to itself librdkafka retries an unreachable broker quietly until some later timeout
(15-30 s, then an error that names no address), and a consumer of a topic that is not
there waits for nothing. These checks fail within ``connect_timeout_ms`` instead, with a
message that names the address and what to check; a command fails at once (after
:data:`REFUSED_GRACE_S`) when every bootstrap server refuses the connection, while a
runner (:func:`prepare_app`) waits the whole timeout for a broker that is starting, and
says that it waits. Example::

    meta = check_broker(settings)                            # BrokerUnreachableError
    counts = require_topics(settings, [names.events], meta)  # AppMissingError
    partition = partition_for(session_id, counts[names.events])
    membership, signer = prepare_app(settings)               # before a runner starts
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from eddies.connectors.runtime.client import ALL_BROKERS_DOWN, TRANSPORT
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.settings import ConfigError, Settings
from eddies.connectors.runtime.signing import ResultKeyError, ResultSigner
from eddies.connectors.runtime.topics import TopicNames, check_record_limits, ensure_topics

log = logging.getLogger("eddies.worker")

#: How long a command lets every bootstrap server refuse the connection before it gives
#: up, instead of waiting out ``connect_timeout_ms`` for an answer that a refusal already
#: gives (nothing listens there). Not zero: a broker started a moment before may not listen
#: yet (the embedded one listens ~20 ms after its process starts, well within this).
REFUSED_GRACE_S = 0.5
#: The wait for the broker goes in slices this long: between them the client's error
#: callbacks say whether it was refused, and a Ctrl-C is served (Python runs a signal
#: handler only between the client's calls, not during one).
PROBE_SLICE_S = 0.1
#: "Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
_REFUSED = "Connection refused"


class PreflightError(Exception):
    """A command cannot run against the configured broker; the message says what to check."""


class BrokerUnreachableError(PreflightError):
    """The broker did not answer a metadata request within ``connect_timeout_ms``."""


class AppMissingError(PreflightError, LookupError):
    """A topic the command needs does not exist (a LookupError, as a reader's missing
    topic always was)."""


def check_broker(settings: Settings, *, wait_refused: bool = False,
                 waiting: Callable[[str], None] | None = None) -> Any:
    """The cluster's metadata (``ClusterMetadata``: ``.topics``, ``.cluster_id``), or
    :class:`BrokerUnreachableError` after ``settings.connect_timeout_ms``, or after
    :data:`REFUSED_GRACE_S` if every bootstrap server refuses the connection (unless
    ``wait_refused``: a runner waits for a broker that is starting); ConfigError if the
    client refuses the ``[kafka]`` settings. ``waiting`` is told once, when the broker
    has not answered within :data:`REFUSED_GRACE_S`, that the wait goes on.

    Example::

        check_broker(settings).cluster_id
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    address = settings.bootstrap_servers
    if not address:
        raise ConfigError("bootstrap_servers: empty (set it, EDDIES_BOOTSTRAP_SERVERS or -b)")
    seen: list[Any] = []
    try:
        admin = AdminClient(settings.client_config(error_cb=seen.append))
    except KafkaException as err:
        raise ConfigError(f"the Kafka client refuses the settings: {error_text(err)} (check the "
                          "[kafka] table and EDDIES_KAFKA_* variables)") from None
    timeout = settings.connect_timeout_ms / 1000
    start = time.monotonic()
    deadline = start + timeout
    said = waiting is None
    while True:
        try:
            return admin.list_topics(timeout=max(0.0, min(PROBE_SLICE_S, deadline - time.monotonic())))
        except KafkaException as err:
            last = err
        admin.poll(0)  # serves the error callbacks: why it failed (refused, TLS, SASL, ...)
        now = time.monotonic()
        if now >= deadline:
            break
        if now - start < REFUSED_GRACE_S:
            continue
        if not wait_refused and _all_refused(seen):
            raise _unreachable(f"cannot reach the Kafka broker at {address}: "
                               f"{_cause(seen, last)} (still refused after {now - start:.1f} s)")
        if not said:
            said = True
            assert waiting is not None
            waiting(f"waiting for the broker at {address} "
                    f"(connect_timeout_ms={settings.connect_timeout_ms})...")
    raise _unreachable(f"cannot reach the Kafka broker at {address} within {timeout:g} s: "
                       f"{_cause(seen, last)}")


def _all_refused(seen: list[Any]) -> bool:
    """Whether the client found every broker down and each connection it tried refused
    (an unresolved name, a TLS or SASL failure or a timeout is not a refusal: it may be
    slow to clear, or the broker may be there)."""
    transport = [e for e in seen if e.code() == TRANSPORT]
    return (any(e.code() == ALL_BROKERS_DOWN for e in seen) and bool(transport)
            and all(_REFUSED in e.str() for e in transport))


def _cause(seen: list[Any], err: BaseException) -> str:
    """Why the client could not reach the broker: its last error callback's reason (the
    exception itself only says "transport failure"), without the broker's name."""
    cause = next((e.str() for e in reversed(seen) if e.code() != ALL_BROKERS_DOWN),
                 error_text(err))
    return re.sub(r"^\S+/\S+: ", "", cause)  # "host:port/bootstrap: ": named by the caller


def _unreachable(what: str) -> BrokerUnreachableError:
    return BrokerUnreachableError(
        f"{what}\n"
        "check the address (bootstrap_servers, EDDIES_BOOTSTRAP_SERVERS or -b), that the "
        "broker is running and advertises listeners reachable from here, and the security "
        "settings in [kafka]")


def app_topics(settings: Settings, metadata: Any = None) -> dict[str, int | None]:
    """Partition count of each topic of ``settings.app`` (None: missing);
    :class:`AppMissingError` if none of them exists. ``metadata``: from
    :func:`check_broker` (asked for when None).

    Example::

        app_topics(settings)   # {"demo.input": 4, "demo.events": 4, ...}
    """
    meta = check_broker(settings) if metadata is None else metadata
    present = _present(meta)
    counts = {n: present.get(n) for n in TopicNames(settings.app).all()}
    if all(c is None for c in counts.values()):
        raise AppMissingError(_no_app(settings))
    return counts


def require_topics(settings: Settings, topics: Iterable[str], metadata: Any = None) -> dict[str, int]:
    """Partition count of each of ``topics``; :class:`AppMissingError` naming what to run
    if one is missing. ``metadata``: from :func:`check_broker` (asked for when None).

    Example::

        require_topics(settings, [TopicNames(settings.app).events])  # {"demo.events": 8}
    """
    wanted = list(topics)
    if not wanted:
        return {}
    meta = check_broker(settings) if metadata is None else metadata
    present = _present(meta)
    missing = [n for n in wanted if n not in present]
    if missing:
        if not any(n in present for n in TopicNames(settings.app).all()):
            raise AppMissingError(_no_app(settings))
        raise AppMissingError(
            f"topic {', '.join(missing)} does not exist on {settings.bootstrap_servers} "
            f"(run `eddies topics create --app {settings.app}`)")
    return {n: present[n] for n in wanted}


def await_topics(settings: Settings, topics: Iterable[str], wait_s: float,
                 metadata: Any = None, waiting: Callable[[str], None] | None = None) -> dict[str, int]:
    """:func:`require_topics`, waiting up to ``wait_s`` for missing topics to appear: a
    command run right after ``eddies worker ... &`` finds the worker still creating them.
    ``waiting`` is told once, when the wait starts, what it waits for.

    Example::

        await_topics(settings, [TopicNames(settings.app).input], wait_s=10)  # {"demo.input": 4}
    """
    wanted = list(topics)
    deadline = time.monotonic() + wait_s
    meta = check_broker(settings) if metadata is None else metadata
    missing = [n for n in wanted if n not in _present(meta)]
    if missing and wait_s > 0 and waiting is not None:
        waiting(f"waiting for topic{'s' if len(missing) > 1 else ''} {', '.join(missing)}... "
                f"(up to {wait_s:g} s): is a worker starting?")
    while any(n not in _present(meta) for n in wanted) and time.monotonic() < deadline:
        time.sleep(0.25)
        meta = check_broker(settings)
    try:
        return require_topics(settings, wanted, meta)
    except AppMissingError as err:
        if wait_s <= 0:
            raise
        raise AppMissingError(f"{err} (waited {wait_s:g} s for a worker that is starting)") from None


def _present(metadata: Any) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def _no_app(settings: Settings) -> str:
    return (f"app {settings.app} has no topics on {settings.bootstrap_servers} (start a worker "
            f"with --app {settings.app} or run `eddies topics create --app {settings.app}`)")


def error_text(err: BaseException) -> str:
    """The text of a KafkaException's KafkaError, without its code and braces (``str``
    of any other exception).

    Example::

        error_text(KafkaException(KafkaError(TRANSPORT, "refused")))  # "refused"
    """
    kerr = err.args[0] if err.args else None
    text = getattr(kerr, "str", None)
    return str(text()) if callable(text) else str(err)


def prepare_app(settings: Settings, waiting: Callable[[str], None] | None = None
                ) -> tuple[Membership, ResultSigner]:
    """What a runner (the worker, the Flink job) needs before it starts: a broker that
    answers (within ``connect_timeout_ms``, naming its address, not a bare transport error
    from topic creation 15 s later), the app's topics, created when missing and taking the
    records it writes, how to join groups there, and the key call results are signed with
    (the public development key only on the embedded broker: ConfigError elsewhere).

    A refused connection is waited out too (a runner is often started beside its broker,
    which may not listen yet); ``waiting`` (default: a warning in the log) is told so."""
    from confluent_kafka.admin import AdminClient

    cluster = check_broker(settings, wait_refused=True,
                           waiting=log.warning if waiting is None else waiting).cluster_id
    admin = AdminClient(settings.client_config())
    names = TopicNames(settings.app)
    ensure_topics(admin, names, settings.partitions, settings.replication,
                  max_message_bytes=settings.write_limit)
    check_record_limits(admin, names, settings.write_limit)
    membership = Membership.for_broker(settings, cluster)
    try:
        signer = ResultSigner.from_env(settings.result_key_env, allow_dev_key=membership.embedded)
    except ResultKeyError as err:
        raise ConfigError(str(err)) from None
    return membership, signer


def producer_identity_signer(settings: Settings) -> ResultSigner:
    """The signer a producer vouches for an input's identity with (``eddies send --user``,
    ``eddies serve``): the identity key's (``identity_key_env``), or the development key
    on the embedded broker; ConfigError naming the setting without either, since an
    identity the workers cannot check would be cleared, the input sent anonymous."""
    from eddies.connectors.runtime.membership import TANSU_CLUSTER_ID
    from eddies.connectors.runtime.signing import identity_signer

    try:
        signer = identity_signer(settings.identity_key_env, allow_dev_key=False)
        if signer is None and check_broker(settings).cluster_id == TANSU_CLUSTER_ID:
            signer = identity_signer(settings.identity_key_env, allow_dev_key=True)
    except ResultKeyError as err:
        raise ConfigError(str(err)) from None
    if signer is None:
        raise ConfigError(
            f"identity_key_env: environment variable {settings.identity_key_env} is not set. An "
            "input's identity counts only when it is signed with the key the workers check it "
            "against; set the same secret there and on the workers (`openssl rand -hex 32`), or "
            "send the input without an identity")
    return signer

