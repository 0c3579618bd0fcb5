"""Human approval on the Kafka worker, with the model reached through litellm over real
HTTP: a tool call approved with ``eddies approve`` runs once; one rejected with ``eddies
reject`` and one left unanswered past its deadline never run, and the model sees why. The
requests are in APP.output and ``eddies tail`` shows how to answer them; replays call
nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import input_event, producer, read_events, send_event
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.engine import AgentPlan
from eddies.events import AgentEvent, ApprovalRequestEvent, OutputEvent
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration
AGENT = "tests.integration.agents:approving_calculator"


def _output(settings: Settings) -> list[AgentEvent]:
    return list(read_events(settings, TopicNames(settings.app).output))


def _cli(settings: Settings, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "eddies", *args, "--app", settings.app, "--bootstrap-servers",
         settings.bootstrap_servers], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_approved_rejected_and_unanswered_tool_calls(settings: Settings, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    server = OpenAIServer().start()
    log, effects = tmp_path / "worker.log", tmp_path / "effects"
    effects.touch()
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url,
                          TEST_EFFECTS=str(effects))
    now = int(time.time() * 1000)
    try:
        prod = producer(settings)
        send_event(settings, input_event("yes", '{"a": 2, "b": 3}'), "input", prod)
        send_event(settings, input_event("no", '{"a": 4, "b": 5}'), "input", prod)
        # Sent as if 27 s ago: its 30 s approval deadline comes 3 s from now.
        send_event(settings, input_event("late", '{"a": 6, "b": 7}', timestamp=now - 27_000),
                   "input", prod)
        prod.flush(30)

        def asks() -> dict[str, ApprovalRequestEvent]:
            return {e.session_id: e.payload for e in _output(settings)
                    if isinstance(e.payload, ApprovalRequestEvent)}

        wait_until("three approval requests in APP.output", lambda: len(asks()) == 3, worker, log, timeout=60)
        got = asks()
        assert {s: (a.tool, a.arguments) for s, a in got.items()} == {
            "yes": ("add", {"a": 2, "b": 3}), "no": ("add", {"a": 4, "b": 5}),
            "late": ("add", {"a": 6, "b": 7})}
        assert got["late"].deadline == now - 27_000 + 30_000
        assert effects.read_text() == ""  # nothing ran before a person said so
        shown = _cli(settings, "tail", "--from-beginning", "--no-follow")
        assert "APPROVAL NEEDED by " in shown
        assert f"eddies approve yes {got['yes'].signal} --app {settings.app}" in shown  # pasted, it works
        assert "approved" in _cli(settings, "approve", "yes", got["yes"].signal)
        assert "rejected" in _cli(settings, "reject", "no", got["no"].signal, "--reason", "too big")
        wait_until("three answers", lambda: sum(isinstance(e.payload, OutputEvent)
                                            for e in _output(settings)) >= 3, worker, log, timeout=60)
        time.sleep(0.5)  # anything repeated would arrive now
    finally:
        stop_worker(worker)
        server.stop()
    answers = {e.session_id: e.payload.output for e in _output(settings)
               if isinstance(e.payload, OutputEvent)}
    assert answers["yes"] == "The result is 5."
    assert answers["no"].startswith("The result is error: ApprovalRejected: a person rejected this "
                                    "call of tool 'add': too big")
    assert answers["late"].startswith("The result is error: ApprovalTimeout: tool 'add' was not "
                                      "approved within 30 s")
    assert [line.split()[:2] for line in effects.read_text().splitlines()] == [["tool", "2+3"]]
    assert len(server.requests) == 6  # a model call before and after each tool round
    monkeypatch.setenv("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # a replay calls nothing
    from tests.integration.agents import approving_calculator

    plan = AgentPlan.compile(approving_calculator())
    for session in ("yes", "no", "late"):
        report = replay(plan, load_history(settings, session), session)
        assert report.ok and not report.extra, session


@pytest.mark.parametrize("roles", [("all",), ("orchestrator", "executor")], ids=["one", "separate"])
def test_an_ended_run_leaves_nothing_held_in_the_executor(settings: Settings, roles: tuple[str, ...]
                                                          ) -> None:
    """The hour-long deadline of an approved call is not kept (nor, in an executor process,
    its request's offset uncommitted) once its run has ended: the worker's own executor is
    told directly, an executor process by a cancel record on APP.requests."""
    from dataclasses import replace

    from eddies.connectors.kafka.worker import Worker
    from eddies.connectors.runtime.client import signal_event
    from eddies.engine import approval
    from tests.agents import shop_agent

    workers = [Worker(replace(settings, role=role), shop_agent(3_600_000)).start() for role in roles]
    executor = workers[-1].executor
    try:
        assert all(w.wait_assigned(60) for w in workers)
        send_event(settings, input_event("s1", "refund o-1"), "input")
        deadline = time.monotonic() + 60
        while not (asks := [e.payload for e in _output(settings)
                            if isinstance(e.payload, ApprovalRequestEvent)]) or not len(executor.held):
            assert time.monotonic() < deadline, "no approval request held"
            time.sleep(0.2)
        assert len(executor.held) == 1  # the approval's deadline
        send_event(settings, signal_event("s1", asks[0].signal, approval.answer(True)), "signal")
        while not any(isinstance(e.payload, OutputEvent) for e in _output(settings)):
            assert time.monotonic() < deadline, "no answer"
            time.sleep(0.2)
        while len(executor.held) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(executor.held) == 0
        assert workers[0].counters.get("cancels") == 1
    finally:
        for w in reversed(workers):
            w.stop()
