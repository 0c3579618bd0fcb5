"""Python cost per session of the Kafka worker's hot path, without a broker.

Run: ``.venv/bin/python bench/worker_cpu.py`` (``--profile`` for a cProfile listing).

It drives the real Orchestrator and (local) KafkaExecutor of ``eddies worker`` through
one-turn sessions of the scripted model: decode, session machine, durable call, encode,
snapshots and commits, with librdkafka's producer and consumer replaced by in-memory
stand-ins, so it measures only our Python. Use it to compare commits quickly; the
throughput target lives in ``bench/kafka.py``. Wall time on these shared machines moves by
+-5% from run to run; instruction counts do not. For those, run the script twice under
callgrind and take the difference per session::

    valgrind --tool=callgrind .venv/bin/python bench/worker_cpu.py --sessions 300 --rounds 1
    valgrind --tool=callgrind .venv/bin/python bench/worker_cpu.py --sessions 1300 --rounds 1
    # (Collected of the second - Collected of the first) / 1000 = instructions per session
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from collections.abc import Mapping, Sequence
from typing import Any

from eddies.connectors.kafka import worker as kafka_worker
from eddies.connectors.kafka.memory_broker import MemoryBroker
from eddies.connectors.kafka.memory_broker import MemoryProducer as broker_producer
from eddies.connectors.runtime.client import input_event
from eddies.connectors.runtime.outbox import DeliveryErrors
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import load_settings
from eddies.connectors.runtime.signing import DEV_KEY, ResultSigner
from eddies.demo import one_turn_agent
from eddies.events import encode, partition_for

BATCH = 250  # records per consumer batch, then the executor's results, then a commit


class Record:
    """What the worker reads of a confluent-kafka Message."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_topic", "_value")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes,
                 headers: list[tuple[str, bytes]] = HEADERS) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000)


class MemoryProducer:
    """Keeps produced records in a list (an outbox without a broker)."""

    transactional = False
    delivery = DeliveryErrors("bench producer")

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, Any]] = []

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                headers: Any = None, **_: Any) -> None:
        self.records.append((topic, key, value, headers))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def commit(self, consumer: Any, offsets: Any = None, sync: bool = False) -> None:
        pass


class Clients:
    """The roles' clients: in-memory producers, no consumer in use, epoch markers kept."""

    def __init__(self, settings: Any) -> None:
        self.out, self.results = MemoryProducer(), MemoryProducer()
        self.broker = MemoryBroker()
        self.broker.create(f"{settings.app}.journal", settings.partitions)

    def group_consumer(self, role: str) -> Any:
        return None

    def outbox(self, role: str, successes: bool = False) -> Any:
        return self.out if role == "orchestrator" else self.results

    def marks_producer(self) -> Any:
        return broker_producer(self.broker)

    def stream_producer(self) -> Any:
        return broker_producer(self.broker)

    def read_journal(self, partitions: set[int]) -> Any:
        raise NotImplementedError

    def group_members(self) -> None:
        return None


class WorkerPath:
    """An orchestrator and its local executor wired to in-memory stand-ins."""

    def __init__(self) -> None:
        settings = load_settings(env={}, overrides={
            "bootstrap_servers": "127.0.0.1:9", "app": "cpu", "agent": "eddies.demo:one_turn_agent"})
        worker = kafka_worker.Worker(settings, one_turn_agent())
        worker.signer = ResultSigner([DEV_KEY])  # as start() would on the embedded broker
        self.clients = clients = Clients(settings)
        ctx = worker.role_context(clients)  # type: ignore[arg-type]
        self.orchestrator = orch = kafka_worker.Orchestrator(ctx)
        self.executor = ex = kafka_worker.KafkaExecutor(ctx, orch.machine.callable_for, local=True,
                                                      gate=orch.ownership.gate)
        orch.executor = ex
        self.requests: list[Any] = []
        ex.submit = self.requests.append  # type: ignore[method-assign,assignment]  # performed inline below
        self.out, self.results = clients.out, clients.results
        self.partitions = settings.partitions
        orch.ownership.claim(set(range(settings.partitions)))
        ex.owned = set(range(settings.partitions))  # its calls may run here
        self.offset = 0
        self.topic = worker.names.input

    def sessions(self, first: int, n: int, prompts: Sequence[bytes] | Mapping[int, bytes]) -> None:
        """Run sessions ``first``..``first+n-1`` to their outputs."""
        orch, ex = self.orchestrator, self.executor
        for start in range(first, first + n, BATCH):
            batch = []
            for i in range(start, min(start + BATCH, first + n)):
                sid = f"s{i}"
                batch.append(Record(self.topic, partition_for(sid, self.partitions), self.offset,
                                    sid.encode(), prompts[i]))
                self.offset += 1
            # As the worker's loop does: the group still counts it (no broker here to ask).
            orch.ownership.gate.confirmed(time.monotonic())
            orch.process(batch)
            # Again before the calls: a slow run (under callgrind, on a loaded machine) can
            # outlast the lease, and a call waits for a confirmation nothing here would give.
            orch.ownership.gate.confirmed(time.monotonic())
            for request in self.requests:
                ex.perform(request, None, 0)
            self.requests.clear()
            results = []
            for topic, key, value, headers in self.results.records:
                if topic == self.topic and key is not None and value is not None:
                    part = partition_for(key.decode(), self.partitions)
                    results.append(Record(topic, part, self.offset, key, value, headers))
                    self.offset += 1
            self.results.records.clear()
            ex.inflight.clear()
            orch.process(results)
            orch.checkpoints.commit(None)
            self.out.records.clear()

    @property
    def outputs(self) -> int:
        return self.orchestrator.counters.get("outputs")


def measure(sessions: int, rounds: int, profile: bool = False) -> tuple[list[float], int]:
    """(us per session of each round, outputs produced); each round runs new sessions."""
    path = WorkerPath()
    prompts = [encode(input_event(f"s{i}", f"hello {i}")) for i in range(sessions * rounds)]
    profiler = cProfile.Profile() if profile else None
    times = []
    for r in range(rounds):
        t0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        path.sessions(r * sessions, sessions, prompts)
        if profiler is not None:
            profiler.disable()
        times.append((time.perf_counter() - t0) / sessions * 1e6)
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
    return times, path.outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=5000, help="sessions per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--profile", action="store_true", help="print a cProfile listing")
    args = parser.parse_args()
    gc.freeze()  # as `eddies worker` does
    gc.set_threshold(50_000, 20, 100)
    times, outputs = measure(args.sessions, args.rounds, args.profile)
    each = ", ".join(f"{t:.0f}" for t in times)
    print(f"worker hot path, no broker: best {min(times):.1f} us/session (rounds: {each}); "
          f"{outputs} outputs")


if __name__ == "__main__":
    main()
