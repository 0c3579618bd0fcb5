"""A call whose claimant died is decided once the claimant has left the app's groups, not
after ``outcome_wait_ms``; a slow claimant that is alive is waited for."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eddies.connectors.kafka.liveness import GroupMembers
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.preflight import check_broker
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.events import AgentEvent, OutputEvent
from tests.integration.agents import effects_agent

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _worker_process(settings: Settings, effects: Path, log: Path, delay: float) -> subprocess.Popen[bytes]:
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    env = dict(os.environ, TEST_EFFECTS=str(effects), TEST_EFFECT_DELAY=str(delay),
               EDDIES_INSTANCE_ID="a", EDDIES_OUTCOME_WAIT_MS=str(settings.outcome_wait_ms),
               LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", "tests.integration.agents:effects_agent"],
        cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _outputs(settings: Settings, n: int, timeout: float) -> list[AgentEvent]:
    """The app's outputs, once there are ``n`` (or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while True:
        got = [e for e in read_events(settings, TopicNames(settings.app).output)
               if isinstance(e.payload, OutputEvent)]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def test_a_killed_claimants_call_is_decided_once_it_left_its_groups(
        settings: Settings, tmp_path: Path) -> None:
    settings = dataclasses.replace(settings, partitions=1, outcome_wait_ms=300_000)
    effects = tmp_path / "effects"
    proc = _worker_process(settings, effects, tmp_path / "a.log", delay=120)
    survivor = None
    try:
        send_input(settings, "s1", json.dumps({"a": 1, "b": 2}))
        _wait_for(lambda: effects.exists() and "fn s1/2" in effects.read_text(), 60,
                  "the first worker to start the charge")
        membership = Membership.for_broker(settings, check_broker(settings).cluster_id)
        assert any(c.slot == "a" for c in GroupMembers(settings, membership).claimants() or ())
        survivor = Worker(dataclasses.replace(settings, instance_id="b"), effects_agent()).start()
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(10)
        got = _outputs(settings, 1, timeout=120)
        decided = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
        if survivor is not None:
            survivor.stop()
    assert len(got) == 1
    error = got[0].payload.error  # type: ignore[union-attr]
    assert error is not None and error.type == "DurableCallUnknownError", got[0].payload
    # Decided by the claimant leaving its group, far inside outcome_wait_ms.
    assert decided < 60 and survivor.counters.get("claimants_dead") == 1
    assert effects.read_text().count("fn s1/2") == 1  # not run again


def test_a_slow_claimant_that_lives_is_waited_for(settings: Settings, tmp_path: Path) -> None:
    """A's calls outlast many liveness looks by B, which took one of their partitions over
    while they ran: B never takes A for dead, and passes on A's outcome."""
    from tests.integration.sessions import sessions_on_every_partition

    settings = dataclasses.replace(settings, partitions=2, outcome_wait_ms=300_000)
    effects = tmp_path / "effects"
    proc = _worker_process(settings, effects, tmp_path / "a.log", delay=10)
    sessions = sessions_on_every_partition("s", 2, 1)
    survivor = None
    try:
        for i, sid in enumerate(sessions):
            send_input(settings, sid, json.dumps({"a": i, "b": 2}))
        _wait_for(lambda: effects.exists() and effects.read_text().count("fn ") == 2, 60,
                  "the first worker to start both charges")
        survivor = Worker(dataclasses.replace(settings, instance_id="b"), effects_agent()).start()
        got = {e.session_id: e for e in _outputs(settings, len(sessions), timeout=120)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        if survivor is not None:
            survivor.stop()
    assert sorted(got) == sorted(sessions)
    assert all(e.payload.error is None for e in got.values()), got  # type: ignore[union-attr]
    assert survivor.counters.get("calls_awaited") >= 1  # B watched one of A's calls...
    assert survivor.counters.get("claimants_dead") == 0  # ...and never took A for dead
    assert effects.read_text().count("fn ") == 2
