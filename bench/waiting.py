"""What waiting costs: sessions waiting on durable timers and signals in one worker.

Run: ``.venv/bin/python bench/waiting.py`` (``make bench-waiting``; about 2 minutes). On
one fresh embedded broker, one worker process (orchestrator and executor):

1. ``--sessions`` prompts, half of them sleeping ``--sleep-s`` (a durable timer), half
   waiting for a signal without timeout;
2. once every wait is issued and saved: the worker's threads, resident memory and CPU over
   ``--window-s`` seconds of waiting (the target: under 5% of one core, and no thread per
   waiting session);
3. a signal sent to each signal-waiting session, and every session's answer awaited: how
   late the timers fired after their due time (p50, p99), and how long the signals took
   from produce to answer, all of them sent in one burst.

Next to it, the same worker process idle with no session at all (its CPU over the same
window), so the cost of the waits is the difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.runtime.client import input_event, next_batch, signal_event
from eddies.connectors.runtime.settings import Settings
from eddies.events import decode, encode

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
assert _spec is not None and _spec.loader is not None
kb: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)


class Waiting(Agent):
    """input {"sleep_s": x} -> sleeps -> output {"due": ms}; input {"signal": name} ->
    waits for it -> output its value."""

    @action(InputEvent)
    def wait(event: InputEvent, ctx: Any) -> None:
        asked = event.input
        if "sleep_s" in asked:
            ctx.sleep(asked["sleep_s"])
            ctx.send_event(OutputEvent(output={"due": ctx.now()}))
        else:
            ctx.send_event(OutputEvent(output=ctx.wait_for_signal(asked["signal"])))


def waiting_agent() -> Waiting:
    return Waiting("waiting")


def start_worker(bootstrap: str, app: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", app, "--bootstrap-servers", bootstrap,
         "--partitions", str(kb.PARTITIONS), "--agent", "bench.waiting:waiting_agent"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "ab"))


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def cpu_over(pid: int, window_s: float) -> float:
    """The process's CPU over ``window_s`` seconds, in % of one core."""
    c0, t0 = cpu_s(pid), time.monotonic()
    time.sleep(window_s)
    return (cpu_s(pid) - c0) / (time.monotonic() - t0) * 100


def count_waits(reader: Any, want: int, timeout_s: float) -> int:
    """Read the events topic until ``want`` timer and signal requests were issued."""
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < want and time.monotonic() < deadline:
        for m in next_batch(reader, 2000, 0.1):
            if not m.error() and b"DurableCallRequest" in m.value():
                ev = decode(m.value())
                if getattr(ev.payload, "kind", "") in ("TIMER", "SIGNAL"):
                    got += 1
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--sleep-s", type=float, default=60.0)
    parser.add_argument("--window-s", type=float, default=15.0)
    args = parser.parse_args()
    n, half = args.sessions, args.sessions // 2
    with kb.EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap
        idle_app = kb.fresh_app(bootstrap)
        idle = start_worker(bootstrap, idle_app.app)
        names = kb.fresh_app(bootstrap)
        worker = start_worker(bootstrap, names.app)
        events = kb.output_reader(bootstrap, names, names.events)
        outputs = kb.output_reader(bootstrap, names)
        try:
            prod = Producer({"bootstrap.servers": bootstrap, **kb.INPUT_PRODUCER})
            t0 = time.time()
            for i in range(n):
                sid = f"w{i}"
                asked = {"sleep_s": args.sleep_s} if i < half else {"signal": "go"}
                prod.produce(names.input, encode(input_event(sid, asked)), sid.encode(),
                             headers=kb.HEADERS)
                if i % 2000 == 0:
                    prod.poll(0)
            prod.flush(60)
            issued = count_waits(events, n, 120)
            if issued < n:
                raise RuntimeError(f"only {issued} of {n} waits issued")
            settled = time.time() - t0
            # The waiting sessions are mid-run: saved snapshot_delay_ms after their last
            # step (a one-off write of every session, not what waiting costs), then committed.
            time.sleep(Settings().snapshot_delay_ms / 1000 + 2)
            st = status(worker.pid)
            cpu = cpu_over(worker.pid, args.window_s)
            idle_cpu = cpu_over(idle.pid, args.window_s / 3)
            idle_threads = status(idle.pid)["Threads"]
            # Signals, all at once.
            sent = time.time()
            for i in range(half, n):
                sid = f"w{i}"
                prod.produce(names.input, encode(signal_event(sid, "go", i)), sid.encode(),
                             headers=kb.HEADERS)
            prod.flush(60)
            late: list[float] = []
            answered_signals = 0
            last_signal = 0.0
            got = 0
            deadline = time.monotonic() + args.sleep_s + 120
            while got < n and time.monotonic() < deadline:
                for m in next_batch(outputs, 2000, 0.1):
                    if m.error():
                        continue
                    got += 1
                    out = decode(m.value()).payload
                    value = getattr(out, "output", None)
                    if isinstance(value, dict) and "due" in value:
                        late.append(m.timestamp()[1] - value["due"])
                    else:
                        answered_signals += 1
                        last_signal = time.time()
            if got < n:
                raise RuntimeError(f"only {got} of {n} answers")
        finally:
            for proc in (worker, idle):
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
            for reader in (events, outputs):
                reader.close()
    late.sort()
    print(f"embedded broker, {kb.PARTITIONS} partitions; {n} sessions waiting in one worker: "
          f"{half} on a {args.sleep_s:g} s timer, {n - half} on a signal (no timeout)")
    print(f"all waits issued {settled:.1f} s after the first prompt")
    print(f"while they wait: worker CPU {cpu:.2f}% of a core over {args.window_s:g} s "
          f"(an idle worker with no session: {idle_cpu:.2f}%); threads {st['Threads']} "
          f"(the idle worker: {idle_threads}); RSS {st['VmRSS'].strip()}")
    print(f"timers fired after their due time: p50 {statistics.median(late):.0f} ms, "
          f"p99 {late[min(len(late) - 1, int(len(late) * 0.99))]:.0f} ms, "
          f"max {late[-1]:.0f} ms ({len(late)} timers)")
    print(f"{answered_signals} signals sent in one burst, all answered "
          f"{last_signal - sent:.1f} s after the first was sent")
    print(json.dumps({"cpu_pct": round(cpu, 2), "idle_cpu_pct": round(idle_cpu, 2),
                      "threads": int(st["Threads"]), "target_cpu_pct": 5}))


if __name__ == "__main__":
    main()
