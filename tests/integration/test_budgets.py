"""A budget stops a tool loop in the Kafka worker: the model, reached through litellm over
real HTTP, reports its tokens; the run that goes over its budget ends, named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eddies.connectors.kafka.client import read_events, send_input
from eddies.connectors.kafka.replay import load_history, replay
from eddies.connectors.kafka.settings import Settings
from eddies.connectors.kafka.topics import TopicNames, ensure_topics
from eddies.engine import AgentPlan
from eddies.events import OutputEvent
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_run_budget_stops_a_tool_loop(settings: Settings, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    env = dict(os.environ, TEST_OPENAI_BASE=server.base_url, LITELLM_LOCAL_MODEL_COST_MAP="True",
               LITELLM_OFFLINE_MODE="true")
    worker = subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app, "--bootstrap-servers",
         settings.bootstrap_servers, "--partitions", str(settings.partitions), "--agent",
         "tests.integration.agents:budgeted_calculator"],
        cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        send_input(settings, "spender", '{"a": 2, "b": 3}')
        deadline = time.monotonic() + 90
        outputs: list[OutputEvent] = []
        while not outputs and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()[-3000:]
            outputs = [e.payload for e in read_events(settings, TopicNames(settings.app).output)
                       if isinstance(e.payload, OutputEvent)]
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        server.stop()
    [out] = outputs
    assert out.error is not None and out.error.type == "BudgetExceededError"
    assert "run.max_total_tokens=20 (30 tokens spent)" in out.error.message
    assert len(server.requests) == 2  # the loop stopped at the call that went over
    from tests.integration.agents import budgeted_calculator

    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    assert replay(AgentPlan.compile(budgeted_calculator()), load_history(settings, "spender"),
                  "spender").ok
