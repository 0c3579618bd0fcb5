"""Streaming: how soon a model's tokens reach a reader of ``APP.stream`` and of ``eddies
serve``, and what streaming costs the worker per token.

Run: ``.venv/bin/python bench/streaming.py`` (``make bench-streaming``). A local
OpenAI-compatible server, in a process of its own (aiohttp), streams every answer as
``--tokens`` tokens ``--token-ms`` apart (the first at once), each chunk's send time
written to a log; the first token of an answer carries the request's text, so each
answer is found by it. In one run, on one embedded broker:

- ``raw``: the floor. One asyncio process reads the answers' streams with httpx and
  orjson and produces each chunk at once (confluent-kafka, ``linger.ms`` 0) to a topic a
  reader (``fetch.wait.max.ms`` 10) reads: the first token's delay from the server's send
  to the reader, with nothing of Eddies in between.
- ``worker``: one ``eddies worker`` (default settings) serving a one-call agent whose model
  streams; ``eddies serve`` in front of it. Each input is POSTed to the door with
  ``Accept: text/event-stream`` (``--concurrency`` at once), and the first ``delta`` event's
  arrival is timed; a reader of ``APP.stream`` (``fetch.wait.max.ms`` 10) times the first
  DELTA record of each answer. Also checked: the text of each answer's records, in seq
  order, is the answer, and the records came in seq order; and how long the batcher held
  a token (the record's timestamp less its first token's send time).
- ``cost``: the worker's CPU (user + system, from /proc) per token, the same answers made
  with the setup streaming and not (``BENCH_STREAM=0``): what streaming costs.

Targets (issue 56): over 100 answers of 200 tokens at 20 ms, the first token reaches an
``APP.stream`` reader within 30 ms (p50) of the server sending it, and ``eddies serve``'s
SSE within 50 ms; deltas batched over at most 10 ms; tokens in order.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENT = "bench.provider_agents:streaming_one_call_agent"
MODEL = "openai/test"


def _bench_kafka() -> Any:
    spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the provider ------------------------------------------------------------------------

def serve(port: int, tokens: int, token_ms: float, log: str) -> None:
    """Stream every answer as ``tokens`` tokens ``token_ms`` apart; each token's send time
    to ``log`` (JSON lines: tag, index, time)."""
    from aiohttp import web

    out = open(log, "a", buffering=1)  # noqa: SIM115 (open while the server runs)

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        tag = str(body["messages"][-1]["content"])
        words = [tag, *(f"t{i}" for i in range(1, tokens))]
        base = {"id": f"chatcmpl-{tag}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body.get("model", "test")}
        if not body.get("stream"):
            await asyncio.sleep(tokens * token_ms / 1000)
            return web.json_response({**base, "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": " ".join(words)}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        await send({"role": "assistant", "content": ""})
        for i, word in enumerate(words):
            if i:
                await asyncio.sleep(token_ms / 1000)
            await send({"content": word if i == 0 else " " + word})
            out.write(json.dumps([tag, i, time.time()]) + "\n")
        await send({}, "stop")
        usage = {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}
        last = {**base, "choices": [], "usage": usage}
        await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
        await site.start()
        print(f"listening on {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Provider:
    def __init__(self, tokens: int, token_ms: float, log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--tokens", str(tokens), "--token-ms", str(token_ms),
             "--log", str(log)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the provider did not start: {line!r}")
        self.base_url = f"http://127.0.0.1:{int(line.split()[-1])}/v1"

    def sent(self) -> dict[str, list[float]]:
        """Each answer's tokens' send times, by tag."""
        out: dict[str, list[float]] = {}
        for line in self.log.read_text().splitlines():
            tag, i, at = json.loads(line)
            times = out.setdefault(tag, [])
            times.extend([0.0] * (i + 1 - len(times)))
            times[i] = at
        return out

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# --- readers -----------------------------------------------------------------------------

class StreamReader:
    """Reads ``topic`` from its end on a thread: each record's arrival time."""

    def __init__(self, bootstrap: str, topic: str, decode: Any) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                  "auto.offset.reset": "earliest"})
        parts = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        starts = []
        for p in parts:
            _, end = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            starts.append(TopicPartition(topic, p, max(0, end)))
        self.consumer.assign(starts)
        self.decode = decode
        self.got: list[tuple[float, Any]] = []
        self.offsets: dict[int, int] = {}
        self.skipped = 0  # records the fetches skipped (offset gaps)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                self.got.append((time.time(), self.decode(msg.value())))
                # A fetch that skipped records (the embedded broker's, see BROKER-NOTES)
                # shows as an offset gap: counted, so a lost record is told from a skipped one.
                part, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                last = self.offsets.get(part)
                if last is not None and offset > last + 1:
                    self.skipped += offset - last - 1
                self.offsets[part] = offset

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.consumer.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --- raw ---------------------------------------------------------------------------------

