"""ReActAgent on the Kafka worker, the model reached through litellm over real HTTP: a
failed model call halts the session (FAIL), its next input waits, ``eddies resume``
retries the input once the model answers again; replays call nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import OutputEvent
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def _outputs(settings: Settings) -> list[OutputEvent]:
    seen = {e.event_id: e.payload for e in read_events(settings, TopicNames(settings.app).output)
            if isinstance(e.payload, OutputEvent)}
    return list(seen.values())


def _at_least(n: int, outputs: list[OutputEvent]) -> list[OutputEvent] | None:
    return outputs if len(outputs) >= n else None


def test_a_halted_session_waits_and_resumes(settings: Settings, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer().start()
    server.fail(500)  # the first model call fails: not retried, so the session halts
    log, effects = tmp_path / "worker.log", tmp_path / "effects"
    worker = start_worker(settings, "tests.integration.agents:react_http", log,
                          TEST_OPENAI_BASE=server.base_url, TEST_EFFECTS=str(effects))
    try:
        prod = producer(settings)
        send_input(settings, "s1", '{"a": 2, "b": 3}', prod=prod)
        send_input(settings, "s1", '{"a": 4, "b": 5}', prod=prod)
        prod.flush(30)
        [halt] = wait_until("the halt announced", lambda: _outputs(settings), worker, log)
        assert halt.error is not None and halt.error.type == "SessionHaltedError"
        assert "eddies resume s1" in halt.error.message
        assert len(server.requests) == 1  # the second input waits behind the halted run
        # Loud in the log too, with what to do (and counted: eddies_sessions_halted_total).
        [line] = [x for x in log.read_text().splitlines() if "halted on ModelFailedError" in x]
        assert "ERROR" in line and f"eddies resume s1 --app {settings.app}" in line  # pasted, it works
        tail = subprocess.run(
            [sys.executable, "-m", "eddies", "tail", "--from-beginning", "--no-follow", "--app",
             settings.app, "--bootstrap-servers", settings.bootstrap_servers],
            cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert "s1 run 1: ERROR SessionHaltedError: session s1 halted on ModelFailedError" in tail.stdout
        done = subprocess.run(
            [sys.executable, "-m", "eddies", "resume", "s1", "--app", settings.app,
             "--bootstrap-servers", settings.bootstrap_servers],
            cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "resumed s1" in done.stdout
        outs = wait_until("both answers", lambda: _at_least(3, _outputs(settings)), worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    assert [o.output for o in outs[1:]] == ["The result is 5.", "The result is 9."]
    assert [line.split()[1] for line in effects.read_text().splitlines()] == ["2+3", "4+5"]
    again = subprocess.run(
        [sys.executable, "-m", "eddies", "resume", "s1", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "is not halted" in again.stderr
    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    from tests.integration.agents import react_http

    assert replay(AgentPlan.compile(react_http()), load_history(settings, "s1"), "s1").ok
