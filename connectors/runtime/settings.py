"""Worker settings from one file, the environment and flags (later ones win).

File (TOML)::

    [eddies]
    app = "support"
    agent = "my_pkg.agents:support_agent"   # an Agent, or a function returning one
    bootstrap_servers = "pkc-xxx.confluent.cloud:9092"
    partitions = 12

    [kafka]                                   # any librdkafka setting, passed through
    "security.protocol" = "SASL_SSL"
    "sasl.mechanisms" = "PLAIN"

Environment: ``EDDIES_APP``, ``EDDIES_BOOTSTRAP_SERVERS``, ... for ``[eddies]`` keys and
``EDDIES_KAFKA_SASL_USERNAME`` -> ``sasl.username`` for ``[kafka]``. An unknown key is an
error that names it.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eddies.engine.options import did_you_mean

#: What a worker's records may hold beyond ``max_record_bytes``: the envelope the engine
#: wraps an accepted input in, and headers.
WRITE_HEADROOM = 65_536


class ConfigError(ValueError):
    """Invalid configuration; the message names the key."""


#: The agent of a worker, replay or fork not told which: the demo's calculator.
DEFAULT_AGENT = "eddies.demo:calculator_agent"


@dataclass
class Settings:
    """Everything a worker needs; see the module docstring for where values come from."""

    app: str = "eddies"
    agent: str = DEFAULT_AGENT
    bootstrap_servers: str = ""  # empty: start the embedded broker
    partitions: int = 4
    replication: int = 1
    role: str = "all"  # all | orchestrator | executor
    exactly_once: bool = False
    # The worker slot: transactional ids, static group membership, and whose started marks
    # are a dead process's. Unique among running workers; reused by a restarted one.
    instance_id: str = ""
    static_membership: str = "auto"  # auto | true | false (see connectors/runtime/membership.py)
    executor_concurrency: int = 8
    max_calls_in_flight: int = 4096  # calls with asynchronous clients, per executor
    max_record_bytes: int = 1_048_576
    fetch_wait_ms: int = 10
    linger_ms: int = 5
    batch_size: int = 500
    commit_interval_ms: int = 100
    snapshot_delay_ms: int = 5000
    journal_retention_ms: int = 24 * 3600 * 1000
    session_ttl_ms: int = 7 * 24 * 3600 * 1000
    session_timeout_ms: int = 0  # 0: 6000, or 1500 on the embedded broker (membership.py)
    outcome_wait_ms: int = 60_000  # a call another worker started: wait this long for its outcome
    # How long a command or a starting worker waits for the broker before it gives up.
    connect_timeout_ms: int = 10_000
    # The NAME of the environment variable holding the key that executors sign call results
    # with and orchestrators check them against (see results_auth.py); never the key itself.
    result_key_env: str = "EDDIES_RESULT_KEY"
    # The NAME of the environment variable holding the key an input's identity is signed
    # with (eddies serve, eddies send --user) and checked against at admission (signing.py).
    # Unset (off the embedded broker): every identity is cleared, each input anonymous.
    identity_key_env: str = "EDDIES_IDENTITY_KEY"
    # The NAME of the environment variable holding the bearer tokens of ``eddies serve``
    # (comma-separated, each TOKEN or TOKEN=SESSION_PREFIX; connectors/gateway/tokens.py).
    # Unset or empty: the door takes no token and listens on this machine only.
    serve_tokens_env: str = "EDDIES_SERVE_TOKENS"
    # Prometheus metrics (connectors/observability/prometheus.py, the ``metrics`` extra): -1 serves none,
    # 0 any free port (the worker logs which), else that port, on ``metrics_host``.
    metrics_port: int = -1
    metrics_host: str = "0.0.0.0"
    log_format: str = "text"  # text | json: one JSON object per line (connectors/runtime/json_logs.py)
    # OpenTelemetry export of every run's spans over OTLP/HTTP (connectors/observability/otel_export.py,
    # the ``otel`` extra): a URL (a base one gets /v1/traces); empty: the standard
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT if set, else none;
    # "off": none, whatever those say.
    otel_endpoint: str = ""
    # The Flink runner (``eddies flink run``; connectors/flink/options.py says what each does).
    flink_parallelism: int = 1
    flink_checkpoint_interval_ms: int = 10_000
    flink_checkpoint_dir: str = ""  # empty: .eddies/flink/APP/checkpoints under the working directory
    flink_state_backend: str = "hashmap"  # hashmap | rocksdb
    flink_jars: str = ""  # empty: share/eddies/flink in the Python environment
    flink_bundle_time_ms: int = 5
    flink_buffer_timeout_ms: int = 5
    # The job's KafkaSink (Java producer) linger.ms: it is handed one input's records at a
    # time, so it sends one request per linger interval (see docs/operations/flink.md).
    flink_linger_ms: int = 20
    flink_rest_port: int = 8081
    kafka: dict[str, str] = field(default_factory=dict)

    def validate(self) -> Settings:
        """Check values; raises ConfigError naming the key."""
        if not self.app or any(c in self.app for c in " /\\"):
            raise ConfigError(f"app: {self.app!r} is not a usable application id")
        if self.role not in ("all", "orchestrator", "executor"):
            raise ConfigError(f"role: {self.role!r} is not one of all, orchestrator, executor")
        for key in ("partitions", "replication", "executor_concurrency", "max_calls_in_flight",
                    "max_record_bytes", "batch_size", "commit_interval_ms",
                    "journal_retention_ms", "session_ttl_ms", "outcome_wait_ms",
                    "connect_timeout_ms"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key}: must be positive, got {getattr(self, key)}")
        for key in ("fetch_wait_ms", "linger_ms", "snapshot_delay_ms", "session_timeout_ms"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}: must not be negative, got {getattr(self, key)}")
        if self.static_membership not in ("auto", "true", "false"):
            raise ConfigError(f"static_membership: {self.static_membership!r} is not one of auto, "
                              "true, false")
        if self.static_membership == "true" and not self.instance_id:
            raise ConfigError("static_membership: true needs instance_id (a name unique to this "
                              "worker slot, reused when it restarts)")
        for key in ("result_key_env", "identity_key_env", "serve_tokens_env"):
            name = getattr(self, key)
            if not name or not name.replace("_", "").isalnum():
                raise ConfigError(f"{key}: {name!r} is not an environment variable name (it "
                                  "names the variable holding the secret, not the secret)")
        for key in ("flink_parallelism", "flink_checkpoint_interval_ms", "flink_rest_port"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key}: must be positive, got {getattr(self, key)}")
        for key in ("flink_bundle_time_ms", "flink_buffer_timeout_ms", "flink_linger_ms"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}: must not be negative, got {getattr(self, key)}")
        if not -1 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics_port: {self.metrics_port} is not a port (0-65535; 0: any "
                              "free one, -1: no metrics)")
        if self.metrics_port >= 0 and not self.metrics_host:
            raise ConfigError("metrics_host: empty; give the address to serve metrics on "
                              "(0.0.0.0: every interface)")
        if self.otel_endpoint not in ("", "off") and not self.otel_endpoint.startswith(
                ("http://", "https://")):
            raise ConfigError(f"otel_endpoint: {self.otel_endpoint!r} is not an http:// or "
                              "https:// URL (empty: the OTEL_EXPORTER_OTLP_* variables; off: none)")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"log_format: {self.log_format!r} is not one of text, json")
        if self.flink_state_backend not in ("hashmap", "rocksdb"):
            raise ConfigError(f"flink_state_backend: {self.flink_state_backend!r} is not one of "
                              "hashmap, rocksdb")
        if ":" not in self.agent and not self.agent.partition("#")[0].endswith((".yaml", ".yml", ".sql")):
            raise ConfigError(f"agent: {self.agent!r} is not 'module:attribute' nor a .yaml or .sql file")
        return self

    @property
    def write_limit(self) -> int:
        """The largest record a worker writes (its producers' ``message.max.bytes``, and
        created topics' ``max.message.bytes``): an accepted input of ``max_record_bytes``
        in its envelope, with room for headers."""
        return self.max_record_bytes + WRITE_HEADROOM

    @property
    def max_memory_bytes(self) -> int:
        """The most a session's short-term memory may hold on Kafka (a session's snapshot
        is one record: half of it), when the agent's own ``max_memory_bytes`` is larger."""
        return self.max_record_bytes // 2

    @property
    def slot(self) -> str:
        """This worker's slot: ``instance_id``, or the host name and process id (unique
        among running processes; a restarted one is another slot)."""
        if self.instance_id:
            return self.instance_id
        import os
        import socket

        return f"{socket.gethostname()}-{os.getpid()}"

    @property
    def transactional_slot(self) -> str:
        """The slot in transactional ids: ``instance_id``, or the host name (stable across
        restarts, which the embedded broker needs to end a dead producer's transaction)."""
        if self.instance_id:
            return self.instance_id
        import socket

        return socket.gethostname()

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings: bootstrap, the pass-through ``kafka`` table, then ``extra``."""
        import logging

        # librdkafka prints connection churn to stderr; send it to Python logging instead.
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers,
                                "logger": logging.getLogger("eddies.kafka.client")}
        conf.update(self.kafka)
        conf.update(extra)
        return conf


_FIELDS = {f.name: f for f in dataclasses.fields(Settings) if f.name != "kafka"}


def _coerce(key: str, value: Any, kind: Any) -> Any:
    kind_name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    try:
        if kind_name == "int":
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if kind_name == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        return str(value)
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not a valid {kind_name}") from None


def load_settings(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Settings from ``path`` (TOML), then ``env`` (default os.environ), then ``overrides``."""
    values: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"config file {p}: {err}") from None
        for section in data:
            if section not in ("eddies", "kafka"):
                raise ConfigError(f"config file {p}: unknown section [{section}]")
        for key, value in data.get("eddies", {}).items():
            if key not in _FIELDS:
                raise ConfigError(f"config file {p}: unknown key eddies.{key}"
                                  f"{did_you_mean(key, _FIELDS, 'eddies.{}')}")
            values[key] = value
        kafka.update({k: str(v) for k, v in data.get("kafka", {}).items()})
    environ = os.environ if env is None else env
    unknown: list[str] = []
    for name, value in environ.items():
        if not name.startswith("EDDIES_"):
            continue
        rest = name[len("EDDIES_"):]
        if rest.startswith("KAFKA_"):
            kafka[rest[len("KAFKA_"):].lower().replace("_", ".")] = value
        elif rest.lower() in _FIELDS:
            values[rest.lower()] = value
        elif rest in ("CONFIG", "LOG_LEVEL"):
            continue
        else:
            unknown.append(name)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in _FIELDS:
            raise ConfigError(f"unknown setting {key!r}{did_you_mean(key, _FIELDS)}")
        values[key] = value
    settings = Settings(kafka=kafka)
    for key, value in values.items():
        setattr(settings, key, _coerce(key, value, _FIELDS[key].type))
    for name in unknown:  # the variables holding the result key and the door's tokens are
        # no settings, but expected
        if name not in (settings.result_key_env, settings.identity_key_env, settings.serve_tokens_env):
            key = name[len("EDDIES_"):].lower()
            known = [f"EDDIES_{field.upper()}" for field in _FIELDS]
            raise ConfigError(f"environment variable {name}: unknown setting {key!r}"
                              f"{did_you_mean(name, known, '{}')}")
    return settings.validate()


def load_agent(spec: str) -> Any:
    """The Agent named by ``module:attribute`` (an Agent, or a callable returning one), or
    declared in a YAML or SQL file: ``agents.yaml`` (its only agent) or ``agents.sql#name``."""
    import importlib

    from eddies.engine import Agent

    path, _, name = spec.partition("#")
    if path.endswith((".yaml", ".yml", ".sql")):
        from eddies.connectors.declarative import load_definition
        from eddies.connectors.declarative.located import DefinitionError

        try:
            return load_definition(path, name or None)
        except DefinitionError as err:
            raise ConfigError(f"agent: {err}") from None
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        import os

        raise ConfigError(f"agent: cannot import module {module_name!r}: {err} (modules are "
                          f"found in the current folder, {os.getcwd()}, the installed packages "
                          "and PYTHONPATH)") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(f"agent: module {module_name!r} has no attribute {attr!r}")
    if not isinstance(obj, Agent) and callable(obj):
        try:
            obj = obj()
        except TypeError as err:
            raise ConfigError(f"agent: {spec} is neither an Agent nor a function returning one "
                              f"({err})") from None
    if not isinstance(obj, Agent):
        raise ConfigError(f"agent: {spec} is not an Agent (got {type(obj).__name__})")
    return obj
