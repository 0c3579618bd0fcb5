"""A worker killed with SIGKILL mid-sessions and restarted finishes every session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from eddies.connectors.inspect.replay import load_history, replay
from eddies.connectors.runtime.client import producer, read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.engine import AgentPlan
from eddies.events import AgentEvent, OutputEvent
from tests.integration.agents import http_calculator
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 4


def _worker(settings: Settings, server: OpenAIServer, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TEST_OPENAI_BASE=server.base_url, TEST_EFFECTS=str(log.parent / "effects.log"),
               EDDIES_EXACTLY_ONCE=str(settings.exactly_once).lower(), EDDIES_INSTANCE_ID="slot-0",
               EDDIES_EXECUTOR_CONCURRENCY=str(CONCURRENCY),
               LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true")
    return subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--partitions", str(settings.partitions),
         "--agent", "tests.integration.agents:http_calculator"],
        cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )


def _outputs(settings: Settings) -> list[AgentEvent]:
    return list(read_events(settings, TopicNames(settings.app).output))


def _wait(settings: Settings, count: int, timeout: float,
          proc: subprocess.Popen[bytes] | None = None) -> list[AgentEvent]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the worker exited with {proc.returncode}")
        got = _outputs(settings)
        if len({e.event_id for e in got}) >= count:
            return got
        time.sleep(0.2)
    return _outputs(settings)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "transactions"])
def test_sigkill_mid_sessions_then_restart(settings: Settings, tmp_path: Path, exactly_once: bool) -> None:
    settings.exactly_once = exactly_once
    server = OpenAIServer(delay=0.25).start()
    log = tmp_path / "worker.log"
    sessions = [f"s{i}" for i in range(10)]
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    try:
        first = _worker(settings, server, log)
        prod = producer(settings)
        for k in range(2):
            for s in sessions:
                send_input(settings, s, json.dumps({"a": k, "b": int(s[1:])}), prod=prod)
        prod.flush(30)
        before = _wait(settings, 6, timeout=90, proc=first)
        assert len({e.event_id for e in before}) >= 6, log.read_text()[-3000:]
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed_ms, asked_before_kill = time.time() * 1000, len(server.requests)
        done_at_kill = len({e.event_id for e in _outputs(settings)})
        assert done_at_kill < 20, "the kill came too late to test anything"

        second = _worker(settings, server, log)
        try:
            got = _wait(settings, 20, timeout=120, proc=second)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    finally:
        server.stop()

    unique = {e.event_id: e for e in got}
    runs = Counter((e.session_id, e.run) for e in unique.values())
    assert len(unique) == 20, _diagnose(settings, {(s, r) for s in sessions for r in (1, 2)} - set(runs), log)
    assert set(runs) == {(s, r) for s in sessions for r in (1, 2)} and max(runs.values()) == 1
    # The tool is a non-idempotent side effect: a call the kill cut (its started mark
    # journaled, its outcome not) is UNKNOWN, and not made again; every other ran once.
    cut = _cut_calls(settings, before_ms=killed_ms)
    for e in unique.values():
        payload = e.payload
        assert isinstance(payload, OutputEvent) and payload.error is None, payload
        a = e.run - 1
        if (e.session_id, e.run) in cut:
            assert str(payload.output).startswith("The result is error: DurableCallUnknownError"), payload
        else:
            assert payload.output == f"The result is {a + int(e.session_id[1:])}."
    lines = (tmp_path / "effects.log").read_text().splitlines()
    executions = Counter(line.split()[1] for line in lines)
    runs_of = {f"{k}+{int(s[1:])}": (s, k + 1) for k in range(2) for s in sessions}
    assert set(executions) <= set(runs_of), executions
    assert all(executions[key] == 1 or (run in cut and executions[key] == 0)
               for key, run in runs_of.items()), (executions, cut)

    # No completed model call was repeated: a call ran twice only if the first worker asked
    # it and its outcome was not durable at the kill (the call was running, or its outcome
    # sat in an open transaction or an undelivered batch).
    bodies = Counter(json.dumps(r["messages"], sort_keys=True) for r in server.requests)
    assert len(bodies) == 40  # two model calls per run
    asked_first = Counter(_model_call(r["messages"]) for r in server.requests[:asked_before_kill])
    asked_again = Counter(_model_call(r["messages"]) for r in server.requests[asked_before_kill:])
    repeated = set(asked_first) & set(asked_again)
    assert sum(bodies.values()) - len(bodies) == len(repeated) and max(asked_first.values()) == 1
    durable = _journaled_model_calls(settings, before_ms=killed_ms)
    assert repeated.isdisjoint(durable), f"journaled calls were repeated: {sorted(repeated & durable)}"
    assert set(asked_first) <= durable | repeated, "a call neither journaled nor asked again"

    # Replay of every finished session reproduces its event ids and makes no model call;
    # the sessions that were running at the kill are among them.
    calls = len(server.requests)
    plan = AgentPlan.compile(http_calculator_for_replay())
    for s in sessions:
        history = load_history(settings, s)
        assert [e.seq for _, e in history] == list(range(1, len(history) + 1))
        report = replay(plan, history, s)
        assert report.ok, (s, [(m.recorded.type, m.recorded.seq) for m in report.mismatches])
    assert len(server.requests) == calls


def _model_call(messages: list[dict[str, object]]) -> tuple[str, int, int]:
    """(session, run, 1 or 2) of a model call's messages: the prompt names both, a tool's
    answer means the run's second call."""
    prompt = json.loads(str(next(m for m in messages if m["role"] == "user")["content"]))
    return f"s{prompt['b']}", prompt["a"] + 1, 2 if messages[-1]["role"] == "tool" else 1


