"""Sub-agents under a Kafka worker on the embedded broker: a worker SIGKILLed while its
sub-agent waits on a call, and restarted, finishes the session once, without running the
sub-agent's completed call again (the Flink conformance test runs sub-agents as tools)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_a_worker_killed_during_a_sub_agent_call_finishes_the_session_once(settings: Any,
                                                                          tmp_path: Path) -> None:
    from eddies.connectors.runtime.client import producer, send_input
    from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until

    effects, log = tmp_path / "effects.log", tmp_path / "worker.log"
    env = {"TEST_EFFECTS": str(effects), "TEST_EFFECT_DELAY": "3"}
    agent = "tests.integration.agents:delegates"
    worker = start_worker(settings, agent, log, **env)
    try:
        prod = producer(settings)
        send_input(settings, "s1", "job", prod=prod)
        prod.flush(30)
        wait_until("the sub-agent's second step", lambda: effects.exists() and "job-second" in
                   effects.read_text(), worker, log, timeout=90)
        worker.kill()  # the first step done and journaled, the second under way
        worker.wait(10)
        worker = start_worker(settings, agent, log, **env)

        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=90)
        time.sleep(1)  # nothing more comes
        assert len({e.event_id for e in answers(settings)}) == 1
    finally:
        stop_worker(worker)
    assert out.payload.error is None and not out.scope
    assert out.payload.output == ["charged job-first 1", "charged job-second 2"]
    # eddies replay recomputes it (calling nothing) and shows the child under its call.
    shown = subprocess.run(
        [sys.executable, "-m", "eddies", "replay", "--session", "s1", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--agent", agent],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
                 COLUMNS="250", **env))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "every id recomputed identically" in shown.stdout
    lines = shown.stdout.splitlines()
    call = next(i for i, line in enumerate(lines) if "SubagentCallEvent" in line)
    answer = next(i for i, line in enumerate(lines) if "SubagentResultEvent" in line)
    inside = [line for line in lines[call + 1:answer] if "#" in line]
    assert inside and all("| steps " in line for line in inside), lines
    assert any("| steps InputEvent" in line for line in inside)
    ran = [line.split()[1] for line in effects.read_text().splitlines()]
    assert ran.count("job-first/1") == 1  # completed before the kill: not run again
    assert ran.count("job-second/2") == 2  # under way at the kill (idempotent): run again


def test_three_in_parallel_one_timing_out_two_levels_deep(settings: Any, tmp_path: Path) -> None:
    """On the worker: three calls of a sub-agent that calls a sub-agent; the one that sleeps
    a minute is cut off at its 3 s timeout (its timer abandoned), the others answer."""
    from eddies.connectors.runtime.client import producer, read_events, send_input
    from eddies.connectors.runtime.topics import TopicNames
    from tests.integration.workers import answers, start_worker, stop_worker, wait_until

    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:fanout", log)
    names = TopicNames(settings.app)
    try:
        prod = producer(settings)
        send_input(settings, "s1", "go", prod=prod)
        prod.flush(30)
        started = time.monotonic()

        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=30)
        took = time.monotonic() - started
    finally:
        stop_worker(worker)
    assert out.payload.output == ["checked a", "SubagentTimeoutError", "checked c"]
    assert took < 20  # the minute's sleep did not hold the run
    history = list(read_events(settings, names.events))
    assert {len(e.scope) for e in history} == {0, 1, 2}  # two levels of sub-agents
    slow = next(e.scope for e in history if e.type == "InputEvent" and e.payload.input == "slow")
    assert [e.type for e in history if e.scope == slow] == ["InputEvent", "DurableCallRequest"]


def test_scope_isolation_on_the_worker(settings: Any, tmp_path: Path) -> None:
    """The reviewer's Note never reaches the root's action for Notes, its memory write is
    not the root's, and only the root's OutputEvent is an output."""
    from eddies.connectors.runtime.client import producer, read_events, send_input
    from eddies.connectors.runtime.topics import TopicNames
    from tests.integration.workers import answers, start_worker, stop_worker, wait_until

    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.unit.engine.test_subagents:root", log)
    names = TopicNames(settings.app)
    try:
        prod = producer(settings)
        send_input(settings, "s1", "draft", prod=prod)
        prod.flush(30)

        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=30)
        time.sleep(1)
        assert len(answers(settings)) == 1  # the child's OutputEvent is no output
    finally:
        stop_worker(worker)
    assert out.payload.output == {"ok": True, "said": "draft: fine (review 1 for nobody)", "error": None,
                                  "reviews_seen_by_root": None}
    history = list(read_events(settings, names.events))
    assert [e.action for e in history if e.type == "OutputEvent" and not e.scope] == ["start"]
    assert [e.scope for e in history if e.type == "Note"] == [("reviewer@i1c0",)]
