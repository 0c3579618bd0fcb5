"""Time travel on a real broker: strict replay from a snapshot in the middle of a long
session, a changed agent's events shown side by side, a fork at a step, and a reprocess of
an offset range into another app; the model is reached through litellm over real HTTP at
a local server that counts its calls."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from eddies.connectors.inspect.replay import load_history, replay_session, snapshots_of
from eddies.connectors.local.rerun import FORK_HEADER, fork_session, reprocess
from eddies.connectors.runtime.client import read_records, send_input
from eddies.connectors.runtime.records import header
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.engine import AgentPlan, ResourceType
from eddies.events import AgentEvent, CallKind, DurableCallRequest, InputEvent, OutputEvent, partition_for
from tests.integration.agents import http_calculator, worded_http_calculator
from tests.integration.workers import ROOT, answers, eddies_command, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

SESSION = "long"
INPUTS = [f'{{"a": {n}, "b": {n * 10}}}' for n in range(1, 13)]


@pytest.fixture(scope="module")
def recorded(bootstrap: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Settings, OpenAIServer]]:
    """A session of twelve runs (each a model call, the add tool, a model call), answered
    one after another by a worker, so that it was snapshotted between runs; a pause after
    the eighth puts seconds between what came before and after on the record clock. Made
    once for the module's tests, which only read it (or write other sessions and apps)."""
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"t{uuid.uuid4().hex[:10]}", "partitions": 4})
    server = OpenAIServer().start()
    log = tmp_path_factory.mktemp("time-travel") / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:http_calculator", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        for n, prompt in enumerate(INPUTS, 1):
            send_input(settings, SESSION, prompt)
            wait_until(f"answer {n}", lambda n=n: len(answers(settings)) >= n, worker, log)
            if n == 8:
                time.sleep(2.5)
        time.sleep(0.5)  # the last run's snapshot
    finally:
        stop_worker(worker)
    before = os.environ.get("TEST_OPENAI_BASE")
    os.environ["TEST_OPENAI_BASE"] = server.base_url  # the agents the tests build call it
    yield settings, server
    server.stop()
    if before is None:
        os.environ.pop("TEST_OPENAI_BASE", None)
    else:
        os.environ["TEST_OPENAI_BASE"] = before


def _inputs(history: list[tuple[int, AgentEvent]]) -> list[AgentEvent]:
    return [ev for _, ev in history if isinstance(ev.payload, InputEvent) and not ev.scope]


def test_replay_from_the_middle_starts_at_a_snapshot_and_reads_only_from_there(
        recorded: tuple[Settings, OpenAIServer]) -> None:
    settings, server = recorded
    asked = len(server.requests)
    history = load_history(settings, SESSION)
    tenth = _inputs(history)[9]
    assert len(snapshots_of(settings, SESSION)) >= 10  # one after each run
    report = replay_session(settings, AgentPlan.compile(http_calculator()), SESSION, from_seq=tenth.seq)
    assert report.ok, [(s.status, s.seq) for s in report.mismatches]
    # The latest snapshot before step K: the ninth run's end, just before the tenth input.
    assert report.snapshot_seq == tenth.seq - 1
    # app.events read from near that snapshot on: not the first eight runs.
    first_offset = {ev.event_id: o for o, ev in history}
    eighth_out = [ev for _, ev in history if isinstance(ev.payload, OutputEvent)][7]
    assert report.read_from_offset > first_offset[eighth_out.event_id]
    assert report.records_read == sum(1 for _, ev in history if ev.seq > report.snapshot_seq)
    assert [s.recorded for s in report.steps] == [ev for _, ev in history if ev.seq >= tenth.seq]
    assert len(server.requests) == asked  # strict: no call made
    # --to-seq bounds it; --from-offset names the start by its offset on app.events.
    to = replay_session(settings, AgentPlan.compile(http_calculator()), SESSION,
                        from_offset=first_offset[tenth.event_id], to_seq=tenth.seq + 3)
    assert to.ok and [s.seq for s in to.steps] == list(range(tenth.seq, tenth.seq + 4))


