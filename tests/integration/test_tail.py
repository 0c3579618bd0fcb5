"""``eddies tail`` as a user runs it, in a subprocess: ``--session`` keeps the records of
the sessions named, read from their partitions."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from eddies.connectors.inspect.summary import describe
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import producer, read_events, read_records, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.demo import calculator_agent
from eddies.events import partition_for
from tests.integration.test_worker import outputs
from tests.integration.workers import ROOT

pytestmark = pytest.mark.integration

SESSIONS = [f"u{i}" for i in range(8)]


def _tail(settings: Settings, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "eddies", "tail", "--from-beginning", "--no-follow", "--app",
         settings.app, "--bootstrap-servers", settings.bootstrap_servers, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_tail_shows_only_the_sessions_asked_for(settings: Settings) -> None:
    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        prod = producer(settings)
        # Not Avro, and on a partition u5 does not hash to: dead-lettered where it came.
        elsewhere = (partition_for("u5", settings.partitions) + 1) % settings.partitions
        prod.produce(TopicNames(settings.app).input, b"not avro", b"u5", partition=elsewhere)
        for i, sid in enumerate(SESSIONS):
            send_input(settings, sid, json.dumps({"a": i, "b": 1}), prod=prod)
        prod.flush(30)
        assert len(outputs(settings, len(SESSIONS))) == len(SESSIONS)
        dlq = TopicNames(settings.app).dlq
        for _ in range(100):
            if list(read_records(settings, dlq)):
                break
            time.sleep(0.2)
    finally:
        worker.stop()
    history = [e for e in read_events(settings, TopicNames(settings.app).events) if e.session_id == "u3"]
    assert len(history) > 5
    assert _tail(settings, "--topic", "events", "--session", "u3") == [f"u3:{describe(e)}" for e in history]
    assert sorted(_tail(settings, "--session", "u1", "--session", "u6")) == [
        'u1 run 1: "The result is 2."', 'u6 run 1: "The result is 7."']
    assert _tail(settings, "--session", "nobody") == []
    [dead] = _tail(settings, "--topic", "dlq", "--session", "u5")
    assert dead.startswith(f"{elsewhere}/0: ") and "Avro" in dead, dead
    assert _tail(settings, "--topic", "dlq", "--session", "u4") == []
    assert len(_tail(settings)) == len(SESSIONS)  # and without it, every session's
