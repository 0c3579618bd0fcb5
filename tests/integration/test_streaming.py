"""Answers as they are written (issue 56), on the Kafka worker: a ReAct agent whose model
(litellm over HTTP, at a server that streams a token every 20 ms) streams to APP.stream.
The deltas of a call come in order, numbered without gaps, their text is the journaled
answer, the tool call shows as started and ended, and ``eddies send --follow`` prints the
answer and the output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.client import read_records, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import CallKind
from eddies.events.stream import StreamEvent, StreamKind, decode_stream
from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

AGENT = "tests.integration.provider_agents:streaming_react_agent"
WORDS = 40


def _long_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Call ``add`` with the user's JSON, then answer in WORDS words naming its result."""
    messages = body["messages"]
    if messages[-1]["role"] != "tool":
        user = next(m for m in reversed(messages) if m["role"] == "user")
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": user["content"]}}]}
    words = [f"w{i}" for i in range(WORDS - 2)]
    return {"role": "assistant", "content": " ".join([*words, "sum", messages[-1]["content"]])}


def _stream(settings: Settings, session: str) -> list[StreamEvent]:
    out = []
    for msg in read_records(settings, TopicNames(settings.app).stream, timeout=10):
        rec = decode_stream(msg.value())
        if rec.session_id == session:
            out.append(rec)
    return out


def test_a_streaming_model_writes_its_answer_to_the_stream_in_order(
        settings: Settings, tmp_path: Path) -> None:
    server = OpenAIServer(responder=_long_answer, token_delay=0.02).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "s1", json.dumps({"a": 2, "b": 3}))
        [out] = wait_until("the answer", lambda: answers(settings) or None, worker, log, timeout=60)
        assert out.payload.output.endswith("sum 5")
        records = _stream(settings, "s1")
    finally:
        stop_worker(worker)
        server.stop()
    by_call: dict[str, list[StreamEvent]] = {}
    for rec in records:
        by_call.setdefault(rec.call_id, []).append(rec)
    models = [rs for rs in by_call.values() if rs[0].call_kind is CallKind.CHAT_MODEL]
    tools = [rs for rs in by_call.values() if rs[0].call_kind is CallKind.TOOL]
    assert len(models) == 2 and len(tools) == 1
    for rs in by_call.values():  # one execution each, numbered from 0 without gaps, in order
        assert len({r.execution for r in rs}) == 1
        assert [r.seq for r in rs] == list(range(len(rs)))
        assert rs[0].kind is StreamKind.STARTED and rs[-1].kind is StreamKind.ENDED
        assert rs[-1].error is None
    [tool] = tools
    assert tool[0].target == "add" and json.loads(tool[0].text) == {"a": 2, "b": 3}
    first, answer = sorted(models, key=lambda rs: rs[0].timestamp)
    fragments = [t for r in first if r.kind is StreamKind.DELTA for t in r.tool_calls]
    assert fragments[0].name == "add"
    assert json.loads("".join(t.arguments for t in fragments)) == {"a": 2, "b": 3}
    deltas = [r for r in answer if r.kind is StreamKind.DELTA]
    assert "".join(r.text for r in deltas) == out.payload.output
    # Tokens 20 ms apart are batched over 10 ms at most: most records carry one word, none
    # the whole answer at once.
    assert 10 < len(deltas) <= WORDS
    # The streaming guide's plain consumer follows the session by the contract.
    [client] = re.findall(r'```python title="follow_stream.py"\n(.*?)```',
                          (ROOT / "docs/guide/streaming.md").read_text(), flags=re.S)
    (tmp_path / "follow_stream.py").write_text(client)
    shown = subprocess.run([sys.executable, str(tmp_path / "follow_stream.py"), "s1"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, EDDIES_BOOTSTRAP_SERVERS=settings.bootstrap_servers,
                                    EDDIES_APP=settings.app))
    assert shown.returncode == 0, shown.stderr
    printed = shown.stdout.splitlines()
    assert printed[-1] == out.payload.output
    assert '[tool add {"a":2,"b":3}]' in printed


