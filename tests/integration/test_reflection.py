"""ReflectionAgent on the Kafka worker, drafter and critic reached through litellm over
real HTTP: one tagline approved on its second draft, one not approved after two; the
loop's drafts and critiques are in the session's history, ``eddies replay`` shows them
and calls nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.inspect.replay import load_history
from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import OutputEvent
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def writer_and_editor(body: dict[str, Any]) -> dict[str, Any]:
    """The writer drafts "v1", then "v2" from the feedback; the editor passes a v2 draft
    unless the task says "never"."""
    ask = body["messages"][-1]["content"]
    if body["model"].endswith("writer"):
        text = "Frogs leap, v2" if "Your previous draft" in ask else "Frogs, v1"
    elif "Frogs leap, v2" in ask and "never" not in ask:
        text = "APPROVED - it leaps now. confidence: 0.9"
    else:
        text = "REVISE: say what the frog does."
    return {"role": "assistant", "content": text}


def _outputs(settings: Settings) -> dict[str, Any] | None:
    seen = {e.session_id: e.payload.output for e in read_events(settings, TopicNames(settings.app).output)
            if isinstance(e.payload, OutputEvent)}
    return seen if len(seen) == 2 else None


def test_a_reflection_loop_on_the_worker(settings: Settings, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer(responder=writer_and_editor).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:reflection_http", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        prod = producer(settings)
        send_input(settings, "good", "a tagline for a frog", prod=prod)
        send_input(settings, "bad", "a tagline that never works", prod=prod)
        prod.flush(30)
        outs = wait_until("both outcomes", lambda: _outputs(settings), worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    assert outs["good"] == {"status": "APPROVED", "draft": "Frogs leap, v2", "iterations": 2,
                            "confidence": 0.9, "feedback": "it leaps now. confidence: 0.9"}
    assert outs["bad"]["status"] == "NOT_APPROVED" and outs["bad"]["iterations"] == 2
    assert outs["bad"]["draft"] == "Frogs leap, v2"
    assert len(server.requests) == 8  # two drafts and two critiques each
    loop = [e.type for _, e in load_history(settings, "good") if e.type.startswith("Reflection")]
    assert loop == ["ReflectionDraft", "ReflectionCritique", "ReflectionDraft", "ReflectionCritique"]
    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    shown = subprocess.run(
        [sys.executable, "-m", "eddies", "replay", "--session", "good", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers,
         "--agent", "tests.integration.agents:reflection_http"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.count("ReflectionDraft") == 2 and shown.stdout.count("ReflectionCritique") == 2
    assert "every id recomputed identically" in shown.stdout
