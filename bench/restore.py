"""What a partition with many sessions costs a worker that takes it: restore time and memory.

Run: ``.venv/bin/python bench/restore.py`` (``make bench-restore``; about 2 minutes for the
default sizes; ``--sizes 10000,100000,1000000`` adds the million, ~10 minutes). On one fresh
embedded broker, for each size N, an app of one partition:

1. one real worker answers one prompt of the scripted one-turn agent and stops: its
   session's snapshot (as the worker stamped and keyed it) is the template;
2. the journal gets N such snapshots, one per session (the template with its session id
   replaced), as a worker that had answered N sessions would have left it;
3. a worker process starts on the app: from its log lines, the time it takes to read the
   partition's journal, until the partition is ready (its records are applied from then
   on; a session is restored when a record of it arrives) and until every session is
   restored (those no record asked for, between batches), and its resident memory once it
   has (next to the same worker's on the template's app, with one session).

The sessions are idle (each answered its turn and waits for its next input), the common
case of a busy partition; with ``--waiting``, each sleeps on a durable timer an hour long
(``bench/waiting.py``'s agent): a restore then also issues each session's timer request
again, which the worker's executor holds until it is due. Target (issue 31): 100k
sessions per partition restored in under 2 s: the partition ready.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from eddies.connectors.runtime.client import read_records, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_kafka", ROOT / "bench" / "kafka.py")
assert _spec is not None and _spec.loader is not None
kb: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)


def count_waits(reader: Any, want: int, timeout_s: float) -> int:
    """bench/waiting.py's count of timer and signal requests issued."""
    spec = importlib.util.spec_from_file_location("bench_waiting", ROOT / "bench" / "waiting.py")
    assert spec is not None and spec.loader is not None
    waiting: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(waiting)
    return int(waiting.count_waits(reader, want, timeout_s))

#: The template's session id; every clone's has the same length (the state's JSON is
#: edited by replacing it).
TEMPLATE = "r000000000"
#: The agent of the sessions and the input of the template's (see --waiting).
AGENT = "eddies.demo:one_turn_agent"
PROMPT: Any = "hello"
#: A new session's prompt once the partition is ready, answered at once by either agent.
PROBE: Any = "hello"
ASSIGNED = re.compile(r"journal records read in (\d+) ms, ready in (\d+) ms")
RESTORED = re.compile(r": (\d+) sessions restored in (\d+) ms since they were assigned")


def start_worker(bootstrap: str, app: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
               EDDIES_LOG_LEVEL="INFO")
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", app, "--bootstrap-servers", bootstrap,
         "--partitions", "1", "--agent", AGENT],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def wait_log(worker: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str],
             timeout_s: float) -> tuple[int, int]:
    """The two numbers of ``pattern``'s first line in the worker's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = pattern.search(log.read_text(errors="replace"))
        if found:
            first, second = (int(g) for g in found.groups())
            return first, second
        if worker.poll() is not None:
            raise RuntimeError(f"the worker stopped: {log.read_text()[-2000:]}")
        time.sleep(0.01)
    raise RuntimeError(f"no {pattern.pattern!r} within {timeout_s} s")


def wait_assigned(worker: subprocess.Popen[bytes], log: Path, timeout_s: float) -> tuple[int, int, int, int]:
    """(journal read ms, ready ms, sessions restored, ms until all were) from the worker's
    log: its partition is ready (its records are applied) once its journal is read; its
    sessions are restored as their records arrive or between batches, until all are."""
    read_ms, ready_ms = wait_log(worker, log, ASSIGNED, timeout_s)
    count, all_ms = wait_log(worker, log, RESTORED, timeout_s)
    return read_ms, ready_ms, count, all_ms


def stop(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    worker.wait(60)


def template(bootstrap: str, logs: Path) -> tuple[TopicNames, bytes, bytes, float]:
    """An app whose journal holds one real session's snapshot: (names, its key, its value,
    the RSS in MB of a worker that restored it)."""
    names = TopicNames(f"restore{uuid.uuid4().hex[:6]}")
    ensure_topics(AdminClient({"bootstrap.servers": bootstrap}), names, 1)
    settings = Settings(app=names.app, bootstrap_servers=bootstrap, partitions=1)
    log = logs / f"{names.app}.log"
    worker = start_worker(bootstrap, names.app, log)
    reader = kb.output_reader(bootstrap, names)
    reader.assign([kb.TopicPartition(names.output, 0, kb.OFFSET_BEGINNING)])
    try:
        wait_assigned(worker, log, 90)
        send_input(settings, TEMPLATE, PROMPT)
        if AGENT == "eddies.demo:one_turn_agent":
            if kb.wait_outputs(reader, 1, 30) != 1:
                raise RuntimeError("the template session did not answer")
        else:  # sleeping: its timer request issued
            events = kb.output_reader(bootstrap, names, names.events)
            events.assign([kb.TopicPartition(names.events, 0, kb.OFFSET_BEGINNING)])
            try:
                if count_waits(events, 1, 30) != 1:
                    raise RuntimeError("the template session did not start its timer")
            finally:
                events.close()
    finally:
        reader.close()
        stop(worker)  # a stopping worker saves its sessions
    snaps = [(m.key(), m.value()) for m in read_records(settings, names.journal)
             if m.key() and m.key().startswith(b"snap") and m.value()]
    if not snaps:
        raise RuntimeError("the template session left no snapshot")
    key, value = snaps[-1]
    # Its RSS when it holds that one session, for the difference.
    worker = start_worker(bootstrap, names.app, log)
    try:
        wait_assigned(worker, log, 90)
        base = rss_mb(worker.pid)
    finally:
        stop(worker)
    return names, key, value, base


def fill(bootstrap: str, journal: str, key: bytes, value: bytes, n: int) -> None:
    """``n`` clones of the template's snapshot in partition 0 of ``journal``."""
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                     "queue.buffering.max.messages": 1_000_000})
    tk, tv = key, value
    sid = TEMPLATE.encode()
    for i in range(n):
        new = f"r{i:09d}".encode()
        while True:
            try:
                prod.produce(journal, tv.replace(sid, new), tk.replace(sid, new), partition=0)
                break
            except BufferError:
                prod.poll(0.1)
        if i % 10_000 == 0:
            prod.poll(0)
    if prod.flush(300):
        raise RuntimeError("the journal was not written")