def test_send_follow_prints_the_answer_as_it_is_written_then_the_output(
        settings: Settings, tmp_path: Path) -> None:
    server = OpenAIServer(responder=_long_answer, token_delay=0.02).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url)
    try:
        wait_until("the worker's topics", lambda: _has_stream_topic(settings), worker, log)
        done = subprocess.run(
            [sys.executable, "-m", "eddies", "send", "s2", json.dumps({"a": 20, "b": 22}), "--follow",
             "--app", settings.app, "--bootstrap-servers", settings.bootstrap_servers, "--idle", "60"],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        stop_worker(worker)
        server.stop()
    assert done.returncode == 0, done.stderr + log.read_text()[-3000:]
    lines = done.stdout.splitlines()
    answer = " ".join([*(f"w{i}" for i in range(WORDS - 2)), "sum", "42"])
    assert "... calling tool add {\"a\":20,\"b\":22}..." in lines
    assert answer in lines  # the streamed text, on a line of its own
    assert lines[-1] == f"s2 run 1: {answer}"  # then the output, the truth
    assert lines.index(answer) < len(lines) - 1
    tailed = subprocess.run(
        [sys.executable, "-m", "eddies", "tail", "--topic", "stream", "--session", "s2",
         "--from-beginning", "--no-follow", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert tailed.returncode == 0, tailed.stderr
    shown = tailed.stdout.splitlines()
    assert any(" STARTED calling tool add " in x for x in shown)
    assert any(x.endswith('DELTA "w0"') for x in shown)
    assert all(x.startswith("s2 run 1 ") for x in shown)


def _has_stream_topic(settings: Settings) -> bool:
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(settings.client_config()).list_topics(timeout=5).topics
    return TopicNames(settings.app).stream in topics


def test_a_worker_killed_mid_stream_streams_the_call_again_and_answers_once(
        settings: Settings, tmp_path: Path) -> None:
    """kill -9 while the model writes: the next worker asks it again under a new execution,
    which a reader following the contract shows whole; one output."""
    import signal

    from eddies.connectors.streaming.following import StreamFollower

    server = OpenAIServer(responder=_long_answer, token_delay=0.1).start()  # 4 s an answer
    logs = [tmp_path / "w0.log", tmp_path / "w1.log"]
    worker = start_worker(settings, AGENT, logs[0], TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "s3", json.dumps({"a": 1, "b": 1}))

        def writing() -> list[StreamEvent] | None:
            got = [r for r in _stream(settings, "s3") if r.kind is StreamKind.DELTA and r.text]
            return got if len(got) >= 5 else None

        wait_until("the answer being written", writing, worker, logs[0], timeout=60)
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        worker = start_worker(settings, AGENT, logs[1], TEST_OPENAI_BASE=server.base_url)
        [out] = wait_until("the answer", lambda: answers(settings) or None, worker, logs[1], timeout=90)
        records = _stream(settings, "s3")
    finally:
        stop_worker(worker)
        server.stop()
    expected = " ".join([*(f"w{i}" for i in range(WORDS - 2)), "sum", "2"])
    assert out.payload.output == expected
    assert len([o for o in answers(settings) if o.session_id == "s3"]) == 1
    answer_call = records[-1].call_id  # the last record: the answer's ENDED
    executions = list(dict.fromkeys(r.execution for r in records if r.call_id == answer_call))
    assert len(executions) == 2  # cut by the kill, then made again
    cut = [r for r in records if r.execution == executions[0]]
    assert cut[-1].kind is not StreamKind.ENDED  # the killed one never ended
    view = StreamFollower()
    restarted = [c.restarted for r in records if (c := view.add(r)) is not None]
    assert any(restarted)
    assert view.text(answer_call) == expected


def test_the_web_view_shows_a_running_sessions_answer_growing(settings: Settings, tmp_path: Path) -> None:
    from tests.integration.test_ui import _skip_reason, browser_page, serve_ui

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    server = OpenAIServer(responder=_long_answer, token_delay=0.1).start()  # 4 s an answer
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url)
    try:
        with serve_ui(settings) as url, browser_page(tmp_path) as page:
            # The view is up before the answer is written; the page is opened while it is.
            send_input(settings, "web", json.dumps({"a": 4, "b": 4}))
            wait_until("the answer being written", lambda: len(
                [r for r in _stream(settings, "web") if r.kind is StreamKind.DELTA and r.text]) > 3,
                worker, log)
            page.goto(url + "#session=web")
            page.wait_for_function("() => document.querySelector('#live-text').textContent.length > 0",
                                   timeout=30_000)
            shown = [page.text_content("#live-text") or ""]
            page.wait_for_function("() => document.querySelector('#live-status').textContent === 'answered'",
                                   timeout=30_000)
            shown.append(page.text_content("#live-text") or "")
            # The page takes the output into the timeline.
            page.wait_for_function("() => document.querySelector('#timeline').textContent"
                                   ".includes('OutputEvent')", timeout=30_000)
    finally:
        stop_worker(worker)
        server.stop()
    answer = " ".join([*(f"w{i}" for i in range(WORDS - 2)), "sum", "8"])
    assert shown[0] and answer.startswith(shown[0]) and shown[0] != answer  # a part, then
    assert shown[1] == answer  # all of it, as it was written
