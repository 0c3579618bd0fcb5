"""The Flink runner next to the Kafka worker, on the same workload, in one run.

Run: ``.venv/bin/python bench/flink.py`` (``make bench-flink``). On one fresh embedded
broker, for each runner, one-turn sessions (input -> model call -> output, scripted model):

1. backlog: ``--sessions`` prompts produced first, then the runner started; timed from its
   first event to its last answer consumed: sessions/s (median of ``--repeats``, each on
   a fresh app: the embedded broker slows as a topic grows);
   and the runner's CPU time per session (its processes, the JVM included: steadier than
   the rate on a shared machine), its busiest thread's (the Flink task's thread, where
   the session machine runs, is the job's bottleneck) and the broker's;
2. idle latency: one prompt at a time into the running, idle runner, from produce to the
   answer consumed: p50/p99.

``--against CHECKOUT`` (another checkout with its own ``.venv`` and ``make install-flink``
done there) runs only the Flink job's backlogs, this checkout's and that one's in turn on
one broker, and prints the pairs' ratios: rate, and CPU per session of the job and of its
task thread (steadier than the rate).

Runners: the Kafka worker (``eddies worker``: orchestrator and executor in one process) and
the Flink job at parallelism 1 (``eddies flink run --executor``: the session machine in a
local Flink mini-cluster, the executor in the same process). Targets on these 2-core
machines (issue 31): Flink >= half the worker's sessions/s; Flink idle p50 <= 50 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from eddies.connectors.kafka.broker import free_port

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
assert _spec is not None and _spec.loader is not None
kb: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)

AGENT = "eddies.demo:one_turn_agent"


def start(runner: str, bootstrap: str, app: str, tmp: Path,
          root: Path = ROOT) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
               TMPDIR=str(tmp), EDDIES_FLINK_REST_PORT=str(free_port()))
    common = ["--app", app, "--bootstrap-servers", bootstrap, "--partitions", str(kb.PARTITIONS),
              "--agent", AGENT]
    cmd = (["worker", *common] if runner == "worker" else
           ["flink", "run", *common, "--executor", "--checkpoint-dir", str(tmp / "cp" / app)])
    python = sys.executable if root == ROOT else str(root / ".venv" / "bin" / "python")
    return subprocess.Popen([python, "-m", "eddies", *cmd], cwd=root, env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.environ.get("BENCH_LOG", os.devnull), "ab"),
                            start_new_session=True)


def finish(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the Flink run's JVM, if it outlived it
            os.killpg(proc.pid, signal.SIGKILL)


def _stat(path: str) -> list[str] | None:
    """The fields of a /proc ``stat`` file after the command name (None: it is gone)."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _ticks(fields: list[str]) -> int:
    return int(fields[11]) + int(fields[12])  # user + system