def test_a_changed_agent_shows_exactly_its_changed_events_side_by_side(
        recorded: tuple[Settings, OpenAIServer]) -> None:
    settings, _ = recorded
    history = load_history(settings, SESSION)
    tenth = _inputs(history)[9]
    report = replay_session(settings, AgentPlan.compile(worded_http_calculator()), SESSION,
                            from_seq=tenth.seq)
    outputs = [ev for _, ev in history if isinstance(ev.payload, OutputEvent) and ev.seq >= tenth.seq]
    assert [(s.status, s.recorded) for s in report.mismatches] == [("changed", ev) for ev in outputs]
    for step in report.mismatches:
        assert step.recorded is not None and isinstance(step.recorded.payload, OutputEvent)
        assert step.differences() == [("payload.output", step.recorded.payload.output,
                                       f"Answer: {step.recorded.payload.output}")]
    # The command shows each one beside the recorded event, field by field; exit code 1.
    done = subprocess.run(
        [sys.executable, "-m", "eddies", "replay", "--session", SESSION, "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--from-seq", str(tenth.seq),
         "--agent", "tests.integration.agents:worded_http_calculator"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert f"from the snapshot at step {tenth.seq - 1}" in out
    assert out.count("payload.output") == len(outputs) == 3
    assert '"The result is 110."' in out and '"Answer: The result is 110."' in out  # 10 + 100
    assert f"replay of {SESSION}: 3 changed, 0 moved, 0 not recomputed, 0 new" in out


def _with_model(agent: Any, model: str) -> Any:
    agent.resources = [r if r.type is not ResourceType.CHAT_MODEL else
                       dataclasses.replace(r, obj=dataclasses.replace(r.obj, model=model))
                       for r in agent.resources]
    return agent


def test_a_fork_reuses_the_calls_before_its_step_and_goes_on_live_with_another_model(
        recorded: tuple[Settings, OpenAIServer]) -> None:
    settings, server = recorded
    history = [ev for _, ev in load_history(settings, SESSION)]
    tenth = _inputs([(0, e) for e in history])[9]
    # Step K: the tenth run's first model call answered (it asked for add), nothing after.
    first_answer = next(ev for ev in history if ev.run == tenth.run and ev.type == "DurableCallResult")
    before = [ev.payload.call_id for ev in history if isinstance(ev.payload, DurableCallRequest)
              and ev.seq < first_answer.seq and ev.payload.kind is not CallKind.TIMER]
    asked = len(server.requests)
    report = fork_session(settings, AgentPlan.compile(_with_model(http_calculator(), "openai/other-model")),
                          SESSION, first_answer.seq, "long-fork")
    assert report.inputs == 10
    assert report.reused == [cid.replace(SESSION, "long-fork", 1) for cid in before]
    assert [c.rsplit(":", 1)[1] for c in report.live] == ["c0", "c0"]  # the tool, then the model
    new_requests = server.requests[asked:]
    assert [r["model"] for r in new_requests] == ["other-model"]  # one live model call, after K
    assert [o.payload.output for o in report.outputs][:9] == [
        f"The result is {n * 11}." for n in range(1, 10)]  # recorded outcomes, not called again
    assert report.outputs[9].payload.output == "The result is 110."
    # Its steps up to K are the first session's: same types at the same places, same content.
    fork_history = [ev for _, ev in load_history(settings, "long-fork")]
    assert [(e.seq, e.type, e.run, e.payload if e.type == "OutputEvent" else None)
            for e in fork_history if e.seq <= first_answer.seq] == [
        (e.seq, e.type, e.run, e.payload if e.type == "OutputEvent" else None)
        for e in history if e.seq <= first_answer.seq]
    # The fork is a session of the app like any other, and says where it came from.
    forked = [m for m in read_records(settings, TopicNames(settings.app).events)
              if m.key() == b"long-fork"]
    assert forked and all(header(m.headers(), FORK_HEADER) == f"{SESSION}@{first_answer.seq}".encode()
                          for m in forked)
    trace = subprocess.run(
        [sys.executable, "-m", "eddies", "trace", "--session", "long-fork", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert trace.returncode == 0, trace.stderr
    assert trace.stdout.count("run ") >= 10 and "tool add(a=10, b=100) -> OK 110" in trace.stdout
    assert f"long-fork is a fork of session {SESSION} at step {first_answer.seq}" in trace.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "eddies", "trace", "--session", "long-fork", "--json", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers], cwd=ROOT, capture_output=True, text=True,
        timeout=120)
    tree = json.loads(as_json.stdout)
    assert tree["forked_from"] == f"{SESSION}@{first_answer.seq}" and len(tree["runs"]) == 10
    tenth_run = tree["runs"][9]
    assert [c["kind"] for c in tenth_run["children"]] == ["event", "model", "event", "event", "model",
                                                          "event", "output"]
    assert tenth_run["children"][1]["children"][0]["label"] == "add(a=10, b=100)"


def test_reprocess_runs_an_offset_range_into_another_app_reusing_the_calls_that_match(
        recorded: tuple[Settings, OpenAIServer]) -> None:
    settings, server = recorded
    names = TopicNames(settings.app)
    part = partition_for(SESSION, settings.partitions)
    offsets = [m.offset() for m in read_records(settings, names.input, partitions=[part])
               if m.key() == SESSION.encode() and b"InputEvent" in m.value()]
    target = dataclasses.replace(settings, app=settings.app + "-v2")
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(target.app), settings.partitions)
    asked = len(server.requests)
    # Same calls, other words: every call answered from the recording, none made.
    report = reprocess(settings, target, AgentPlan.compile(worded_http_calculator()),
                       from_offsets={part: offsets[9]})
    assert report.inputs == 3 and report.sessions == [SESSION]
    assert len(report.reused) == 9 and report.live == [] and len(server.requests) == asked
    assert [o.payload.output for o in report.outputs] == [
        f"Answer: The result is {n * 11}." for n in (10, 11, 12)]
    assert [e.payload.output for e in answers(target)] == [o.payload.output for o in report.outputs]
    # Another model: its calls differ (made live), the tool calls are the same (reused).
    again = dataclasses.replace(settings, app=settings.app + "-v3")
    ensure_topics(AdminClient(settings.client_config()), TopicNames(again.app), settings.partitions)
    other = AgentPlan.compile(_with_model(http_calculator(), "openai/other-model"))
    report = reprocess(settings, again, other, from_offsets={part: offsets[9]})
    assert len(report.live) == 6 and len(report.reused) == 3
    kinds = {ev.payload.call_id: ev.payload.kind for _, ev in load_history(again, SESSION)
             if isinstance(ev.payload, DurableCallRequest)}
    assert {kinds[c] for c in report.reused} == {CallKind.TOOL}
    assert {kinds[c] for c in report.live} == {CallKind.CHAT_MODEL}
    assert [r["model"] for r in server.requests[asked:]] == ["other-model"] * 6
    assert [o.payload.output for o in report.outputs] == [f"The result is {n * 11}." for n in (10, 11, 12)]


def _eddies(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return eddies_command(settings, *args, env={"COLUMNS": "200"})  # tables not cut


def test_the_fork_and_reprocess_commands_say_which_calls_were_reused_and_which_made_live(
        recorded: tuple[Settings, OpenAIServer]) -> None:
    settings, server = recorded
    history = [ev for _, ev in load_history(settings, SESSION)]
    last_of_second = max(ev.seq for ev in history if ev.run == 2)
    asked = len(server.requests)
    done = _eddies(settings, "fork", "--session", SESSION, "--at-seq", str(last_of_second),
                   "--to", "long-cli", "--agent", "tests.integration.agents:http_calculator",
                   "--set", "llm.model=openai/other")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"forked {SESSION} at step {last_of_second} into long-cli" in done.stdout
    assert "2 inputs" in done.stdout and "from the recording: 6, made live: 0" in done.stdout
    assert "The result is 22." in done.stdout and len(server.requests) == asked
    bad = _eddies(settings, "fork", "--session", SESSION, "--at-seq", "9999", "--to", "x",
                  "--agent", "tests.integration.agents:http_calculator")
    assert bad.returncode == 2 and "--at-seq 9999 is not one of them" in bad.stderr
    bad = _eddies(settings, "fork", "--session", SESSION, "--at-seq", "3", "--to", "x",
                  "--agent", "tests.integration.agents:http_calculator", "--set", "llm.temperature=1")
    assert bad.returncode == 2 and "FIELD one of model, prompt, connection" in bad.stderr

    part = partition_for(SESSION, settings.partitions)
    offsets = [m.offset() for m in read_records(settings, TopicNames(settings.app).input, partitions=[part])
               if m.key() == SESSION.encode() and b"InputEvent" in m.value()]
    done = _eddies(settings, "reprocess", "--from-offset", f"{part}:{offsets[11]}", "--to-app",
                   settings.app + "-cli", "--agent", "tests.integration.agents:http_calculator",
                   "--set", "model=openai/other")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reprocessed 1 sessions of {settings.app} into {settings.app}-cli" in done.stdout
    assert "from the recording: 1, made live: 2" in done.stdout  # the tool call; the two model calls
    assert done.stdout.count("live") >= 2 and "recorded outcome" in done.stdout
    assert len(server.requests) == asked + 2
    bad = _eddies(settings, "reprocess", "--to-app", settings.app + "-x")
    assert bad.returncode == 2 and "give one of --from-offset and --from-time" in bad.stderr
    inputs = TopicNames(settings.app).input
    end = 1 + max(m.offset() for m in read_records(settings, inputs, partitions=[part]))
    started = time.monotonic()
    bad = _eddies(settings, "reprocess", "--from-offset", f"{part}:{end + 100}", "--to-app",
                  settings.app + "-x", "--agent", "tests.integration.agents:http_calculator")
    assert bad.returncode == 2 and f"--from-offset {part}:{end + 100} is past the end of " \
        f"{settings.app}.input partition {part} (its next offset is {end})" in bad.stderr, bad.stderr
    assert time.monotonic() - started < 20  # said at once, not after the read's 30 s wait
