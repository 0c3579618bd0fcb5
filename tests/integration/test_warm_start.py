"""A worker makes its resources ready before it joins its groups (connectors/execution/
warming.py): with a model reached through litellm over real HTTP, litellm is imported
before the worker takes partitions, and no model call is made to do so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import OutputEvent
from tests.integration.workers import start_worker, stop_worker
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def test_a_worker_warms_its_model_before_it_joins_and_calls_nothing_to_do_so(
        settings: Settings, tmp_path: Path) -> None:
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:http_calculator", log,
                          TEST_OPENAI_BASE=server.base_url, EDDIES_LOG_LEVEL="INFO")
    try:
        deadline = time.monotonic() + 90
        while "assigned partitions" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        text = log.read_text()
        assert server.requests == []  # warming asked the model nothing
        # The connection (resource "offline") was warmed, before the worker joined.
        assert text.index("resources warmed: offline") < text.index("joining the groups"), text

        send_input(settings, "warm", '{"a": 2, "b": 3}')
        while not (outputs := list(read_events(settings, TopicNames(settings.app).output))):
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
    finally:
        stop_worker(worker)
        server.stop()
    [answer] = [e.payload for e in outputs]
    assert isinstance(answer, OutputEvent) and answer.error is None, answer
    assert len(server.requests) == 2  # the calculator's tool loop, and nothing more
