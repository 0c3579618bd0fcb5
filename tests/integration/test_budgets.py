"""A budget stops a tool loop in the Kafka worker: the model, reached through litellm over
real HTTP, reports its tokens; the run that goes over its budget ends, named."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import OutputEvent
from tests.integration.workers import start_worker, stop_worker
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def test_a_run_budget_stops_a_tool_loop(settings: Settings, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:budgeted_calculator", log,
                          TEST_OPENAI_BASE=server.base_url)
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
        stop_worker(worker)
        server.stop()
    [out] = outputs
    assert out.error is not None and out.error.type == "BudgetExceededError"
    assert "run.max_total_tokens=20 (30 tokens spent)" in out.error.message
    assert len(server.requests) == 2  # the loop stopped at the call that went over
    from tests.integration.agents import budgeted_calculator

    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    assert replay(AgentPlan.compile(budgeted_calculator()), load_history(settings, "spender"),
                  "spender").ok
