"""The Flink runner: the same history as the Kafka worker, and a SIGKILL mid-stream that
repeats no completed model call."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import input_event, producer, read_events, send_event, send_input
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.events import (
    AgentEvent,
    ApprovalRequestEvent,
    CallKind,
    CallStatus,
    DurableCallResult,
    OutputEvent,
    encode,
    encode_value,
    partition_for,
)
from tests.integration.flink_job import ROOT, kill, leftovers, start_flink, stop, wait_submitted
from tests.openai_server import OpenAIServer

pytestmark = [pytest.mark.integration, pytest.mark.flink]

#: (agent, session, inputs): every session the conformance test runs through both runners.
#: Later agent features add theirs here.
CONFORMANCE = [
    ("tests.agents:react_agent", [
        ("react-1", ["first question", "a follow-up"]),
        ("react-2", ["another"]),
    ]),
    ("eddies.demo:calculator_agent", [
        ("calc-1", [{"a": 1, "b": 2}, {"a": 3, "b": 4}]),
        ("calc-2", [{"a": 10, "b": 20}]),
        ("calc-3", ["no tool needed"]),
    ]),
    # Inputs are stamped long ago (see _send_all): each wait is due at once, and its answer
    # is stamped at its due time, so both runners record the same history.
    ("tests.agents:shop_agent", [
        ("wait-timer", [{"sleep_s": 5}, {"sleep_s": 1}]),
        ("wait-signal", [{"signal": "go", "timeout_s": 2}]),
        ("wait-approval", ["refund o-1"]),  # its approval request is an output too
    ]),
    ("tests.agents:react_calculator", [
        ("rx-1", [{"a": 1, "b": 2}, {"a": 3, "b": 4}]),
        ("rx-loop", ["loop"]),  # stopped at max_iterations
    ]),
    ("tests.agents:reflect_agent", [
        ("rf-pass", ["a tagline", "another"]),  # each approved on its second draft
        ("rf-never", ["never good"]),  # NOT_APPROVED after three
        ("rf-unsure", ["unsure one"]),  # approved, but not confidently enough
    ]),
    # Sub-agents as tools: an internal ReAct reviewer and general-purpose, in child scopes.
    ("tests.agents:delegating_agent", [
        ("sub-1", ["the plan", "the next plan"]),
        ("sub-2", ["a draft"]),
    ]),
    # Its model streams: the executors a Flink job uses write APP.stream as a worker's do.
    ("tests.agents:streaming_travel_agent", [
        ("tr-1", ["Packing for Oslo and Rome?", "And Lisbon?"]),
        ("tr-2", ["What about Cairo?"]),
    ]),
]
#: The logical time of the first input _send_all sends (2023-11-14).
SENT_AT = 1_700_000_000_000


def _send_all(settings: Settings, sessions: list[tuple[str, list[object]]]) -> int:
    """Every session's inputs, turn by turn, then three records a runner must not simply
    apply: an undecodable one, an unsigned call result (both dead-lettered) and a prompt on
    the wrong partition (forwarded, then answered). The number of answers to expect."""
    prod = producer(settings)
    n = 0
    for turn in range(max(len(v) for _, v in sessions)):
        for sid, values in sessions:
            if turn < len(values):
                # Explicit ids and timestamps: the same inputs for both runners.
                send_event(settings, input_event(sid, values[turn], f"{sid}-in{turn}",
                                                 SENT_AT + n), "input", prod)
                n += 1
    sid = sessions[0][0]
    names = TopicNames(settings.app)
    prod.produce(names.input, b"\x00not avro", sid.encode(), headers=HEADERS)
    forged = AgentEvent.external(sid, DurableCallResult(
        f"{sid}:r1:i1:c0", CallKind.TOOL, CallStatus.OK, "1", None, 1), event_id="forged",
        timestamp=1)
    prod.produce(names.input, encode(forged), sid.encode(), headers=HEADERS)
    wrong = (partition_for("misrouted", settings.partitions) + 1) % settings.partitions
    prod.produce(names.input, encode(input_event("misrouted", "hello", "misrouted-in0", 1)),
                 b"misrouted", partition=wrong, headers=HEADERS)
    prod.flush(30)
    return n + 1


def _dead_letters(settings: Settings, count: int, timeout: float = 60) -> list[tuple[str, str, str]]:
    """(key, reason, source partition/offset) of each dead letter, once ``count`` are there."""
    from eddies.connectors.runtime.client import read_records
    from eddies.connectors.runtime.records import DLQ_REASON_HEADER, DLQ_SOURCE_HEADER, header

    deadline = time.monotonic() + timeout
    while True:
        dead = list(read_records(settings, TopicNames(settings.app).dlq))
        if len(dead) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    return sorted({((m.key() or b"").decode(), (header(m.headers(), DLQ_REASON_HEADER) or b"").decode(),
                    (header(m.headers(), DLQ_SOURCE_HEADER) or b"").decode().split(".input/")[-1])
                   for m in dead})


def _wait_outputs(settings: Settings, count: int, timeout: float,
                  proc: subprocess.Popen[bytes] | None = None, log: Path | None = None,
                  ) -> list[AgentEvent]:
    """The records of APP.output (answers, approval requests) once ``count`` answers are."""
    deadline = time.monotonic() + timeout
    got: list[AgentEvent] = []
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"flink run exited with {proc.returncode}:\n"
                                 + (log.read_text()[-4000:] if log else ""))
        got = list(read_events(settings, TopicNames(settings.app).output))
        if len({e.event_id for e in got if isinstance(e.payload, OutputEvent)}) >= count:
            return got
        time.sleep(0.3)
    return got


def _history(settings: Settings) -> dict[str, list[tuple[str, int, str, str]]]:
    """Each session's events as (id, seq, type, payload), once per id, in seq order."""
    seen: dict[str, dict[str, tuple[str, int, str, str]]] = {}
    for e in read_events(settings, TopicNames(settings.app).events):
        payload = _comparable(e)
        seen.setdefault(e.session_id, {})[e.event_id] = (e.event_id, e.seq, e.type, payload)
    return {sid: sorted(evs.values(), key=lambda r: r[1]) for sid, evs in seen.items()}


