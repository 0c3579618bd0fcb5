"""Slow providers: one worker's model calls next to a plain litellm asyncio loop's.

Run: ``.venv/bin/python bench/providers.py`` (``make bench-providers``). A local
OpenAI-compatible server, in a process of its own (aiohttp, one event loop, listen backlog
4096), answers every ``/v1/chat/completions`` request after ``--delay`` seconds, with a
usage block, and counts the requests it holds at once (``GET /stats``: the peak since the
last ``POST /stats/reset``). Offered tools and given no tool result yet, it asks for two
tool calls at once (the first two tools offered); otherwise it answers.

In one run, on one embedded broker, for each workload of ``--workloads``:

- ``anchor``: the plain loop, in a process of its own: ``asyncio.gather`` of
  ``--sessions`` runs of the workload, each made of ``litellm.acompletion`` calls (model
  ``openai/test``, the server as ``api_base``, the worker's timeout and no retries): the
  rate a single asyncio process gets from litellm against this provider. It runs with the
  environment the worker gets, so with the same litellm connection pool: the size the
  worker gives it (its ``max_calls_in_flight``, 4,096 by default, unless
  ``AIOHTTP_CONNECTOR_LIMIT`` and ``AIOHTTP_CONNECTOR_LIMIT_PER_HOST`` are set here); the
  limits are printed. It runs the
  one-call sessions, and the ReAct ones too when ``react`` is measured.
- ``one-call``: one ``eddies worker`` process (default settings: an ``EDDIES_*`` setting
  in this environment applies to it and is printed) serving sessions of one litellm chat
  call each (``bench/provider_agents.py``, ``LiteLLMChatModel(api_base=...)``).
- ``react``: the same worker serving ReAct sessions: a model call asking for two tools,
  the two tools in parallel, a model call that answers.

Each worker workload gets a fresh app and worker; once the worker has answered a warm-up
input, ``--sessions`` inputs of new sessions are sent and the outputs read on
``APP.output``, timed from the first send until the last output read, or until
``--timeout`` seconds, after which what was answered so far and its rate are reported (the
worker before async-native execution answers ~8 calls a second whatever the load: 2,000
one-call sessions would take 4 minutes). Printed per workload: sessions answered (and
failed), answered/s, model calls answered at the server per second, the ratio of
answered/s to the plain loop's on the same workload, the peak of calls in flight at the
server, and the process's peak RSS (``VmHWM``) and CPU (user + system) per model call.

Target (issue 55): 2,000 one-call sessions against a 1 s provider answered by the worker,
default settings, at >= 80% of the plain loop's rate in the same run, with >= 1,000 calls
in flight at the server's peak.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
#: The workers' agents, by workload (``bench/provider_agents.py``).
AGENTS = {"one-call": "bench.provider_agents:one_call_agent",
          "react": "bench.provider_agents:react_agent"}
MODEL = "openai/test"
#: The model call's timeout the worker's ``LiteLLMChatModel`` uses (its default).
CALL_TIMEOUT = 120.0


def _bench_kafka() -> Any:
    """bench/kafka.py (the embedded broker's helpers), loaded as the other benches do."""
    spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _more_files() -> None:
    """As many open files as the hard limit allows (a connection each)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- the provider ------------------------------------------------------------------------


def _words(text: Any) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def completion(body: dict[str, Any], number: int) -> dict[str, Any]:
    """The server's answer to a chat completions request ``body``: two tool calls at once
    when tools are offered and no tool result was given yet, else a final answer (the tool
    results joined, or an echo of the last message)."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    message: dict[str, Any]
    if tools and not results:
        asked = (tools * 2)[:2]
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call-{number}-{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps({"a": 6, "b": 7})}}
            for i, name in enumerate(asked)]}
        finish, completion_tokens = "tool_calls", 20
    else:
        content = (f"results: {', '.join(results)}" if results
                   else f"answer to: {str(messages[-1].get('content') if messages else '')[:60]}")
        message = {"role": "assistant", "content": content}
        finish, completion_tokens = "stop", _words(content)
    prompt_tokens = sum(_words(m.get("content")) for m in messages) + 10 * len(tools)
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class Counts:
    """Requests received and answered, in flight now and at the peak since the reset."""

    def __init__(self) -> None:
        self.requests = self.answered = self.in_flight = self.peak = 0

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "answered": self.answered,
                "in_flight": self.in_flight, "peak": self.peak}


