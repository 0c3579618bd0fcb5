"""Provider limits held by a fleet: the rate of model requests a provider sees from workers
whose model connection says ``requests_per_minute``.

Run: ``.venv/bin/python bench/provider_limits.py`` (``make bench-provider-limits``). The slow
provider of ``bench/providers.py`` (its own process, answering after ``--delay`` s, noting
when each request came) and one embedded broker; the one-call agent of
``bench/provider_agents.py`` with ``limits={"requests_per_minute": --rpm}``. Each scenario
sends ``--sessions`` inputs at once (more than the limit lets through in ``--seconds``) and
reads, from the provider's arrival times, the requests of each 10 s window over
``--seconds``:

- ``one``: one worker.
- ``two``: two workers in one group from the start.
- ``join``: one worker, and a second one joining after ``--join`` seconds; the windows
  that begin after it joined are shown apart.
- ``storm``: one worker; after 10 s the provider answers 429 with ``Retry-After: 2`` to
  every request for ``--storm`` seconds. Shown: the requests it refused, and the sessions
  that failed (the retry policy allows a model call four attempts, and a Retry-After
  holds every call to the provider: none should fail).

Targets (issue 55), at 600 a minute: the fleet's rate over 60 s within 5% of 10/s, no 10 s
window after the first above 10.5/s; after a second worker joins, none above 11/s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENT = "bench.provider_agents:one_call_agent"
WINDOW_S = 10.0


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _get(root: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(f"{root}{path}", method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def windows(arrivals: list[float], start: float, seconds: float) -> list[int]:
    """Requests per ``WINDOW_S`` window from ``start``, over ``seconds``."""
    counts = [0] * int(seconds // WINDOW_S)
    for t in arrivals:
        i = int((t - start) // WINDOW_S)
        if 0 <= i < len(counts):
            counts[i] += 1
    return counts


def scenario(kb: Any, bootstrap: str, provider: Any, name: str, args: argparse.Namespace) -> str:
    """Run one scenario; its line of the results."""
    from confluent_kafka import Producer

    from eddies.connectors.runtime.client import input_event, next_batch
    from eddies.events import decode, encode

    limits = json.dumps({"requests_per_minute": args.rpm})
    env = {"BENCH_PROVIDER_BASE": provider.base_url, "BENCH_PROVIDER_LIMITS": limits}
    names = kb.fresh_app(bootstrap)
    reader = kb.output_reader(bootstrap, names)
    workers = [kb.start_worker(bootstrap, names.app, AGENT, **env)]
    if name == "two":
        workers.append(kb.start_worker(bootstrap, names.app, AGENT, **env))
    prod = Producer({"bootstrap.servers": bootstrap, **kb.INPUT_PRODUCER})
    failed = answered = 0
    try:
        prod.produce(names.input, encode(input_event("warm", "warm")), b"warm", headers=kb.HEADERS)
        prod.flush(10)
        deadline = time.monotonic() + 120
        while not kb.wait_outputs(reader, 1, 0.5):
            if time.monotonic() > deadline:
                raise RuntimeError("no answer to the warm-up input (BENCH_WORKER_LOG=FILE keeps the log)")
        time.sleep(3 if name == "two" else 0)  # both members settled
        start = time.time()
        for i in range(args.sessions):
            sid = f"l{i}"
            prod.produce(names.input, encode(input_event(sid, f"hello {i}")), sid.encode(),
                         headers=kb.HEADERS)
            if i % 1000 == 0:
                prod.poll(0)
        prod.flush(60)
        joined = stormed = None
        while (now := time.time()) < start + args.seconds:
            if name == "join" and joined is None and now >= start + args.join:
                workers.append(kb.start_worker(bootstrap, names.app, AGENT, **env))
                joined = now
            if name == "storm" and stormed is None and now >= start + 10:
                _get(provider.root, "/storm", {"seconds": args.storm, "retry_after": 2})
                stormed = now
            for m in next_batch(reader, 1000, 0.2):
                if m.error():
                    continue
                answered += 1
                if getattr(decode(m.value()).payload, "error", None) is not None:
                    failed += 1
        said = _get(provider.root, "/arrivals")
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        reader.close()
    counts = windows(said["arrivals"], start, args.seconds)
    rates = [c / WINDOW_S for c in counts]
    total = sum(counts) / args.seconds
    line = (f"| {name} | {args.rpm / 60:g}/s | {total:.2f}/s ({total / (args.rpm / 60) - 1:+.1%}) | "
            f"{max(rates[1:], default=0):.1f}/s | {' '.join(f'{r:.1f}' for r in rates)} |")
    if joined is not None:
        after = [r for i, r in enumerate(rates) if start + i * WINDOW_S >= joined]
        line += f" after the join at {joined - start:.0f} s: max {max(after, default=0):.1f}/s |"
    elif stormed is not None:
        line += (f" storm of {args.storm:g} s at 10 s: {said['refused']} requests refused, "
                 f"{failed} of {answered} sessions answered failed |")
    else:
        line += f" {answered} answered, {failed} failed |"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rpm", type=float, default=600, help="the connection's requests_per_minute")
    parser.add_argument("--seconds", type=float, default=60, help="how long each scenario is measured")
    parser.add_argument("--sessions", type=int, default=1500, help="inputs sent at once per scenario")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the provider takes per answer")
    parser.add_argument("--join", type=float, default=20, help="when the second worker joins (join)")
    parser.add_argument("--storm", type=float, default=5, help="seconds of 429s (storm)")
    parser.add_argument("--scenarios", default="one,two,join,storm", help="comma-separated")
    args = parser.parse_args()
    from eddies.connectors.kafka.broker import EmbeddedBroker

    kb, providers = _load("kafka"), _load("providers")
    provider = providers.Provider(args.delay)
    print(f"provider answering after {args.delay:g} s; {args.sessions} sessions per scenario; "
          f"requests_per_minute={args.rpm:g}; windows of {WINDOW_S:g} s over {args.seconds:g} s")
    print("| scenario | limit | fleet's rate over the run | busiest window after the first | "
          "each window | |")
    print("|---|---:|---:|---:|---|---|")
    try:
        with EmbeddedBroker() as broker:
            for name in args.scenarios.split(","):
                print(scenario(kb, broker.bootstrap, provider, name.strip(), args), flush=True)
    finally:
        provider.stop()


if __name__ == "__main__":
    main()