def _cut_calls(settings: Settings, before_ms: float) -> set[tuple[str, int]]:
    """(session, run) of the calls with a started mark (the tool's: model calls are
    idempotent, and take none) journaled before ``before_ms``, and no outcome before it."""
    from eddies.connectors.runtime.client import read_records

    started, ended = set(), set()
    for m in read_records(settings, TopicNames(settings.app).journal):
        kind, _, rest = (m.key() or b"").decode().partition("/")
        if m.timestamp()[1] < before_ms and kind in ("start", "out"):
            (started if kind == "start" else ended).add(rest.rsplit("/", 1)[0])
    return {(cid.split(":")[0], int(cid.split(":r", 1)[1].split(":", 1)[0])) for cid in started - ended}


def _journaled_model_calls(settings: Settings, before_ms: float) -> set[tuple[str, int, int]]:
    """(session, run, 1 or 2) of the model calls whose outcome the journal holds (committed)
    from a record written before ``before_ms``: the first worker's durable outcomes."""
    from eddies.connectors.runtime.client import read_records
    from eddies.events import CallKind, DurableCallResult, decode

    found: set[tuple[str, int, int]] = set()
    for m in read_records(settings, TopicNames(settings.app).journal):
        if not (m.key() or b"").startswith(b"out/") or m.timestamp()[1] >= before_ms:
            continue
        e = decode(m.value())
        if isinstance(e.payload, DurableCallResult) and e.payload.kind == CallKind.CHAT_MODEL:
            run = int(e.payload.call_id.split(":r", 1)[1].split(":", 1)[0])  # result events carry no run
            found.add((e.session_id, run, 1 if json.loads(e.payload.value).get("tool_calls") else 2))
    return found


def _diagnose(settings: Settings, missing: set[tuple[str, int]], log: Path) -> str:
    """Every record of the sessions that did not finish, for the failure message."""
    from eddies.connectors.runtime.client import read_records
    from eddies.events import decode

    lines = [f"missing runs: {sorted(missing)}", log.read_text()[-2000:]]
    wanted = {s for s, _ in missing}
    names = TopicNames(settings.app)
    for topic in (names.input, names.events, names.requests, names.journal):
        for m in read_records(settings, topic):
            key = (m.key() or b"").decode()
            sid = key.split("/", 1)[1].split(":")[0] if "/" in key else key
            if sid not in wanted:
                continue
            try:
                e = decode(m.value())
                what = f"{e.type} seq={e.seq} run={e.run} id={e.event_id[:12]} " \
                       f"call={getattr(e.payload, 'call_id', '')} ts={m.timestamp()[1]}"
            except Exception:
                what = f"{len(m.value() or b'')} bytes ts={m.timestamp()[1]}"
            lines.append(f"{topic} {m.partition()}/{m.offset()} {key}: {what}")
    return "\n".join(lines)


def http_calculator_for_replay() -> object:
    os.environ.setdefault("TEST_OPENAI_BASE", "http://127.0.0.1:9/v1")  # never called
    return http_calculator()


def test_workers_killed_again_and_again_dead_letter_no_result(settings: Settings, tmp_path: Path) -> None:
    """Two workers with both roles, one SIGKILLed every ~2 s and started again while prompts
    keep coming: each restart restores sessions and sends results again from the journal,
    and results reach an orchestrator both as records and as delivery reports (which carry
    no headers). Every answer comes once, every result record is signed, and no result is
    dead-lettered (a result applied from its delivery report without the event this process
    kept could not show its signature: 23-139 dead letters in 60 s before the fix)."""
    import random

    from eddies.connectors.runtime.client import read_records
    from eddies.connectors.runtime.records import header
    from eddies.connectors.runtime.signing import DEV_KEY, SIGNATURE_HEADER, ResultSigner
    from eddies.events import DurableCallResult, decode
    from tests.integration.workers import start_worker, stop_worker

    names = TopicNames(settings.app)
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    workers = [start_worker(settings, "eddies.demo:calculator_agent", log) for log in logs]
    rnd = random.Random(31)
    prod = producer(settings)
    sent = 0
    try:
        began = time.monotonic()
        next_kill = began + 2.0
        while time.monotonic() - began < 20:
            send_input(settings, f"k{sent % 30}", f"What is {sent} + 1?", prod=prod)
            sent += 1
            prod.poll(0)
            time.sleep(0.02)
            if time.monotonic() >= next_kill:
                i = rnd.randrange(2)
                workers[i].kill()
                workers[i].wait(10)
                workers[i] = start_worker(settings, "eddies.demo:calculator_agent", logs[i])
                next_kill = time.monotonic() + rnd.uniform(1.5, 3.0)
        prod.flush(30)
        got = _wait(settings, sent, timeout=120)
    finally:
        for w in workers:
            stop_worker(w)
    runs = Counter((e.session_id, e.run) for e in {e.event_id: e for e in got}.values())
    assert sum(runs.values()) == sent and max(runs.values()) == 1, (sent, len(got))
    dead = list(read_records(settings, names.dlq))
    assert not dead, [dict(m.headers() or []) for m in dead[:3]]
    signer = ResultSigner([DEV_KEY])
    results = [m for m in read_records(settings, names.input)
               if isinstance(decode(m.value()).payload, DurableCallResult)]
    assert len(results) >= sent  # a model call per input at least
    assert all(signer.verify(m.value(), header(m.headers(), SIGNATURE_HEADER)) for m in results)