def serve(delay: float, port: int) -> None:
    """Run the provider until killed, printing ``listening on PORT`` once it listens."""
    from aiohttp import web

    _more_files()
    counts = Counts()
    numbers = iter(range(1, 1 << 62))
    arrivals: list[float] = []  # when each request came (time.time())
    storm = {"until": 0.0, "retry_after": 0.0, "refused": 0}  # 429s with Retry-After till then

    async def chat(request: web.Request) -> web.Response:
        counts.requests += 1
        counts.in_flight += 1
        counts.peak = max(counts.peak, counts.in_flight)
        arrivals.append(time.time())
        try:
            body = await request.json()
            if time.time() < storm["until"]:
                storm["refused"] += 1
                return web.json_response(
                    {"error": {"message": "rate limited (a storm)", "type": "rate_limit", "code": 429}},
                    status=429, headers={"Retry-After": f"{storm['retry_after']:g}"})
            await asyncio.sleep(delay)
            answer = completion(body, next(numbers))
            counts.answered += 1
            return web.json_response(answer)
        finally:
            counts.in_flight -= 1

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(counts.as_dict())

    async def arrived(request: web.Request) -> web.Response:
        return web.json_response({"arrivals": arrivals, "refused": storm["refused"]})

    async def start_storm(request: web.Request) -> web.Response:
        asked = await request.json()
        storm["until"] = time.time() + float(asked["seconds"])
        storm["retry_after"] = float(asked["retry_after"])
        return web.json_response(storm)

    async def reset(request: web.Request) -> web.Response:
        counts.requests = counts.answered = 0
        counts.peak = counts.in_flight
        return web.json_response(counts.as_dict())

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_post("/chat/completions", chat)
        app.router.add_get("/stats", stats)
        app.router.add_post("/stats/reset", reset)
        app.router.add_get("/arrivals", arrived)
        app.router.add_post("/storm", start_storm)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        await web.SockSite(runner, sock, backlog=4096).start()
        print(f"listening on {sock.getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Provider:
    """The provider's process (``serve``), its ``api_base`` and its counts."""

    def __init__(self, delay: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--delay", str(delay)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the provider did not start: {line!r}")
        self.root = f"http://127.0.0.1:{int(line.split()[-1])}"
        self.base_url = f"{self.root}/v1"

    def stats(self) -> dict[str, int]:
        return stats_of(self.root)

    def reset(self) -> None:
        stats_of(self.root, reset=True)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def stats_of(root: str, reset: bool = False) -> dict[str, int]:
    """The provider's counts (``reset``: after setting them back to none)."""
    request = urllib.request.Request(f"{root}/stats/reset" if reset else f"{root}/stats",
                                     method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as answer:
        counts: dict[str, int] = json.loads(answer.read())
        return counts


# --- the plain loop ----------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name.capitalize()} two integers.",
    "parameters": {"type": "object", "required": ["a", "b"],
                   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}
    for name in ("add", "multiply")]
TOOL_FUNCTIONS = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}


def plain_loop(base_url: str, kind: str, n: int) -> dict[str, Any]:
    """``n`` sessions of ``kind`` as one asyncio process makes them with litellm, all at
    once (``asyncio.gather``), after one warm-up session (litellm's imports and its client
    made, as the worker's warm-up input does): what the child process prints."""
    import litellm
    from litellm import constants

    _more_files()
    root = base_url.rsplit("/v1", 1)[0]
    ask = {"model": MODEL, "api_base": base_url, "api_key": "test", "timeout": CALL_TIMEOUT,
           "num_retries": 0}

    async def one_call(i: int) -> str:
        response: Any = await litellm.acompletion(
            messages=[{"role": "user", "content": f"hello {i}"}], **ask)
        return str(response.choices[0].message.content)

    async def react(i: int) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"add and multiply {i}"}]
        response: Any = await litellm.acompletion(messages=messages, tools=TOOLS, **ask)
        message = response.choices[0].message
        calls = message.tool_calls or []
        messages.append({"role": "assistant", "content": message.content, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls]})
        for c in calls:  # plain functions of microseconds: called in turn
            result = TOOL_FUNCTIONS[c.function.name](**json.loads(c.function.arguments))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps(result)})
        response = await litellm.acompletion(messages=messages, tools=TOOLS, **ask)
        return str(response.choices[0].message.content)

    run = one_call if kind == "one-call" else react

    async def main() -> dict[str, Any]:
        await run(-1)
        stats_of(root, reset=True)
        cpu0, t0 = time.process_time(), time.perf_counter()
        answers = await asyncio.gather(*(run(i) for i in range(n)), return_exceptions=True)
        elapsed = time.perf_counter() - t0
        failed = [a for a in answers if isinstance(a, BaseException)]
        return {"seconds": elapsed, "answered": n - len(failed), "failed": len(failed),
                "first_failure": repr(failed[0])[:300] if failed else None,
                "cpu_s": time.process_time() - cpu0,
                "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "limit": constants.AIOHTTP_CONNECTOR_LIMIT,
                "limit_per_host": constants.AIOHTTP_CONNECTOR_LIMIT_PER_HOST,
                "litellm": version("litellm"), "aiohttp": version("aiohttp")}

    return asyncio.run(main())