def _streamed(settings: Settings) -> dict[tuple[str, int], list[str]]:
    """Each run's model replies as a follower of APP.stream reads them (the stream's
    contract: each call's newest execution), in the order the calls started."""
    from eddies.connectors.runtime.client import read_records
    from eddies.connectors.streaming.following import StreamFollower
    from eddies.events.stream import StreamKind, decode_stream

    view = StreamFollower()  # call ids name their session: one follower reads them all
    calls: dict[tuple[str, int], dict[str, None]] = {}
    for msg in read_records(settings, TopicNames(settings.app).stream, timeout=10):
        rec = decode_stream(msg.value())
        view.add(rec)
        if rec.kind is StreamKind.DELTA and rec.text:
            calls.setdefault((rec.session_id, rec.run), {})[rec.call_id] = None
    return {key: [view.text(call_id) for call_id in run] for key, run in calls.items()}


def _comparable(e: AgentEvent) -> str:
    """The payload as JSON, without what an executor stamps from its wall clock."""
    from eddies.events import to_record

    record = to_record(e)["payload"]
    return encode_value(record)


@pytest.mark.parametrize(("agent", "sessions"), CONFORMANCE, ids=[a for a, _ in CONFORMANCE])
def test_flink_job_writes_the_history_the_worker_writes(
        settings: Settings, tmp_path: Path, agent: str, sessions: list[tuple[str, list[object]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from eddies.connectors.runtime.settings import load_agent
    from tests.agents import REVIEWER_DELAY_ENV

    # Sub-agents that run at once answer in the order their calls return: the same order
    # in both runners, so that their histories can be compared event by event.
    monkeypatch.setenv(REVIEWER_DELAY_ENV, "0.5")

    worker_app = replace(settings, app=settings.app + "w", agent=agent)
    flink_app = replace(settings, app=settings.app + "f", agent=agent)
    w = Worker(worker_app, load_agent(agent)).start()
    try:
        assert w.wait_assigned(60)
        expected = _send_all(worker_app, sessions)
        by_worker = _wait_outputs(worker_app, expected, 90)
        worker_dlq = _dead_letters(worker_app, 2)
    finally:
        w.stop()
    log = tmp_path / "flink.log"
    proc = start_flink(flink_app, agent, log, tmp=tmp_path / "tmp", checkpoints=tmp_path / "cp",
                       extra=["--executor"])
    try:
        wait_submitted(proc, log)
        assert _send_all(flink_app, sessions) == expected
        by_flink = _wait_outputs(flink_app, expected, 120, proc, log)
        flink_dlq = _dead_letters(flink_app, 2)
        # Its progress lines count what the session machine did (its Flink metrics).
        deadline = time.monotonic() + 20
        failed = sum(1 for e in {e.event_id: e for e in by_worker}.values()
                     if isinstance(e.payload, OutputEvent) and e.payload.error is not None)
        shown = f"job running: {expected - failed} answers" + (f" ({failed} failed)" if failed else "")
        while shown not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
    finally:
        assert stop(proc) == 0, log.read_text()[-4000:]
    assert leftovers(tmp_path / "tmp") == []

    assert len({e.event_id for e in by_worker if isinstance(e.payload, OutputEvent)}) == expected
    # Consumers drop event ids they have seen (at-least-once sinks may write one again).
    assert sorted({(e.event_id, e.session_id, e.seq, _comparable(e)) for e in by_flink}) == \
        sorted({(e.event_id, e.session_id, e.seq, _comparable(e)) for e in by_worker})
    # The same records refused, for the same reasons, with the same sources.
    assert len(worker_dlq) == 2 and flink_dlq == worker_dlq, (worker_dlq, flink_dlq)
    worker_history, flink_history = _history(worker_app), _history(flink_app)
    assert set(worker_history) == {sid for sid, _ in sessions} | {"misrouted"}
    for sid in worker_history:
        assert flink_history[sid] == worker_history[sid], sid
    if agent.endswith("shop_agent"):  # each kind of wait really ran, and ended as expected
        outs = {e.session_id: e.payload.output for e in by_flink if isinstance(e.payload, OutputEvent)}
        assert outs["wait-signal"] == "timeout"
        assert outs["wait-approval"].startswith("error: ApprovalTimeout: tool 'refund' was not approved")
        asks = {e.event_id: e.session_id for e in by_flink if isinstance(e.payload, ApprovalRequestEvent)}
        # Once each, after dropping seen ids ("misrouted" asks the model too).
        assert sorted(asks.values()) == ["misrouted", "wait-approval"]
    if agent.endswith("react_calculator"):
        errors = {e.session_id: p.error.type for e in by_flink
                  if isinstance(p := e.payload, OutputEvent) and p.error is not None}
        assert errors.get("rx-loop") == "MaxIterationsError" and "rx-1" not in errors, errors
    if agent.endswith("react_calculator"):  # the runaway's oldest round was trimmed
        trims = {sid for sid, events in flink_history.items() for _, _, kind, payload in events
                 if kind == "DurableCallResult" and '\\"trimmed\\":2' in payload}  # JSON in JSON
        assert trims == {"rx-loop"}, trims
    if agent.endswith("reflect_agent"):
        outs = {(e.session_id, e.run): (p.output["status"], p.output["iterations"]) for e in by_flink
                if isinstance(p := e.payload, OutputEvent) and e.session_id.startswith("rf-")}
        assert outs == {("rf-pass", 1): ("APPROVED", 2), ("rf-pass", 2): ("APPROVED", 2),
                        ("rf-never", 1): ("NOT_APPROVED", 3), ("rf-unsure", 1): ("NOT_APPROVED", 3)}, outs
    if agent.endswith("delegating_agent"):  # the sub-agents ran in their scopes, answered once
        outs = {(e.session_id, e.run): p.output for e in by_flink
                if isinstance(p := e.payload, OutputEvent) and e.session_id.startswith("sub-")}
        assert outs == {("sub-1", 1): '"reviewed, score 16" | "summary of the plan"',
                        ("sub-1", 2): '"reviewed, score 21" | "summary of the next plan"',
                        ("sub-2", 1): '"reviewed, score 15" | "summary of a draft"'}, outs
        assert all(not e.scope for e in by_flink)  # a sub-agent's OutputEvent answers its caller only
        scoped = {e.scope[0].split("@")[0] for e in read_events(flink_app, TopicNames(flink_app.app).events)
                  if e.scope}
        assert scoped == {"reviewer", "general-purpose"}
    if agent.endswith("streaming_travel_agent"):  # each answer was streamed as it was written
        streamed = _streamed(flink_app)
        assert streamed == _streamed(worker_app)
        outs = {(e.session_id, e.run): p.output for e in by_flink
                if isinstance(p := e.payload, OutputEvent) and e.session_id.startswith("tr-")}
        assert sorted(outs) == [("tr-1", 1), ("tr-1", 2), ("tr-2", 1)], outs
        for (sid, run), output in outs.items():
            assert streamed[sid, run][-1] == output, (sid, run, streamed)
    # A ten-round ReAct run really ran ten tool rounds.
    if agent.endswith("react_agent"):
        outs = [e.payload for e in by_flink
                if isinstance(e.payload, OutputEvent) and e.session_id != "misrouted"]
        assert all(p.output == "done after 10 tool results" for p in outs), outs


def test_flink_killed_mid_stream_resumes_from_its_checkpoint(settings: Settings, tmp_path: Path) -> None:
    """SIGKILL to the job (and its JVM) while sessions make model calls through a separate
    executor to a counting OpenAI-compatible server; restarted, it restores its newest
    checkpoint and finishes every session without repeating a completed model call."""
    agent = "tests.integration.agents:http_calculator"
    server = OpenAIServer(delay=0.2).start()
    sessions = [f"s{i}" for i in range(12)]
    env = {"TEST_OPENAI_BASE": server.base_url, "TEST_EFFECTS": str(tmp_path / "effects.log")}
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    executor = subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--role", "executor", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", agent],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), LITELLM_LOCAL_MODEL_COST_MAP="True",
                           LITELLM_OFFLINE_MODE="true", **env),
        stdout=(tmp_path / "executor.log").open("ab"), stderr=subprocess.STDOUT)
    log = tmp_path / "flink.log"
    tmp, cps = tmp_path / "tmp", tmp_path / "cp"
    try:
        first = start_flink(settings, agent, log, tmp=tmp, checkpoints=cps, env=env,
                            extra=["--no-executor"])
        wait_submitted(first, log)
        prod = producer(settings)
        for k in range(2):
            for s in sessions:
                send_input(settings, s, json.dumps({"a": k, "b": int(s[1:])}), prod=prod)
        prod.flush(30)
        before = _wait_outputs(settings, 8, 120, first, log)
        assert len({e.event_id for e in before}) >= 8, log.read_text()[-3000:]
        # A checkpoint taken after some sessions finished: the restart restores it.
        assert list(cps.glob("*/chk-*/_metadata")), "no checkpoint before the kill"
        kill(first)
        done_at_kill = len({e.event_id for e in read_events(settings, TopicNames(settings.app).output)})
        assert done_at_kill < 24, "the kill came too late to test anything"
        assert leftovers(tmp), "a killed run leaves its temporary files (removed by the next)"

        second = start_flink(settings, agent, log, tmp=tmp, checkpoints=cps, env=env,
                             extra=["--no-executor"])
        try:
            line = wait_submitted(second, log, runs=2)
            assert f"restoring {cps}" in line, line
            got = _wait_outputs(settings, 24, 180, second, log)
        finally:
            assert stop(second) == 0, log.read_text()[-4000:]
    finally:
        executor.terminate()
        executor.wait(30)
        server.stop()
    assert leftovers(tmp) == []

    unique = {e.event_id: e for e in got}
    runs = Counter((e.session_id, e.run) for e in unique.values())
    assert set(runs) == {(s, r) for s in sessions for r in (1, 2)} and max(runs.values()) == 1, \
        sorted(runs)
    for e in unique.values():
        assert isinstance(e.payload, OutputEvent) and e.payload.error is None, e.payload
        assert e.payload.output == f"The result is {e.run - 1 + int(e.session_id[1:])}."
    # The model server saw each distinct request once: completed calls were not made again
    # (requests the restored job sent again were answered from the executor's journal).
    bodies = Counter(json.dumps(r["messages"], sort_keys=True) for r in server.requests)
    assert len(bodies) == 48, len(bodies)  # two model calls per run
    repeated = {b: n for b, n in bodies.items() if n > 1}
    assert not repeated, f"{len(repeated)} model calls were made again"
    effects = Counter(line.split()[1] for line in (tmp_path / "effects.log").read_text().splitlines())
    assert effects == Counter({f"{k}+{int(s[1:])}": 1 for k in range(2) for s in sessions}), effects


