"""Retrieval as a durable call, next to the store's own client called directly.

Run: ``.venv/bin/python bench/retrieval.py`` (``make bench-retrieval``; about 2 minutes
for 100k vectors). One embedded store of ``--vectors`` documents (synthetic texts,
embedded by the offline model, 256 dimensions), kept in files; then the same
``--queries`` questions, each a query of the 5 nearest documents:

1. **direct**: the store's own client in this process: the question embedded by the
   offline model, then ``store.query`` (what the durable call does inside, with no journal);
2. **durable, in-process**: an agent whose action asks ``docs.query(question)``, on the
   LocalRunner: a VECTOR_STORE durable call per question, its documents journaled;
3. **durable, worker**: the same agent on ``eddies worker`` (orchestrator and executor in
   one process) on the embedded broker, the store opened from the same files: first one
   question at a time (latency), then all of them produced at once (throughput).

Calls per second and p50/p99 latency of each, in one run. Target (issue 32): the durable
retrieval within 20% of the direct call's throughput.

``--store pgvector`` does the same on Postgres with pgvector (HNSW index): a server started
from the ``pgserver`` wheel (the dev extra), or ``--dsn`` a server of your own.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from eddies import (
    Agent,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    InputEvent,
    LocalRunner,
    OfflineEmbeddingModel,
    OutputEvent,
    ResourceType,
    action,
)
from eddies.connectors.runtime.client import input_event
from eddies.events import encode

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
assert _spec is not None and _spec.loader is not None
kb: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)

COLLECTION = "bench"
LIMIT = 5
WORDS = ["hotel", "hostel", "tram", "metro", "ferry", "bread", "wine", "museum", "beach", "river",
         "market", "bridge", "castle", "garden", "station", "airport", "ticket", "night", "price",
         "cheap", "luxury", "breakfast", "dinner", "coffee", "festival", "winter", "summer", "rain",
         "snow", "sun", "mountain", "island", "harbour", "cathedral", "library"]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{' '.join(rng.choices(WORDS, k=8))} (item {i})" for i in range(n)]


class Retriever(Agent):
    """Each input a question: the ids of the 5 nearest documents."""

    @action(InputEvent)
    def find(event: InputEvent, ctx: Any) -> None:
        hits = ctx.get_resource("docs", ResourceType.VECTOR_STORE).query(event.input, limit=LIMIT)
        ctx.send_event(OutputEvent(output=[h.id for h in hits]))


def open_store(where: str) -> Any:
    """The store at ``where``: a Postgres DSN, else a folder of the embedded store."""
    if where.startswith("postgresql://"):
        from eddies import PgVectorStore

        return PgVectorStore(embedding_model="emb", collection=COLLECTION, dsn=where, table_prefix="bench_")
    return EmbeddedVectorStore(embedding_model="emb", collection=COLLECTION, path=where)


def retrieval_agent(path: str | None = None) -> Retriever:
    """The Retriever on the offline embedding model and the store at ``path`` (default:
    ``BENCH_STORE_PATH``: a folder, or a Postgres DSN)."""
    agent = Retriever("retriever")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, open_store(path or os.environ["BENCH_STORE_PATH"]))
    return agent


def build(path: str, n: int) -> float:
    """Write ``n`` documents to the store at ``path``; seconds it took."""
    model, store = OfflineEmbeddingModel(), open_store(path)
    corpus = texts(n, 1)
    t0 = time.perf_counter()
    for i in range(0, n, 10_000):
        chunk = corpus[i:i + 10_000]
        vectors, _ = model.embed(chunk)
        store.add(COLLECTION, [{"id": f"d{i + k}", "content": t} for k, t in enumerate(chunk)], vectors)
    return time.perf_counter() - t0


def summary(name: str, latencies_ms: list[float], total_s: float) -> dict[str, float]:
    q = statistics.quantiles(latencies_ms, n=100) if len(latencies_ms) > 1 else latencies_ms * 99
    row = {"calls_s": len(latencies_ms) / total_s, "p50_ms": statistics.median(latencies_ms),
           "p99_ms": q[98]}
    print(f"{name:<22} {row['calls_s']:8.1f} calls/s   p50 {row['p50_ms']:6.2f} ms   "
          f"p99 {row['p99_ms']:6.2f} ms", flush=True)
    return row


def direct(path: str, questions: list[str]) -> dict[str, float]:
    model = OfflineEmbeddingModel()
    store = open_store(path)
    lat = []
    t0 = time.perf_counter()
    for q in questions:
        t = time.perf_counter()
        [vector], _ = model.embed([q])
        store.query(COLLECTION, vector, LIMIT)
        lat.append((time.perf_counter() - t) * 1000)
    return summary("direct", lat, time.perf_counter() - t0)


def in_process(path: str, questions: list[str]) -> dict[str, float]:
    runner = LocalRunner(retrieval_agent(path))
    runner.run([("warm", questions[0])])
    lat = []
    t0 = time.perf_counter()
    for i, q in enumerate(questions):
        t = time.perf_counter()
        [ids] = runner.run([(f"s{i}", q)])
        assert len(ids) == LIMIT
        lat.append((time.perf_counter() - t) * 1000)
    return summary("durable, in-process", lat, time.perf_counter() - t0)


def worker(bootstrap: str, path: str, questions: list[str], samples: int) -> dict[str, float]:
    names = kb.fresh_app(bootstrap)
    proc = kb.start_worker(bootstrap, names.app, "bench.retrieval:retrieval_agent",
                           BENCH_STORE_PATH=path)
    reader = kb.output_reader(bootstrap, names)
    prod = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 0})

    def ask(sid: str, text: str) -> None:
        prod.produce(names.input, encode(input_event(sid, text)), sid.encode(), headers=kb.HEADERS)

    try:
        ask("warm", questions[0])
        prod.flush(10)
        if kb.wait_outputs(reader, 1, 120) != 1:
            raise RuntimeError("the worker did not answer the warm-up question")
        lat = []
        for i, q in enumerate(questions[:samples]):
            t = time.perf_counter()
            ask(f"lat{i}", q)
            prod.flush(10)
            if kb.wait_outputs(reader, 1, 10) != 1:
                raise RuntimeError("no answer within 10 s")
            lat.append((time.perf_counter() - t) * 1000)
        t0 = time.perf_counter()
        for i, q in enumerate(questions):
            ask(f"s{i}", q)
        prod.flush(30)
        if kb.wait_outputs(reader, len(questions), 60) != len(questions):
            raise RuntimeError("not every question was answered")
        total = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
        reader.close()
    row = {"calls_s": len(questions) / total, "p50_ms": statistics.median(lat),
           "p99_ms": statistics.quantiles(lat, n=100)[98] if len(lat) > 1 else lat[0]}
    print(f"{'durable, worker':<22} {row['calls_s']:8.1f} calls/s   p50 {row['p50_ms']:6.2f} ms   "
          f"p99 {row['p99_ms']:6.2f} ms   (latency one at a time; throughput all at once)",
          flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--bootstrap", default="", help="a broker (default: an embedded one)")
    parser.add_argument("--store", choices=["embedded", "pgvector"], default="embedded")
    parser.add_argument("--dsn", default="", help="pgvector: a server (default: one from pgserver)")
    args = parser.parse_args()
    questions = texts(args.queries, 2)
    with tempfile.TemporaryDirectory(prefix="eddies-retrieval-") as folder:
        path = folder
        if args.store == "pgvector":
            path = args.dsn or _postgres(folder)
            open_store(path).delete_collection(COLLECTION)
        print(f"{args.store} store: {args.vectors:,} documents embedded and written in "
              f"{build(path, args.vectors):.1f} s; {args.queries} questions, {LIMIT} nearest each",
              flush=True)
        rows = {"direct": direct(path, questions), "in-process": in_process(path, questions)}
        if args.bootstrap:
            rows["worker"] = worker(args.bootstrap, path, questions, args.latency_samples)
        else:
            from eddies.connectors.kafka.broker import EmbeddedBroker

            with EmbeddedBroker() as broker:
                rows["worker"] = worker(broker.bootstrap, path, questions, args.latency_samples)
    base = rows["direct"]["calls_s"]
    for name in ("in-process", "worker"):
        print(f"{name}: {rows[name]['calls_s'] / base:.0%} of the direct call's throughput")


def _postgres(folder: str) -> str:
    """A Postgres server with pgvector, from the pgserver wheel, in ``folder``; its DSN."""
    import pgserver

    get_server = pgserver.get_server  # type: ignore[attr-defined]
    server = get_server(Path(folder) / "pg", cleanup_mode="stop")
    return str(server.get_uri())


if __name__ == "__main__":
    main()
