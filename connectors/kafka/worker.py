"""The Kafka worker: an orchestrator that drives the session machine
(:mod:`.orchestrator`) and an executor that performs durable calls (:mod:`.executor`),
in one process by default (``role``: all, orchestrator, executor). Scale out by starting
more workers with the same ``app``: partitions move between them incrementally
(:mod:`.membership`), and a call is started only by its partition's owner after a claim
in the journal (:mod:`.claims`), so a rebalance never repeats a side effect. With
``metrics_port`` set it serves Prometheus metrics (:mod:`eddies.connectors.observability.prometheus`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eddies.connectors.execution.call_loop import size_pools
from eddies.connectors.execution.provider_gates import unenforced
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.connectors.execution.warming import every_resource, warm
from eddies.connectors.journal.claims import Claimant
from eddies.connectors.kafka.executor import KafkaExecutor
from eddies.connectors.kafka.orchestrator import Orchestrator
from eddies.connectors.kafka.roles import Clients, KafkaClients, RoleContext
from eddies.connectors.kafka.stalls import StallWatch
from eddies.connectors.remote.discovery import discover_tools
from eddies.connectors.runtime.counters import Counters
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.settings import ConfigError, Settings, load_agent
from eddies.connectors.runtime.signing import ResultSigner
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import Agent, AgentPlan
from eddies.events import codec

if TYPE_CHECKING:
    from eddies.connectors.observability.prometheus import WorkerMetrics

__all__ = ["Counters", "KafkaExecutor", "Orchestrator", "Worker"]

log = logging.getLogger("eddies.worker")


class Worker:
    """Runs the roles of ``settings.role`` in threads until :meth:`stop`.

    Example::

        worker = Worker(load_settings(overrides={"bootstrap_servers": "localhost:9092"}))
        worker.start()
        ...
        worker.stop()
    """

    def __init__(self, settings: Settings, agent: Agent | AgentPlan | None = None) -> None:
        self.settings = settings.validate()
        if agent is None:
            agent = load_agent(settings.agent)
        if not isinstance(agent, AgentPlan):
            discover_tools(agent)  # MCP and A2A tools' specs come from their servers
        self.plan = agent if isinstance(agent, AgentPlan) else AgentPlan.compile(agent)
        self.names = TopicNames(settings.app)
        self.counters = Counters()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.orchestrator: Orchestrator | None = None
        self.executor: KafkaExecutor | None = None
        #: This process's incarnation: started marks name it (see claims.py).
        self.incarnation = uuid.uuid4().hex[:12]
        self.membership = Membership.for_broker(settings, None)  # until start() asks the broker
        #: Notices this process standing still or cut off from the brokers (both roles ask
        #: it before they write; its threshold is set by start(), from the group's timeout).
        self.stalls = StallWatch(stall_threshold_s(self.membership))
        #: Signs call results (executors) and checks them (orchestrators); set by start().
        self.signer: ResultSigner | None = None
        #: Prometheus metrics (with ``metrics_port``), served from start() until stop().
        self.metrics: WorkerMetrics | None = (
            _worker_metrics(settings.app, self.counters) if settings.metrics_port >= 0 else None)
        #: Where the metrics are served (host, port), once started.
        self.metrics_address: tuple[str, int] | None = None

    def start(self, waiting: Callable[[str], None] | None = None) -> Worker:
        """Create missing topics, then start the role threads. A broker that does not
        answer yet is waited for (up to ``connect_timeout_ms``), and ``waiting`` (default:
        a warning in the log) told so."""
        from eddies.connectors.runtime.preflight import prepare_app

        self.membership, self.signer = prepare_app(self.settings, waiting)
        self.stalls.threshold_s = stall_threshold_s(self.membership)
        self.stalls.start()
        if self.metrics is not None:  # before the roles: a restore can be watched
            host, port = self.metrics.serve(self.settings.metrics_port, self.settings.metrics_host)
            self.metrics_address = (host, port)
            log.info("serving metrics at http://%s:%d/metrics", host, port)
        if self.signer.dev:
            log.info("call results are signed with the development key (no %s set; embedded "
                     "broker only)", self.settings.result_key_env)
        role = self.settings.role
        self._warm(executes=role in ("all", "executor"))
        recorded = self._evaluation_calls() if role in ("all", "executor") else None
        log.info("worker %s/%s joining the groups of app %s (role %s, session timeout %d ms, "
                 "static membership %s)", self.settings.slot, self.incarnation, self.settings.app,
                 role, self.membership.session_timeout_ms, "on" if self.membership.static else "off")
        ctx = self.role_context()
        if role in ("all", "orchestrator"):
            self.orchestrator = Orchestrator(ctx)
        if role in ("all", "executor"):
            resolver = self.orchestrator.machine.callable_for if self.orchestrator else None
            # With both roles in one process the orchestrator hands its requests to its own
            # executor in memory: no round trip through APP.requests (which stays the work
            # queue of separate executor processes).
            # It starts no call after a stall until its orchestrator has confirmed that the
            # partitions are still this process's.
            gate = self.orchestrator.ownership.gate if self.orchestrator else None
            self.executor = KafkaExecutor(ctx, resolver, local=role == "all", gate=gate, recorded=recorded)
        if self.orchestrator is not None:
            self.orchestrator.executor = self.executor
            self._spawn("eddies-orchestrator", self.orchestrator.run)
        if self.executor is not None:
            self._spawn("eddies-executor", self.executor.run)
        return self

    def _warm(self, *, executes: bool) -> None:
        """Before joining: what the first record and the first call would otherwise wait
        for (the codec's compiled reader and writers; with calls to make, the resources'
        ``warm()``, e.g. importing litellm), so the first answer is as fast as the rest."""
        started = time.perf_counter()
        codec.prepare()
        if executes:  # before warming imports litellm, which reads its pool's size then
            if (unheld := unenforced(every_resource(self.plan))) is not None:
                raise ConfigError(unheld)
            size_pools(self.settings.max_calls_in_flight)
        warmed = warm(self.plan) if executes else []
        log.info("warmed in %.0f ms (codec compiled%s)",
                 (time.perf_counter() - started) * 1000,
                 f"; resources warmed: {', '.join(warmed)}" if warmed else "")

    def _evaluation_calls(self) -> RecordedCalls | None:
        """An evaluation's app (``eddies eval --on-workers``): how its calls are answered
        (from the evaluated app's recording, refused, or live), read once its topics exist."""
        from eddies.connectors.evaluation.call_rules import read_call_rules

        rules = read_call_rules(self.settings)
        if rules is None:
            return None
        calls = rules.calls(self.settings, self.plan)
        log.info("app %s is evaluation %s: calls answered from %s, else made live only if "
                 "they cannot be side effects (allowed: %s)", self.settings.app, rules.evaluation,
                 f"the recording of {rules.source_app} ({len(calls.outcomes)} outcomes)"
                 if rules.source_app else "no recording", ", ".join(rules.allow) or "none")
        return calls

    def role_context(self, clients: Clients | None = None) -> RoleContext:
        """What this worker gives its roles (``clients``: default, librdkafka's)."""
        assert self.signer is not None, "start() sets the signer"
        claimant = Claimant(self.settings.slot, self.incarnation)
        return RoleContext(
            settings=self.settings, names=self.names, plan=self.plan, counters=self.counters,
            membership=self.membership, signer=self.signer,
            claimant=claimant,
            clients=clients or KafkaClients(self.settings, self.membership, claimant),
            stalls=self.stalls, metrics=self.metrics, fail=self._fail)

    def _fail(self, err: BaseException) -> None:
        self.errors.append(err)
        self._stop.set()

    def _spawn(self, name: str, target: Any) -> None:
        def guarded() -> None:
            settled = False
            try:
                target(self._stop)
                settled = True
            except BaseException as err:  # surfaced through .errors and wait()
                settled = True
                log.exception("%s stopped with an error", name)
                self.errors.append(err)
                self._stop.set()
            finally:
                if not settled:  # confluent-kafka can raise a KafkaError, which is no
                    # exception class, out of poll(): no except clause catches it
                    self.errors.append(RuntimeError(f"{name} stopped with a client error"))
                    self._stop.set()

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    @property
    def calls_running(self) -> int:
        """The calls this process's executor is performing now (queued ones not counted:
        a stop drops those)."""
        return 0 if self.executor is None else self.executor.running

    def wait_assigned(self, timeout: float = 30.0) -> bool:
        """Wait until every role has joined its group and restored its partitions."""
        parts = [p for p in (self.orchestrator, self.executor) if p is not None]
        return all(p.assigned.wait(timeout) for p in parts)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the roles: calls not started are dropped, running ones get up to 20 s to
        finish, then sessions are snapshotted, offsets committed, producers flushed."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        self.stalls.stop()
        if self.metrics is not None:
            self.metrics.close()

    @property
    def stopped(self) -> bool:
        """Whether the worker was stopped (or a role failed)."""
        return self._stop.is_set()


def stall_threshold_s(membership: Membership) -> float:
    """How long this process may stand still before its roles confirm that they still
    hold their partitions: half the group's session timeout (a pause that long cannot
    have lost them yet; confirming costs one commit)."""
    return membership.session_timeout_ms / 2000


def _worker_metrics(app: str, counters: Counters) -> WorkerMetrics:
    """The metrics of a worker; without prometheus-client, a ConfigError naming the extra."""
    try:
        from eddies.connectors.observability.prometheus import WorkerMetrics
    except ModuleNotFoundError as err:
        if err.name != "prometheus_client":
            raise
        raise ConfigError("metrics_port: serving metrics needs the prometheus-client package: "
                          "pip install 'eddies[metrics]'") from None
    return WorkerMetrics(app, counters)
