"""``eddies serve``, the HTTP door (issue 56), against a worker of a streaming ReAct agent
with a tool (litellm over HTTP at a server that streams a token every 10 ms): the official
``openai`` client gets a streamed answer and a second turn that sees the first; a wrong
token gets 401 and nothing is produced; a retried POST with the same idempotency key is one
input; headless Chromium reads a session's Server-Sent Events."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.client import read_events
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import InputEvent, OutputEvent
from tests.integration.test_ui import _skip_reason as chromium_missing
from tests.integration.test_ui import browser_page
from tests.integration.workers import ROOT, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

AGENT = "tests.integration.provider_agents:streaming_chat_agent"
TOKENS = "tok-all, tok-acme=acme-"


@contextlib.contextmanager
def door(settings: Settings, tokens: str | None) -> Iterator[str]:
    """``eddies serve --port 0`` on the test's app; its base URL (…/v1)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("EDDIES_SERVE_TOKENS", None)
    if tokens is not None:
        env["EDDIES_SERVE_TOKENS"] = tokens
    proc = subprocess.Popen(
        [sys.executable, "-m", "eddies", "serve", "--port", "0", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None or not lines.empty(), f"eddies serve exited: {''.join(seen)}"
            assert time.monotonic() < deadline, f"eddies serve printed no URL: {''.join(seen)}"
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if found := re.search(r"http://\S+/v1", seen[-1]):
                break
        url = found.group(0)
        _eventually("the door reading the app", lambda: _healthy(url))
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


def _eventually(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for: {what}")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/healthz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _inputs(settings: Settings, session: str) -> list[Any]:
    return [e for e in read_events(settings, TopicNames(settings.app).input)
            if e.session_id == session and isinstance(e.payload, InputEvent)]


def _outputs(settings: Settings, session: str) -> list[Any]:
    return [e for e in read_events(settings, TopicNames(settings.app).output)
            if e.session_id == session and isinstance(e.payload, OutputEvent)]


@pytest.fixture
def worker_and_model(settings: Settings, tmp_path: Path) -> Iterator[OpenAIServer]:
    server = OpenAIServer(token_delay=0.01).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, TEST_OPENAI_BASE=server.base_url)
    try:
        wait_until("the worker's stream topic", lambda: _has_topics(settings), worker, log)
        yield server
    finally:
        stop_worker(worker)
        server.stop()


def _has_topics(settings: Settings) -> bool:
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(settings.client_config()).list_topics(timeout=5).topics
    return TopicNames(settings.app).stream in topics


def test_the_openai_client_streams_an_answer_and_a_second_turn_sees_the_first(
        settings: Settings, worker_and_model: OpenAIServer) -> None:
    import openai

    server = worker_and_model
    with door(settings, TOKENS) as url:
        client = openai.OpenAI(base_url=url, api_key="tok-all", max_retries=0)
        stream = client.chat.completions.create(
            model="adder", stream=True, user="oa-1",
            messages=[{"role": "system", "content": "ignored"},
                      {"role": "user", "content": json.dumps({"a": 20, "b": 22})}])
        parts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
        assert "".join(parts) == "The result is 42."
        assert len(parts) > 1  # streamed: a word at a time, not the output at the end
        # The second turn, in the same session (its header this time), not streamed.
        reply = client.chat.completions.with_raw_response.create(
            model="adder", messages=[{"role": "user", "content": json.dumps({"a": 1, "b": 2})}],
            extra_headers={"X-Eddies-Session": "oa-1"})
        assert reply.headers["x-eddies-session"] == "oa-1"
        assert reply.parse().choices[0].message.content == "The result is 3."
        last = server.requests[-1]["messages"]  # the model saw the first turn
        assert {"role": "user", "content": json.dumps({"a": 20, "b": 22})} in last
        assert {"role": "assistant", "content": "The result is 42."} in last
        # No session named: a new one, named in the response.
        fresh = client.chat.completions.with_raw_response.create(
            model="adder", messages=[{"role": "user", "content": json.dumps({"a": 2, "b": 2})}])
        assert fresh.headers["x-eddies-session"].startswith("chat-")
        assert fresh.parse().choices[0].message.content == "The result is 4."
        # A wrong token: 401, and nothing reaches the app.
        before = len(_inputs(settings, "oa-2"))
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).chat.completions.create(
                model="adder", user="oa-2", messages=[{"role": "user", "content": "{}"}])
        # A token limited to a prefix: 403 outside it.
        with pytest.raises(openai.PermissionDeniedError):
            openai.OpenAI(base_url=url, api_key="tok-acme", max_retries=0).chat.completions.create(
                model="adder", user="oa-2", messages=[{"role": "user", "content": "{}"}])
        time.sleep(1.0)
        assert len(_inputs(settings, "oa-2")) == before == 0


def test_a_retried_post_with_one_idempotency_key_is_one_input(
        settings: Settings, worker_and_model: OpenAIServer) -> None:
    with door(settings, TOKENS) as url:
        auth = {"Authorization": "Bearer tok-acme", "Idempotency-Key": "k-1"}
        first = _post(f"{url}/sessions/acme-1/inputs", {"input": json.dumps({"a": 5, "b": 5})}, auth)
        again = _post(f"{url}/sessions/acme-1/inputs", {"input": json.dumps({"a": 5, "b": 5})}, auth)
        assert first[0] == again[0] == 202 and first[1]["event_id"] == again[1]["event_id"]
        [out] = _eventually("the answer", lambda: _outputs(settings, "acme-1"))
        assert out.payload.output == "The result is 10."
        time.sleep(2.0)  # time for a second run, if the retry had made one
        assert len(_inputs(settings, "acme-1")) == 2 and len(_outputs(settings, "acme-1")) == 1
        refused = _post(f"{url}/sessions/acme-1/inputs", {"input": "x"}, {"Authorization": "Bearer no"})
        assert refused[0] == 401


def test_a_browser_follows_a_session_as_server_sent_events(
        settings: Settings, worker_and_model: OpenAIServer, tmp_path: Path) -> None:
    reason = chromium_missing()
    if reason:
        pytest.skip(reason)
    with door(settings, None) as url, browser_page(tmp_path) as page:
        page.goto(url.removesuffix("/v1") + "/healthz")  # the page's origin: the door's
        page.evaluate("""() => {
            window.got = [];
            const source = new EventSource('/v1/sessions/web-1/events?until=output');
            for (const name of ['delta', 'progress', 'output']) {
                source.addEventListener(name, e => {
                    window.got.push([name, JSON.parse(e.data)]);
                    if (name === 'output') source.close();
                });
            }
        }""")
        time.sleep(0.5)  # the EventSource connected
        status, _ = _post(f"{url}/sessions/web-1/inputs", {"input": json.dumps({"a": 3, "b": 4})}, {})
        assert status == 202
        page.wait_for_function("() => window.got.some(([name]) => name === 'output')", timeout=60_000)
        got = page.evaluate("() => window.got")
    names = [name for name, _ in got]
    assert names[-1] == "output" and got[-1][1]["output"] == "The result is 7."
    text = "".join(d["text"] for name, d in got if name == "delta")
    assert text == "The result is 7."
    assert names.index("delta") < names.index("output")
    assert any(d["status"].startswith("calling tool add") for name, d in got if name == "progress")


def _followed(url: str, body: Any) -> list[tuple[str, Any]]:
    """POST an input with ``Accept: text/event-stream``: the events until the stream ends."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    events: list[tuple[str, Any]] = []
    name = ""
    with urllib.request.urlopen(req, timeout=60) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    return events


def test_inputs_sent_while_a_run_goes_on_each_get_their_own_answer(
        settings: Settings, worker_and_model: OpenAIServer) -> None:
    """The second input waits for the first's run, whose output comes after the second was
    sent: each follower ends with the output that names its own input."""
    from concurrent.futures import ThreadPoolExecutor

    with door(settings, None) as url, ThreadPoolExecutor(2) as pool:
        inputs = f"{url}/sessions/two-1/inputs"
        first = pool.submit(_followed, inputs, {"input": json.dumps({"a": 1, "b": 2})})
        time.sleep(0.3)  # the first is sent first, and its run is going on
        second = pool.submit(_followed, inputs, {"input": json.dumps({"a": 3, "b": 4})})
        answers = [f.result(90) for f in (first, second)]
    sent = [e.event_id for e in _inputs(settings, "two-1")]
    assert len(sent) == 2
    for events, event_id, answer in zip(answers, sent, ("The result is 3.", "The result is 7."), strict=True):
        name, data = events[-1]
        assert (name, data["output"], data["input_id"]) == ("output", answer, event_id), events
    outputs = _outputs(settings, "two-1")
    assert [(o.run, o.payload.input_id) for o in outputs] == [(1, sent[0]), (2, sent[1])]


def test_a_token_that_proves_who_asks_signs_it_on_every_input(
        settings: Settings, worker_and_model: OpenAIServer) -> None:
    """The door signs the identity a token proves (with the identity key; here, on the
    embedded broker, its development key): the worker records it with the input. A token
    that proves nobody in particular sends anonymous inputs."""
    from eddies.events import Identity

    with door(settings, "tok-ann;user=ann;tenant=acme, tok-any") as url:
        for token, session in (("tok-ann", "ann-1"), ("tok-any", "any-1")):
            status, _ = _post(f"{url}/sessions/{session}/inputs", {"input": json.dumps({"a": 1, "b": 2})},
                              {"Authorization": f"Bearer {token}"})
            assert status == 202
        _eventually("both answers", lambda: _outputs(settings, "ann-1") and _outputs(settings, "any-1"))
    history = read_events(settings, TopicNames(settings.app).events)
    recorded = {e.session_id: e.payload.identity for e in history if isinstance(e.payload, InputEvent)}
    assert recorded == {"ann-1": Identity("ann", "acme"), "any-1": None}