def measure(bootstrap: str, n: int, key: bytes, value: bytes, logs: Path) -> dict[str, float]:
    names = TopicNames(f"restore{uuid.uuid4().hex[:6]}")
    ensure_topics(AdminClient({"bootstrap.servers": bootstrap}), names, 1)
    fill(bootstrap, names.journal, key, value, n)
    log = logs / f"{names.app}.log"
    settings = Settings(app=names.app, bootstrap_servers=bootstrap, partitions=1)
    reader = kb.output_reader(bootstrap, names)
    reader.assign([kb.TopicPartition(names.output, 0, kb.OFFSET_BEGINNING)])
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    prod.list_topics(names.input, timeout=10)  # connected before it is timed
    kb.wait_outputs(reader, 1, 0.5)  # and the reader fetching: its first fetch is not timed
    worker = start_worker(bootstrap, names.app, log)
    try:
        wait_log(worker, log, ASSIGNED, 600)
        # A new session's prompt as soon as the partition is ready: answered while the
        # partition's sessions are still being restored.
        asked = time.monotonic()
        send_input(settings, "probe", PROBE, prod=prod)
        prod.flush(10)
        if kb.wait_outputs(reader, 1, 60) != 1:
            raise RuntimeError("the probe was not answered")
        probe_ms = (time.monotonic() - asked) * 1000
        read_ms, ready_ms, count, all_ms = wait_assigned(worker, log, 600)
        rss = rss_mb(worker.pid)
    finally:
        reader.close()
        stop(worker)
    if count != n:
        raise RuntimeError(f"restored {count} sessions of {n}")
    return {"read_ms": read_ms, "ready_ms": ready_ms, "all_ms": all_ms, "rss_mb": rss,
            "probe_ms": probe_ms}


def main() -> None:
    global AGENT, PROMPT, PROBE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated session counts (one partition each)")
    parser.add_argument("--waiting", action="store_true",
                        help="sessions sleeping on an hour-long durable timer, not idle ones")
    args = parser.parse_args()
    if args.waiting:
        AGENT, PROMPT, PROBE = "bench.waiting:waiting_agent", {"sleep_s": 3600}, {"sleep_s": 0}
    sizes = [int(s) for s in args.sizes.split(",")]
    logs = Path(os.environ.get("BENCH_LOG_DIR", "/tmp")) / f"eddies-restore-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    with kb.EmbeddedBroker() as broker:
        _, key, value, base = template(broker.bootstrap, logs)
        kind = "sessions waiting on a timer" if args.waiting else "idle one-turn sessions"
        print(f"one partition, {kind}; a snapshot is {len(value)} bytes; a "
              f"worker holding one session: {base:.0f} MB resident")
        for n in sizes:
            r = measure(broker.bootstrap, n, key, value, logs)
            print(f"{n:>9,} sessions: journal read {r['read_ms']:,.0f} ms, partition ready "
                  f"{r['ready_ms'] / 1000:.2f} s (a new session's prompt then answered in "
                  f"{r['probe_ms']:,.0f} ms), every session restored {r['all_ms'] / 1000:.2f} s "
                  f"({r['all_ms'] * 1000 / n:.1f} us/session); resident {r['rss_mb']:,.0f} MB "
                  f"(+{(r['rss_mb'] - base) * 1024 * 1024 / n:,.0f} B/session)")


if __name__ == "__main__":
    main()
