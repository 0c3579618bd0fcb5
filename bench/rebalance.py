"""What a rebalance costs, on the embedded broker: the output gap on a survivor's own
partitions while another worker joins or dies, and the time from SIGKILL to the victim's
sessions answering again when it is restarted at once.

Run: ``.venv/bin/python bench/rebalance.py`` (``make bench-rebalance``, about 2 min). One
fresh embedded broker; worker processes (``eddies worker``, the one-turn agent on the
scripted model) with their own ``instance_id``; prompts of 200 sessions at ``--rate`` per
second throughout; a reader of ``APP.output`` notes when each answer arrives and on which
partition. Which worker owns which partition comes from the workers' INFO log lines.

1. join: worker A alone, then B starts. Survivor gap: the longest time between two answers
   on the partitions A keeps, from B's start until B answers (+2 s), next to the same
   measure in the seconds before (what the prompt rate alone gives).
2. death: A and B settled, B killed with SIGKILL. Survivor gap on A's partitions until
   A answers for B's, and the failover time (kill to the first answer on B's partitions).
3. restart: A and B settled, B killed with SIGKILL and started again at once under the
   same ``instance_id``: time from the kill to the first answer on B's partitions;
   ``--restarts`` times, median.
4. decided: A and B each in the middle of slow non-idempotent calls (a function that takes
   a minute, ``tests.integration.agents:effects_agent``), B killed with SIGKILL and not
   restarted: the time from the kill until each of B's calls is decided (its session
   answers UNKNOWN: A found B gone from the app's groups), ``--decides`` times, median.
   ``outcome_wait_ms`` is 120 s: what the wait alone would take.

Targets: survivor gap under 1 s; restart-to-answers under 5 s (median) (issue 8); a dead
claimant's calls decided within 15 s of its death, median (issue 28).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from eddies.connectors.kafka.broker import EmbeddedBroker
from eddies.connectors.runtime.client import input_event, next_batch
from eddies.connectors.runtime.records import HEADERS as EVENT_HEADERS
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.events import encode

#: The event headers, typed as confluent-kafka's produce() takes them.
HEADERS: list[tuple[str, str | bytes | None]] = list(EVENT_HEADERS)

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 4
SESSIONS = 200
LOGS = Path(tempfile.mkdtemp(prefix="eddies-rebalance-"))
_LINE = re.compile(
    r"orchestrator (assigned partitions|partitions revoked:|partitions lost[^:]*:) \[([\d, ]*)\]")


class WorkerProc:
    """A worker process and what its log says it owns."""

    def __init__(self, bootstrap: str, app: str, slot: str, session_timeout_ms: int,
                 agent: str = "eddies.demo:one_turn_agent", **env_extra: str) -> None:
        self.slot = slot
        self.log = LOGS / f"{app}-{slot}-{uuid.uuid4().hex[:4]}.log"
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
                   EDDIES_LOG_LEVEL="INFO", EDDIES_INSTANCE_ID=slot,
                   EDDIES_SESSION_TIMEOUT_MS=str(session_timeout_ms), **env_extra)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eddies", "worker", "--app", app, "--bootstrap-servers", bootstrap,
             "--partitions", str(PARTITIONS), "--agent", agent],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.log.open("ab"))

    def stamp(self, needle: str) -> float | None:
        """Wall-clock time of this worker's first log line containing ``needle``."""
        if not self.log.exists():
            return None
        for line in self.log.read_text(errors="replace").splitlines():
            if needle in line and line[:4].isdigit():
                when = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                return when.timestamp()
        return None

    def owned(self) -> set[int]:
        parts: set[int] = set()
        if not self.log.exists():
            return parts
        for kind, numbers in _LINE.findall(self.log.read_text(errors="replace")):
            got = {int(n) for n in numbers.split(",") if n.strip()}
            parts = parts | got if kind.startswith("assigned") else parts - got
        return parts

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Load:
    """Prompts at a steady rate; answers noted as (time received, partition)."""

    def __init__(self, bootstrap: str, names: TopicNames, rate: float) -> None:
        self.bootstrap, self.names, self.rate = bootstrap, names, rate
        self.answers: list[tuple[float, int]] = []
        self._halt = threading.Event()
        self._threads = [threading.Thread(target=self._feed, daemon=True),
                         threading.Thread(target=self._read, daemon=True)]
        for t in self._threads:
            t.start()

    def _feed(self) -> None:
        prod = Producer({"bootstrap.servers": self.bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5})
        i = 0
        t0 = time.monotonic()
        while not self._halt.is_set():
            sid = f"s{i % SESSIONS}"
            prod.produce(self.names.input, encode(input_event(sid, f"hello {i}")), sid.encode(),
                         headers=HEADERS)
            prod.poll(0)
            i += 1
            wait = t0 + i / self.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        prod.flush(10)

    def _read(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 5})
        c.assign([TopicPartition(self.names.output, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not self._halt.is_set():
            for m in next_batch(c, 1000, 0.05):
                if not m.error():
                    self.answers.append((time.monotonic(), m.partition()))
        c.close()

    def stop(self) -> None:
        self._halt.set()
        for t in self._threads:
            t.join(10)

    def first_after(self, t: float, parts: set[int], timeout: float = 60) -> float:
        """When the first answer on ``parts`` arrived after ``t`` (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for when, p in list(self.answers):
                if when > t and p in parts:
                    return when
            time.sleep(0.05)
        raise RuntimeError(f"no answer on partitions {sorted(parts)} within {timeout} s")

    def gap(self, parts: set[int], start: float, end: float) -> float:
        """The longest time without an answer on ``parts`` within [start, end]."""
        times = [start, *sorted(w for w, p in self.answers if p in parts and start <= w <= end), end]
        return max(b - a for a, b in itertools.pairwise(times))


def settled(workers: list[WorkerProc], timeout: float = 60) -> None:
    """Wait until the workers' partitions are disjoint and cover all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = [w.owned() for w in workers]
        if all(owned) and sum(map(len, owned)) == PARTITIONS and len(set().union(*owned)) == PARTITIONS:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the group did not settle: {[sorted(w.owned()) for w in workers]}")


def fresh_app(bootstrap: str) -> TopicNames:
    names = TopicNames(f"rb{uuid.uuid4().hex[:6]}")
    ensure_topics(AdminClient({"bootstrap.servers": bootstrap}), names, PARTITIONS)
    return names


def join(bootstrap: str, rate: float, timeout_ms: int) -> tuple[float, float, float]:
    """(baseline gap, survivor gap, the moved partitions' gap) as B joins A."""
    names = fresh_app(bootstrap)
    load = Load(bootstrap, names, rate)
    a = WorkerProc(bootstrap, names.app, "a", timeout_ms)
    b = None
    try:
        settled([a])
        load.first_after(time.monotonic(), set(range(PARTITIONS)))
        time.sleep(4)
        t_join = time.monotonic()
        b = WorkerProc(bootstrap, names.app, "b", timeout_ms)
        settled([a, b])
        moved = b.owned()
        assigned = b.stamp("orchestrator assigned")
        assert assigned is not None
        answered = load.first_after(time.monotonic() - (time.time() - assigned), moved)
        end = answered + 2
        time.sleep(max(0.0, end - time.monotonic()))
        kept = a.owned()
        return (load.gap(kept, t_join - 4, t_join), load.gap(kept, t_join, end),
                load.gap(moved, t_join, end))
    finally:
        load.stop()
        for w in (a, b):
            if w is not None:
                w.stop()


def death(bootstrap: str, rate: float, timeout_ms: int,
          restart: bool) -> tuple[float, float, list[float]]:
    """(survivor gap, seconds from SIGKILL to the first answer on the victim's partitions,
    and with ``restart`` the seconds from SIGKILL to the new process joining and to its
    assignment)."""
    names = fresh_app(bootstrap)
    load = Load(bootstrap, names, rate)
    a = WorkerProc(bootstrap, names.app, "a", timeout_ms)
    b = WorkerProc(bootstrap, names.app, "b", timeout_ms)
    again = None
    try:
        settled([a, b])
        load.first_after(time.monotonic(), set(range(PARTITIONS)))
        time.sleep(3)
        kept, victims = a.owned(), b.owned()
        t_kill, wall_kill = time.monotonic(), time.time()
        b.kill()
        if restart:
            again = WorkerProc(bootstrap, names.app, "b", timeout_ms)
        answered = load.first_after(t_kill + 0.2, victims)
        end = answered + 2
        time.sleep(max(0.0, end - time.monotonic()))
        phases = []
        if again is not None:
            for needle in ("joining the groups", "orchestrator assigned"):
                when = again.stamp(needle)
                phases.append(when - wall_kill if when is not None else float("nan"))
        return load.gap(kept, t_kill, end), answered - t_kill, phases
    finally:
        load.stop()
        for w in (a, b, again):
            if w is not None:
                w.stop()


def decided(bootstrap: str, timeout_ms: int) -> list[float]:
    """Seconds from B's SIGKILL until each call B was running is decided (see scenario 4)."""
    import json

    from eddies.connectors.runtime.client import read_events, send_input
    from eddies.connectors.runtime.settings import load_settings
    from eddies.events import OutputEvent, partition_for

    names = fresh_app(bootstrap)
    settings = load_settings(env={}, overrides={"bootstrap_servers": bootstrap, "app": names.app,
                                                "partitions": PARTITIONS})
    effects = LOGS / f"{names.app}-effects"
    slow = {"TEST_EFFECTS": str(effects), "TEST_EFFECT_DELAY": "60",
            "EDDIES_OUTCOME_WAIT_MS": "120000"}
    agent = "tests.integration.agents:effects_agent"
    a = WorkerProc(bootstrap, names.app, "a", timeout_ms, agent, **slow)
    b = WorkerProc(bootstrap, names.app, "b", timeout_ms, agent, **slow)
    try:
        settled([a, b])
        victims = b.owned()
        sessions = [f"d{i}" for i in range(4 * PARTITIONS)]
        theirs = {sid for sid in sessions if partition_for(sid, PARTITIONS) in victims}
        for i, sid in enumerate(sessions):
            send_input(settings, sid, json.dumps({"a": i, "b": 1}))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every charge running (one call thread each)
            if effects.exists() and effects.read_text().count("fn ") >= len(sessions):
                break
            time.sleep(0.1)
        t_kill = time.monotonic()
        b.kill()
        answered: dict[str, float] = {}
        while len(answered) < len(theirs) and time.monotonic() < t_kill + 150:
            for ev in read_events(settings, names.output):
                p = ev.payload
                if ev.session_id in theirs and isinstance(p, OutputEvent) and ev.session_id not in answered:
                    assert p.error is not None and p.error.type == "DurableCallUnknownError", p
                    answered[ev.session_id] = time.monotonic() - t_kill
            time.sleep(0.2)
        return sorted(answered.values()) + [float("inf")] * (len(theirs) - len(answered))
    finally:
        for w in (a, b):
            w.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="prompts per second")
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--decides", type=int, default=3)
    ap.add_argument("--scenarios", default="join,death,restart,decided",
                    help="which to run, comma-separated")
    ap.add_argument("--session-timeout-ms", type=int, default=0,
                    help="the workers' session_timeout_ms (default 0: the worker's choice for the broker)")
    args = ap.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap
        print(f"embedded broker, {PARTITIONS} partitions, {args.rate:.0f} prompts/s over "
              f"{SESSIONS} sessions, session_timeout_ms {args.session_timeout_ms or 'auto'}", flush=True)
        chosen = set(args.scenarios.split(","))
        if "join" in chosen:
            base, gap, moved = join(bs, args.rate, args.session_timeout_ms)
            print(f"join:    survivor gap {gap * 1000:.0f} ms (before the join: {base * 1000:.0f} ms); "
                  f"moved partitions' gap {moved:.1f} s", flush=True)
        if "death" in chosen:
            gap, failover, _ = death(bs, args.rate, args.session_timeout_ms, restart=False)
            print(f"death:   survivor gap {gap * 1000:.0f} ms; victim's partitions answering again "
                  f"after {failover:.1f} s (on the survivor)", flush=True)
        if "restart" in chosen:
            times, gaps = [], []
            for _ in range(args.restarts):
                gap, back, (joining, assigned) = death(bs, args.rate, args.session_timeout_ms,
                                                       restart=True)
                times.append(back)
                gaps.append(gap)
                print(f"restart: answering {back:.1f} s after SIGKILL (joining at {joining:.1f} s, "
                      f"assigned at {assigned:.1f} s); survivor gap {gap * 1000:.0f} ms", flush=True)
            print(f"restart: SIGKILL to the victim's sessions answering: median "
                  f"{statistics.median(times):.1f} s of {len(times)}; survivor gap max "
                  f"{max(gaps) * 1000:.0f} ms", flush=True)
        if "decided" in chosen:
            every: list[float] = []
            for _ in range(args.decides):
                took = decided(bs, args.session_timeout_ms)
                every += took
                print(f"decided: the victim's {len(took)} calls decided {took[0]:.1f}-{took[-1]:.1f} s "
                      f"after SIGKILL (no restart; outcome_wait_ms 120 s)", flush=True)
            print(f"decided: SIGKILL, no restart, to the victim's calls decided: median "
                  f"{statistics.median(every):.1f} s of {len(every)}, max {max(every):.1f} s",
                  flush=True)
    print(f"worker logs: {LOGS}")


if __name__ == "__main__":
    main()
