"""Scaling out and back in under load never repeats a side effect.

Worker processes join and leave one group (1 -> 2 -> 3 -> 2 -> 1, stopped with SIGTERM,
none killed) while sessions run slow non-idempotent functions and tools that record each
execution in a file. Every input must be answered once, correctly (no unknown outcome:
nothing was killed), and every side effect must have run exactly once.

``SCALE_OUT_RUNS=N`` repeats the whole scenario N times (the issue's bar is 5 in a row).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.events import AgentEvent, OutputEvent
from tests.integration.sessions import sessions_on_every_partition

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

#: Session numbers n of sessions "s{n}", four on every partition.
SESSIONS = sorted(int(s[1:]) for s in sessions_on_every_partition("s", 4, 4))
RUNS = int(os.environ.get("SCALE_OUT_RUNS", "1"))


def start_worker(settings: Settings, slot: str, effects: Path, log: Path, role: str = "all",
                 agent: str = "tests.integration.agents:effects_agent",
                 extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TEST_EFFECTS=str(effects), TEST_EFFECT_DELAY="1.0",
               EDDIES_INSTANCE_ID=slot, EDDIES_EXECUTOR_CONCURRENCY="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true", EDDIES_LOG_LEVEL="INFO",
               **(extra_env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", agent, "--role", role],
        cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )


def outputs(settings: Settings) -> dict[str, AgentEvent]:
    return {e.event_id: e for e in read_events(settings, TopicNames(settings.app).output)}


class Feeder(threading.Thread):
    """Sends one input every ``every`` seconds, round robin over the sessions, until stopped."""

    def __init__(self, settings: Settings, every: float) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.every = every
        self.halt = threading.Event()
        self.sent: list[tuple[int, int]] = []  # (session number, its input number)

    def run(self) -> None:
        prod = producer(self.settings)
        counts = Counter[int]()
        i = 0
        while not self.halt.is_set():
            s = SESSIONS[i % len(SESSIONS)]
            n = counts[s]
            counts[s] += 1
            send_input(self.settings, f"s{s}", json.dumps({"a": s, "b": n}), prod=prod)
            prod.poll(0)
            self.sent.append((s, n))
            i += 1
            self.halt.wait(self.every)
        prod.flush(30)


@pytest.mark.parametrize("attempt", range(RUNS))
@pytest.mark.parametrize("layout", ["all", "split"])
def test_scale_out_and_in_under_load_repeats_no_side_effect(
        settings: Settings, tmp_path: Path, layout: str, attempt: int) -> None:
    """``all``: workers with both roles scale 1 -> 2 -> 3 -> 1. ``split``: one orchestrator
    process stays; executor processes (``--role executor``, their own group on
    APP.requests) scale 1 -> 2 -> 3 -> 1."""
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    effects = tmp_path / "effects.log"
    effects.touch()
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    procs: list[subprocess.Popen[bytes]] = []  # w0, w1, w2: the workers that scale
    role = "all" if layout == "all" else "executor"
    stable: list[subprocess.Popen[bytes]] = []  # an orchestrator process (split)
    feeder = Feeder(settings, every=0.8)
    try:
        if layout == "split":
            stable.append(start_worker(settings, "o", effects, tmp_path / "o.log", "orchestrator"))
            logs.append(tmp_path / "o.log")
        procs.append(start_worker(settings, "w0", effects, logs[0], role))
        deadline = time.monotonic() + 60  # the first worker answers before the load starts
        send_input(settings, "warmup", json.dumps({"a": 99, "b": 0}))
        while not outputs(settings) and time.monotonic() < deadline:
            assert procs[0].poll() is None, logs[0].read_text()[-3000:]
            time.sleep(0.2)
        feeder.start()
        time.sleep(3)
        for action, at in [("start", 1), ("start", 2), ("stop", 2), ("stop", 1)]:
            if action == "start":
                procs.append(start_worker(settings, f"w{at}", effects, logs[at], role))
                # Until the newcomer performs calls: the group has moved partitions to it.
                deadline = time.monotonic() + 60
                while str(procs[at].pid) not in effects.read_text():
                    assert procs[at].poll() is None, logs[at].read_text()[-3000:]
                    assert time.monotonic() < deadline, f"w{at} got no work\n{logs[at].read_text()}"
                    time.sleep(0.2)
                time.sleep(2)
            else:
                procs[at].send_signal(signal.SIGTERM)
                assert procs[at].wait(60) == 0, logs[at].read_text()[-3000:]
                time.sleep(3)
        time.sleep(2)
        feeder.halt.set()
        feeder.join(30)
        expected = len(feeder.sent) + 1
        deadline = time.monotonic() + 120
        got = outputs(settings)
        while len(got) < expected and time.monotonic() < deadline:
            assert all(p.poll() is None for p in (procs[0], *stable)), logs[0].read_text()[-3000:]
            time.sleep(0.5)
            got = outputs(settings)
    finally:
        feeder.halt.set()
        for p in procs + stable:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs + stable:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()

    tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2500:]}" for log in logs)
    runs = Counter((e.session_id, e.run) for e in got.values())
    assert len(got) == expected, f"{len(got)} answers for {expected} inputs\n{tails}"
    assert max(runs.values()) == 1
    for e in got.values():
        payload = e.payload
        assert isinstance(payload, OutputEvent)
        assert payload.error is None, f"{e.session_id} run {e.run}: {payload.error}\n{tails}"
    answers = sorted(e.payload.output for e in got.values() if e.session_id != "warmup")  # type: ignore[attr-defined]
    assert answers == sorted(f"The result is {s + n}." for s, n in feeder.sent)

    lines = [line.split() for line in effects.read_text().splitlines()]
    executions = Counter((kind, what) for kind, what, _pid in lines)
    repeated = {k: n for k, n in executions.items() if n > 1}
    assert not repeated, f"side effects repeated: {repeated}\n{tails}"
    wanted = {("fn", f"s{s}/{n}") for s, n in feeder.sent} | {("tool", f"{s}+{n}") for s, n in feeder.sent}
    assert set(executions) - {("fn", "s99/0"), ("tool", "99+0")} == wanted
    assert len({pid for *_, pid in lines}) == 3  # every worker performed calls