def raw_child(base: str, bootstrap: str, topic: str, tags: list[str], concurrency: int) -> None:
    """httpx streams -> orjson -> a produce per chunk (linger.ms 0): the floor."""
    import httpx
    import orjson
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "partitioner": "murmur2_random"})
    polling = threading.Event()

    def poll() -> None:
        while not polling.is_set():
            prod.poll(0.01)

    threading.Thread(target=poll, daemon=True).start()

    async def one(client: httpx.AsyncClient, tag: str, gate: asyncio.Semaphore) -> None:
        body = {"model": "test", "stream": True, "messages": [{"role": "user", "content": tag}]}
        async with gate, client.stream("POST", f"{base}/chat/completions", json=body, timeout=60) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = orjson.loads(line[6:]).get("choices") or [{}]
                text = (choices[0].get("delta") or {}).get("content")
                if text:
                    prod.produce(topic, text.encode(), tag.encode())

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
            await asyncio.gather(*(one(client, t, gate) for t in tags))

    asyncio.run(main())
    prod.flush(10)
    polling.set()


def run_raw(kb: Any, bootstrap: str, provider: Provider, n: int, concurrency: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"raw-stream-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for made in admin.create_topics([NewTopic(topic, kb.PARTITIONS, 1)]).values():
        made.result()  # else the producer's first record makes it, with the broker's default count
    time.sleep(1.0)
    reader = StreamReader(bootstrap, topic, lambda v: v.decode())
    tags = [f"raw{i}" for i in range(n)]
    subprocess.run([sys.executable, __file__, "--raw-child", "--base", provider.base_url, "--bootstrap",
                    bootstrap, "--topic", topic, "--concurrency", str(concurrency), *tags],
                   cwd=ROOT, check=True)
    time.sleep(1.0)
    reader.close()
    sent = provider.sent()
    first = {}
    for at, text in reader.got:
        if text in sent and text not in first:
            first[text] = (at - sent[text][0]) * 1000
    return {"first_ms": list(first.values()), "answers": len(first)}


# --- the worker and the door ---------------------------------------------------------------

def _door(bootstrap: str, app: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "eddies", "serve", "--port", "0", "--app", app,
                             "--bootstrap-servers", bootstrap], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url.removesuffix("/v1") + "/healthz", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("eddies serve did not become ready")


def _follow_all(url: str, tags: list[str], concurrency: int) -> dict[str, float]:
    """POST each tag as an input with Accept: text/event-stream; each first delta's arrival."""
    import httpx

    got: dict[str, float] = {}

    async def one(client: httpx.AsyncClient, tag: str, gate: asyncio.Semaphore) -> None:
        async with gate, client.stream("POST", f"{url}/sessions/{tag}/inputs", json={"input": tag},
                                       headers={"Accept": "text/event-stream"}, timeout=120) as r:
            event = ""
            async for line in r.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "delta" and tag not in got:
                    if json.loads(line[6:])["text"]:
                        got[tag] = time.time()
                elif line.startswith("data: ") and event == "output":
                    return

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
            await asyncio.gather(*(one(client, t, gate) for t in tags))

    asyncio.run(main())
    return got


def run_worker(kb: Any, bootstrap: str, provider: Provider, n: int, concurrency: int, tokens: int,
               stream: bool, label: str) -> dict[str, Any]:
    from eddies.events.stream import StreamKind, decode_stream

    names = kb.fresh_app(bootstrap)
    os.environ["BENCH_PROVIDER_BASE"] = provider.base_url
    os.environ["BENCH_STREAM"] = "1" if stream else "0"
    worker = kb.start_worker(bootstrap, names.app, agent=AGENT)
    door, url = _door(bootstrap, names.app)
    reader = StreamReader(bootstrap, names.stream, decode_stream)
    try:
        _follow_all(url, [f"warm-{label}"], 1)  # litellm imported, the first call made
        cpu0 = kb.cpu_seconds(worker.pid)
        tags = [f"{label}{i}" for i in range(n)]
        began = time.perf_counter()
        sse = _follow_all(url, tags, concurrency)
        wall = time.perf_counter() - began
        cpu = kb.cpu_seconds(worker.pid) - cpu0
        time.sleep(0.5)
    finally:
        reader.close()
        door.terminate()
        door.wait(10)
        worker.terminate()
        worker.wait(30)
    sent = provider.sent()
    first_kafka: dict[str, float] = {}
    held: list[float] = []
    texts: dict[str, list[str]] = {}
    seqs: dict[str, list[int]] = {}
    for at, rec in reader.got:
        if rec.kind is not StreamKind.DELTA or rec.session_id not in sent:
            continue
        times = sent[rec.session_id]
        texts.setdefault(rec.session_id, []).append(rec.text)
        seqs.setdefault(rec.session_id, []).append(rec.seq)
        first_kafka.setdefault(rec.session_id, (at - times[0]) * 1000)
        index = sum(len(t.split()) for t in texts[rec.session_id][:-1])  # the record's first token
        if index < len(times):
            held.append(rec.timestamp - times[index] * 1000)
    expected = {tag: " ".join([tag, *(f"t{i}" for i in range(1, tokens))]) for tag in sent}
    gaps = {tag: sorted(set(range(max(s) + 1)) - set(s)) for tag, s in seqs.items()
            if "".join(texts[tag]) != expected[tag]}
    if gaps and os.environ.get("BENCH_STREAM_DUMP"):
        Path(os.environ["BENCH_STREAM_DUMP"] + ".gaps").write_text(json.dumps(
            {tag: {"missing_seq": g[:20], "seqs": seqs[tag][:10], "got": "".join(texts[tag])[:80]}
             for tag, g in gaps.items()}))
    whole = sum(1 for tag, parts in texts.items() if "".join(parts) == expected[tag])
    in_order = sum(1 for s in seqs.values() if s == sorted(s))
    if os.environ.get("BENCH_STREAM_DUMP"):  # each answer's first token, for a closer look
        Path(os.environ["BENCH_STREAM_DUMP"]).write_text(json.dumps(
            {tag: [sent[tag][0], first_kafka.get(tag), sse.get(tag)]
             for tag in sent if tag.startswith(label)}))
    return {"label": label, "answers": len(sse), "wall_s": wall, "cpu_s": cpu,
            "first_kafka_ms": list(first_kafka.values()),
            "first_sse_ms": [(at - sent[tag][0]) * 1000 for tag, at in sse.items() if tag in sent],
            "held_ms": held, "whole": whole, "in_order": in_order, "records": len(reader.got),
            "skipped": reader.skipped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=10, help="answers being written at once")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--raw-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("tags", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.tokens, args.token_ms, args.log)
        return
    if args.raw_child:
        raw_child(args.base, args.bootstrap, args.topic, args.tags, args.concurrency)
        return
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    kb = _bench_kafka()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        provider = Provider(args.tokens, args.token_ms, Path(tmp) / "sent.jsonl")
        try:
            with kb.EmbeddedBroker() as broker:
                raw = run_raw(kb, broker.bootstrap, provider, args.answers, args.concurrency)
                streamed = run_worker(kb, broker.bootstrap, provider, args.answers, args.concurrency,
                                      args.tokens, True, "s")
                plain = run_worker(kb, broker.bootstrap, provider, args.answers, args.concurrency,
                                   args.tokens, False, "p")
        finally:
            provider.stop()
    n, tokens = args.answers, args.tokens
    print(f"\nprovider: {tokens} tokens {args.token_ms:g} ms apart per answer; {n} answers, "
          f"{args.concurrency} at once; embedded broker, {kb.PARTITIONS} partitions")

    def line(what: str, values: list[float], unit: str = "answers") -> str:
        return (f"  {what:<44} p50 {pct(values, 0.5):6.1f}  p95 {pct(values, 0.95):6.1f}  "
                f"max {max(values, default=float('nan')):6.1f} ms  ({len(values):,} {unit})")

    print("first token, from the server's send:")
    print(line("raw: httpx -> produce -> reader", raw["first_ms"]))
    print(line("worker -> APP.stream -> reader", streamed["first_kafka_ms"]))
    print(line("worker -> APP.stream -> eddies serve SSE", streamed["first_sse_ms"]))
    print(line("tokens held by the batcher (record - token)", streamed["held_ms"], "records"))
    print(f"  answers whole in their records: {streamed['whole']}/{n}; records in seq order: "
          f"{streamed['in_order']}/{n}; stream records: {streamed['records']:,}, of which the "
          f"reader's fetches skipped {streamed['skipped']:,} (offset gaps)")
    per_token = (streamed["cpu_s"] - plain["cpu_s"]) / (n * tokens) * 1e6
    print(f"worker CPU: streamed {streamed['cpu_s']:.2f} s, not streamed {plain['cpu_s']:.2f} s for "
          f"{n * tokens:,} tokens: streaming costs {per_token:.1f} us per token "
          f"({streamed['cpu_s'] / n * 1000:.1f} against {plain['cpu_s'] / n * 1000:.1f} ms per answer)")
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