def version(package: str) -> str:
    from importlib.metadata import version as of

    return of(package)


# --- the measurements --------------------------------------------------------------------


class Row(NamedTuple):
    """One workload's measurement."""

    label: str
    kind: str
    sessions: int
    answered: int
    failed: int
    seconds: float
    calls: int  # model calls answered at the server within ``seconds``
    peak: int
    rss_mb: float
    cpu_s: float
    timed_out: bool = False

    @property
    def rate(self) -> float:
        return self.answered / self.seconds

    @property
    def calls_rate(self) -> float:
        return self.calls / self.seconds

    @property
    def cpu_ms_per_call(self) -> float:
        return self.cpu_s / max(self.calls, 1) * 1000


def run_plain_loop(provider: Provider, kind: str, n: int) -> tuple[Row, dict[str, Any]]:
    """The plain loop's row for ``kind``, and what its process said (its pool limits)."""
    done = subprocess.run(
        [sys.executable, __file__, "--anchor-child", kind, "--base", provider.base_url,
         "--sessions", str(n)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the plain loop failed: {done.stderr[-3000:]}")
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    stats = provider.stats()
    row = Row(f"plain litellm loop, {kind}", kind, n, said["answered"], said["failed"], said["seconds"],
              stats["answered"], stats["peak"], said["rss_kb"] / 1024, said["cpu_s"])
    return row, said


def status_kb(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/PID/status`` (e.g. VmHWM, the peak resident size)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def run_worker(kb: Any, bootstrap: str, provider: Provider, kind: str, n: int,
               timeout: float) -> Row:
    """One worker process's row for ``kind``: ``n`` inputs of new sessions sent once it
    answered a warm-up one, timed until ``n`` outputs were read or ``timeout`` passed."""
    from confluent_kafka import Producer

    from eddies.connectors.runtime.client import input_event, next_batch
    from eddies.events import decode, encode

    prompt = "hello {}" if kind == "one-call" else "add and multiply {}"
    names = kb.fresh_app(bootstrap)
    reader = kb.output_reader(bootstrap, names)
    worker = kb.start_worker(bootstrap, names.app, AGENTS[kind], BENCH_PROVIDER_BASE=provider.base_url)
    prod = Producer({"bootstrap.servers": bootstrap, **kb.INPUT_PRODUCER})
    try:
        prod.produce(names.input, encode(input_event("warm", prompt.format("warm"))), b"warm",
                     headers=kb.HEADERS)
        prod.flush(10)
        deadline = time.monotonic() + 120
        while not kb.wait_outputs(reader, 1, 0.5):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not answer the warm-up input (BENCH_WORKER_LOG=FILE "
                                   "keeps its log)")
        provider.reset()
        cpu0, t0 = kb.cpu_seconds(worker.pid), time.perf_counter()
        for i in range(n):
            sid = f"p{i}"
            prod.produce(names.input, encode(input_event(sid, prompt.format(i))), sid.encode(),
                         headers=kb.HEADERS)
            if i % 1000 == 0:
                prod.poll(0)
        prod.flush(60)
        answered = failed = 0
        end = t0 + timeout
        last = t0
        while answered < n and time.perf_counter() < end:
            for m in next_batch(reader, 1000, 0.05):
                if m.error():
                    continue
                answered += 1
                last = time.perf_counter()
                if getattr(decode(m.value()).payload, "error", None) is not None:
                    failed += 1
        timed_out = answered < n
        cpu = kb.cpu_seconds(worker.pid) - cpu0
        stats = provider.stats()
        seconds = timeout if timed_out else last - t0
        return Row(f"worker, {kind}", kind, n, answered - failed, failed, seconds, stats["answered"],
                   stats["peak"], status_kb(worker.pid, "VmHWM") / 1024, cpu, timed_out)
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
        reader.close()


def table(rows: list[Row], anchors: dict[str, Row]) -> str:
    """The rows as a markdown table (the ratio: answered/s over the plain loop's)."""
    lines = ["| workload | sessions answered | failed | seconds | answered/s | model calls/s | "
             "vs plain loop | peak in flight | process peak RSS | CPU per model call |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        anchor = anchors.get(r.kind)
        ratio = "-" if anchor is None or anchor is r else f"{r.rate / anchor.rate:.1%}"
        stopped = f" (stopped at --timeout, of {r.sessions:,})" if r.timed_out else f" of {r.sessions:,}"
        lines.append(f"| {r.label} | {r.answered:,}{stopped} | {r.failed:,} | {r.seconds:.1f} | "
                     f"{r.rate:,.1f} | {r.calls_rate:,.1f} | {ratio} | {r.peak:,} | {r.rss_mb:,.0f} MB | "
                     f"{r.cpu_ms_per_call:.2f} ms |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=2000, help="sessions per workload")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the provider takes per answer")
    parser.add_argument("--workloads", default="one-call,react,anchor",
                        help="comma-separated, of one-call, react and anchor (the plain litellm loop "
                             "on each worker workload measured, or on one-call alone)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a worker workload may take: then what was answered so far "
                             "is reported, with its rate")
    # The provider's and the plain loop's own processes (this script, run by itself).
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--anchor-child", choices=sorted(AGENTS), help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.delay, args.port)
        return
    if args.anchor_child:
        print(json.dumps(plain_loop(args.base, args.anchor_child, args.sessions)))
        return
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - {*AGENTS, "anchor"}
    if unknown:
        parser.error(f"--workloads: unknown {', '.join(sorted(unknown))} (one-call, react, anchor)")
    kinds = [k for k in AGENTS if k in workloads]
    anchored = (kinds or ["one-call"]) if "anchor" in workloads else []
    # The worker sizes litellm's pool to its max_calls_in_flight (call_loop.size_pools); the
    # plain loop gets the same pool through the environment both inherit.
    from eddies.connectors.execution.call_loop import size_pools
    from eddies.connectors.runtime.settings import Settings

    size_pools(int(os.environ.get("EDDIES_MAX_CALLS_IN_FLIGHT", Settings.max_calls_in_flight)))
    overrides = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("EDDIES_")
                       and k not in ("EDDIES_LOG_LEVEL",))
    kb = _bench_kafka()
    started = time.perf_counter()
    rows: list[Row] = []
    anchors: dict[str, Row] = {}
    said: dict[str, Any] = {}
    provider = Provider(args.delay)
    try:
        with kb.EmbeddedBroker() as broker:
            for kind in AGENTS:
                if kind in anchored:
                    anchors[kind], said = run_plain_loop(provider, kind, args.sessions)
                    rows.append(anchors[kind])
                    print(f"done: {anchors[kind].label}", flush=True)
                if kind in kinds:
                    rows.append(run_worker(kb, broker.bootstrap, provider, kind, args.sessions,
                                           args.timeout))
                    print(f"done: {rows[-1].label}", flush=True)
    finally:
        provider.stop()
    pool = (f"litellm {said['litellm']}, aiohttp {said['aiohttp']}: connection pool {said['limit']:,}, "
            f"{said['limit_per_host']:,} per host" if said else "no plain loop run")
    print(f"\nprovider: local OpenAI-compatible server, {args.delay:g} s per answer; "
          f"{args.sessions:,} sessions per workload; {pool} (the plain loop and the worker get the "
          "same environment)")
    print(f"worker: one `eddies worker`, embedded broker, {kb.PARTITIONS} partitions, "
          f"{'settings ' + ' '.join(overrides) if overrides else 'default settings'}; "
          f"--timeout {args.timeout:g} s per worker workload")
    print(table(rows, anchors))
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