def group_stats(pgid: int) -> dict[str, list[str]]:
    """The processes of group ``pgid`` (the runner's: its JVM included): pid -> stat fields."""
    out: dict[str, list[str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(f"/proc/{pid}/stat")
        if fields is not None and int(fields[2]) == pgid:
            out[pid] = fields
    return out


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the processes of group ``pgid``."""
    return sum(map(_ticks, group_stats(pgid).values())) / os.sysconf("SC_CLK_TCK")


def threads_cpu_s(pgid: int) -> dict[str, float]:
    """CPU seconds used so far by each thread of the processes of group ``pgid``, by name
    (digits dropped, so a pool's threads count as one)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in group_stats(pgid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = "".join(c for c in f.read().strip() if not c.isdigit())
            except OSError:
                continue
            fields = _stat(f"/proc/{pid}/task/{tid}/stat")
            if fields is not None:
                out[name] = out.get(name, 0.0) + _ticks(fields) / tick
    return out


#: (sessions/s, the runner's CPU us per session, its busiest thread's name and CPU us per
#: session, the broker's CPU us per session)
Backlog = tuple[float, float, str, float, float]


def backlog(runner: str, bootstrap: str, n: int, tmp: Path, broker_pid: int,
            root: Path = ROOT) -> Backlog:
    """Sessions per second, and CPU microseconds per session (see :data:`Backlog`)."""
    names = kb.fresh_app(bootstrap)
    kb.produce_prompts(bootstrap, names, n)
    started = kb.output_reader(bootstrap, names, names.events)
    reader = kb.output_reader(bootstrap, names)
    proc = start(runner, bootstrap, names.app, tmp, root)
    try:
        if not kb.wait_outputs(started, 1, 180):
            raise RuntimeError(f"the {runner} did not start")
        started.close()  # as bench/kafka.py's backlog: no background fetch of APP.events
        threads0, broker0 = threads_cpu_s(proc.pid), kb.cpu_seconds(broker_pid)
        cpu0, t0 = group_cpu_s(proc.pid), time.perf_counter()
        kb.expect_outputs(reader, n)
        elapsed, cpu = time.perf_counter() - t0, group_cpu_s(proc.pid) - cpu0
        broker = kb.cpu_seconds(broker_pid) - broker0
        used = {k: v - threads0.get(k, 0.0) for k, v in threads_cpu_s(proc.pid).items()}
        busiest = max(used, key=lambda k: used[k])
        return n / elapsed, cpu / n * 1e6, busiest, used[busiest] / n * 1e6, broker / n * 1e6
    finally:
        finish(proc)
        reader.close()


def latency(runner: str, bootstrap: str, samples: int, tmp: Path) -> list[float]:
    names = kb.fresh_app(bootstrap)
    proc = start(runner, bootstrap, names.app, tmp)
    reader = kb.output_reader(bootstrap, names)
    prod = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 0})
    try:
        prod.produce(names.input, kb.encode(kb.input_event("warm", "hi")), b"warm", headers=kb.HEADERS)
        prod.flush(10)
        if kb.wait_outputs(reader, 1, 180) != 1:
            raise RuntimeError(f"the {runner} did not answer the warm-up prompt")
        out = []
        for i in range(samples):
            out.append(kb.answer_ms(prod, reader, names, f"lat{i}", "ping"))
            time.sleep(0.02)
        return out
    finally:
        finish(proc)
        reader.close()


def against(other: Path, n: int, pairs: int) -> None:
    """Flink backlogs of this checkout's job and ``other``'s on one broker, in turn (the
    order swapped every pair): a change's cost or saving, where single runs move by more."""
    if not (other / ".venv" / "bin" / "python").exists():
        raise SystemExit(f"{other}/.venv/bin/python is missing: make install-flink there first")
    runs: dict[Path, list[Backlog]] = {ROOT: [], other: []}
    with tempfile.TemporaryDirectory(prefix="bench-flink-") as d, kb.EmbeddedBroker() as broker:
        assert broker.process is not None
        for k in range(pairs):
            for side in ((ROOT, other) if k % 2 == 0 else (other, ROOT)):
                b = backlog("flink", broker.bootstrap, n, Path(d), broker.process.pid, side)
                runs[side].append(b)
                print(f"pair {k + 1}: {side}: {b[0]:7,.0f} sessions/s, CPU {b[1]:5.0f} us per "
                      f"session, {b[2]!r} {b[3]:4.0f} us, broker {b[4]:4.0f} us", flush=True)

    def ratio(i: int) -> str:
        rs = [a[i] / b[i] for a, b in zip(runs[ROOT], runs[other], strict=True)]  # type: ignore[operator]
        return f"median {statistics.median(rs):.3f} ({', '.join(f'{r:.2f}' for r in rs)})"
    print(f"{ROOT} / {other}, {n} one-turn sessions, {pairs} pairs: sessions/s {ratio(0)}; "
          f"CPU per session {ratio(1)}; busiest thread's CPU per session {ratio(3)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20_000, help="one-turn sessions per burst")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--against", type=Path, metavar="CHECKOUT",
                        help="only the Flink job's backlogs, paired: this checkout's and "
                             "CHECKOUT's (with its own .venv), in turn")
    args = parser.parse_args()
    if args.against is not None:
        against(args.against.resolve(), args.sessions, args.repeats)
        return
    rates: dict[str, list[float]] = {"worker": [], "flink": []}
    cpus: dict[str, list[float]] = {"worker": [], "flink": []}
    busiest: dict[str, list[tuple[float, str]]] = {"worker": [], "flink": []}
    brokers: dict[str, list[float]] = {"worker": [], "flink": []}
    lat: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-flink-") as d, kb.EmbeddedBroker() as broker:
        tmp = Path(d)
        assert broker.process is not None, "the embedded broker runs as a process of its own"
        for _ in range(args.repeats):  # alternating: the machine's noise hits both alike
            for runner in rates:
                rate, cpu, thread, thread_cpu, broker_cpu = backlog(
                    runner, broker.bootstrap, args.sessions, tmp, broker.process.pid)
                rates[runner].append(rate)
                cpus[runner].append(cpu)
                busiest[runner].append((thread_cpu, thread))
                brokers[runner].append(broker_cpu)
        for runner in rates:
            lat[runner] = sorted(latency(runner, broker.bootstrap, args.latency_samples, tmp))
    print(f"embedded broker, {kb.PARTITIONS} partitions, {args.sessions} one-turn sessions "
          f"(scripted model), backlog timed from the first event to the last answer")
    base = statistics.median(rates["worker"])
    for runner, label in (("worker", "Kafka worker (1 process)"),
                          ("flink", "Flink job (parallelism 1, executor in process)")):
        r = statistics.median(rates[runner])
        ls = lat[runner]
        p50, p99 = statistics.median(ls), ls[min(len(ls) - 1, int(len(ls) * 0.99))]
        each = ", ".join(f"{x:,.0f}" for x in rates[runner])
        print(f"{label:48} {r:7,.0f} sessions/s ({r / base:.0%} of the worker; median of {each}); "
              f"CPU {statistics.median(cpus[runner]):,.0f} us/session (median); "
              f"idle latency p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(ls)} prompts)")
        top = sorted(busiest[runner])[len(busiest[runner]) // 2]
        print(f"{'':48} busiest thread {top[1]!r} {top[0]:,.0f} us/session; the broker "
              f"{statistics.median(brokers[runner]):,.0f} us/session (medians)")
    print("targets: Flink >= 50% of the worker's sessions/s; Flink idle p50 <= 50 ms")


if __name__ == "__main__":
    main()