def test_flink_stop_with_a_savepoint_then_resume_from_it(settings: Settings, tmp_path: Path) -> None:
    """``eddies flink stop --savepoint DIR`` stops the job; ``--from-savepoint DIR`` continues
    the sessions where they were (their second inputs are their second runs), here on the
    other state backend (a savepoint's canonical format restores on either) and at
    parallelism 2: the first run chains its source to the session machine (parallelism 1),
    the second shuffles by key, and the sessions' state is found by key group in both."""
    from eddies.connectors.kafka.broker import free_port

    env = {"EDDIES_FLINK_REST_PORT": str(free_port())}
    agent = "eddies.demo:calculator_agent"
    sessions = [("a", [{"a": 1, "b": 1}, {"a": 2, "b": 2}]), ("b", [{"a": 3, "b": 3}, {"a": 4, "b": 4}])]
    log, tmp, cps, sp = tmp_path / "flink.log", tmp_path / "tmp", tmp_path / "cp", tmp_path / "sp"
    first = start_flink(settings, agent, log, tmp=tmp, checkpoints=cps, env=env, extra=["--executor"])
    try:
        wait_submitted(first, log)
        prod = producer(settings)
        for sid, values in sessions:
            send_input(settings, sid, values[0], event_id=f"{sid}-0", prod=prod)
        prod.flush(30)
        assert len(_wait_outputs(settings, 2, 120, first, log)) >= 2
        stopped = subprocess.run(
            [sys.executable, "-m", "eddies", "flink", "stop", "--savepoint", str(sp), "--app", settings.app],
            cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        assert first.wait(60) == 0, log.read_text()[-3000:]  # the job finished: the run ends
    finally:
        if first.poll() is None:
            kill(first)
    [savepoint] = [m.parent for m in sp.glob("*/_metadata")]
    assert f"--from-savepoint {savepoint}" in stopped.stderr, stopped.stderr

    # The directory given to stop is enough (as docs/operations/flink.md shows): its savepoint is found.
    second = start_flink(settings, agent, log, tmp=tmp, checkpoints=cps, env=env,
                         extra=["--executor", "--from-savepoint", str(sp),
                                "--state-backend", "rocksdb", "--parallelism", "2"])
    try:
        line = wait_submitted(second, log, runs=2)
        assert f"restoring {savepoint}" in line and "rocksdb state" in line, line
        assert "parallelism 2" in line, line
        prod = producer(settings)
        for sid, values in sessions:
            send_input(settings, sid, values[1], event_id=f"{sid}-1", prod=prod)
        prod.flush(30)
        got = _wait_outputs(settings, 4, 120, second, log)
    finally:
        assert stop(second) == 0, log.read_text()[-3000:]
    outputs = {(e.session_id, e.run): e.payload for e in got}
    assert set(outputs) == {(sid, r) for sid, _ in sessions for r in (1, 2)}
    for (sid, run), payload in outputs.items():
        assert isinstance(payload, OutputEvent)
        args = dict(sessions)[sid][run - 1]
        assert isinstance(args, dict) and payload.output == f"The result is {args['a'] + args['b']}."


def test_flink_one_sessions_failure_is_that_sessions(settings: Settings, tmp_path: Path) -> None:
    """On the Flink job as on the worker (issue 53): a non-deterministic session's run
    fails with JournalMismatchError, a session the engine fails for halts alone, and the
    job never fails or restarts: every other session is answered."""
    log = tmp_path / "flink.log"
    proc = start_flink(settings, "tests.integration.agents:unsteady_agent", log, tmp=tmp_path / "tmp",
                       checkpoints=tmp_path / "cp", env={"TEST_ENGINE_DEFECT": "halt"})
    try:
        wait_submitted(proc, log)
        prod = producer(settings)
        sessions = ["ok1", "bad1", "ok2", "halt1", "ok3"]
        for s in sessions:
            send_input(settings, s, "one", prod=prod)
        prod.flush(30)
        got = _wait_outputs(settings, len(sessions), 180, proc, log)
    finally:
        assert stop(proc) == 0, log.read_text()[-4000:]
    outs = {e.session_id: e.payload for e in got if isinstance(e.payload, OutputEvent)}
    assert set(outs) == set(sessions), log.read_text()[-4000:]
    for s in ("ok1", "ok2", "ok3"):
        assert outs[s].error is None and outs[s].output == [0, "one"]
    assert outs["bad1"].error is not None and outs["bad1"].error.type == "JournalMismatchError"
    halted = outs["halt1"]
    assert halted.error is not None and halted.error.type == "SessionHaltedError"
    assert isinstance(halted.output, dict) and halted.output["fault"] is True
    # No task failed (a restart is announced as "job ID failed in TASK: ...").
    assert not re.search(r"job \S+ failed", log.read_text()), log.read_text()[-4000:]
