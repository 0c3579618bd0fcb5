"""A2A tools against a real a2a-sdk agent in a subprocess on 127.0.0.1 (tests.a2a_servers),
the model reached through litellm over HTTP: a completed task is the tool's result (the
agent saw the call id as the idempotency key; a replay calls neither server); a failed
task is a tool error the model sees; a card path with no card fails at start, naming it;
the model is offered one tool named and described by the card, taking a ``prompt``; a
slow call abandoned at request_timeout succeeds on its retry with the same key; keys and
header values are sent but never written."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a", reason="the a2a extra is not installed")

from eddies import A2aServer, A2aTool, ChatModelSetup, LocalRunner, ReActAgent, ReActOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.remote.configuration import ConfigurationError
from eddies.events import CallKind, DurableCallRequest, encode
from tests.integration.tool_servers import calls_then_answers, free_port, start_server, stop
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration
CARD = "/.well-known/agent-card.json"
TOOL = "Echo_Agent"  # the card's name, "Echo Agent", as a tool name
SECRET = "sk-test-a2a-5ecret-7d1e"
PROMPT = "What to ask the agent: the whole request, in plain words."


def start_agent(log: Path, port: int | None = None, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """The echo agent of tests.a2a_servers on ``port`` (a free one), once it serves its card."""
    proc, port = start_server("tests.a2a_servers", "echo", str(log), port=port, env=env)
    return proc, f"http://127.0.0.1:{port}"


def agent(server: A2aServer, model: OpenAIServer, **tool: Any) -> ReActAgent:
    a = ReActAgent("a2a", model="llm", options=ReActOptions(max_iterations=4, handle_exception="CONTINUE"))
    a.add_resource("helper", ResourceType.A2A_SERVER, server)
    a.add_resource("ask", ResourceType.TOOL, A2aTool("helper", **{"agent_card_path": CARD, **tool}))
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   LiteLLMChatModel(api_base=model.base_url, api_key="none"))
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="openai/test", tools=["ask"]))
    return a


@pytest.fixture(scope="module")
def echo_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("a2a") / "echo.log"
    proc, url = start_agent(log)
    yield url, log
    stop(proc)


def _lines(log: Path, suffix: str = "") -> list[str]:
    path = Path(f"{log}{suffix}")
    return path.read_text().splitlines() if path.exists() else []


def _tool_calls(runner: LocalRunner) -> list[DurableCallRequest]:
    return [p for e in runner.history if isinstance(p := e.payload, DurableCallRequest)
            and p.kind is CallKind.TOOL]


def _ask(url: str, prompt: str, **tool: Any) -> tuple[LocalRunner, OpenAIServer, list[Any]]:
    llm = OpenAIServer(responder=calls_then_answers(TOOL, {"prompt": prompt})).start()
    try:
        runner = LocalRunner(agent(A2aServer(url), llm, **tool))
        return runner, llm, runner.run([("s1", "ask the agent")])
    finally:
        llm.stop()


def test_a_completed_task_is_the_answer_and_a_replay_calls_nothing(echo_agent: tuple[str, Path]) -> None:
    url, log = echo_agent
    before = len(_lines(log))
    runner, llm, answers = _ask(url, "hello there")
    assert answers == ['Got: "echo: hello there"']
    [call] = _tool_calls(runner)
    assert _lines(log)[before:] == [f"{call.call_id} hello there"]  # the call id, as the key
    assert json.loads(_lines(log, ".headers")[before])["idempotency-key"] == call.call_id
    asked = len(llm.requests)
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == "s1"]
    assert replay(runner.plan, history, "s1").ok
    assert len(_lines(log)) == before + 1 and len(llm.requests) == asked


def test_the_call_loop_makes_an_a2a_tool_call_as_a_call_thread_does(echo_agent: tuple[str, Path]) -> None:
    """A worker awaits an A2A tool call on its call loop (no thread waits on the agent):
    the same answer, the same errors, the same key, as the call made on a thread."""
    import asyncio
    import dataclasses

    from eddies.connectors.execution.calls import CallPerformer
    from eddies.connectors.remote.a2a import A2aTaskError

    url, log = echo_agent
    runner, _, _ = _ask(url, "hello loop")
    [call] = _tool_calls(runner)
    performer = CallPerformer(runner.plan)
    on_loop = performer.asynchronous(call)
    assert on_loop is not None and on_loop.provider == "helper"
    before = len(_lines(log))
    assert asyncio.run(on_loop.call) == performer.perform(call) == "echo: hello loop"
    assert _lines(log)[before:] == [f"{call.call_id} hello loop"] * 2
    failing = dataclasses.replace(call, args=json.dumps({"args": [], "kwargs": {"prompt": "please fail"}}))
    failed = performer.asynchronous(failing)
    assert failed is not None
    with pytest.raises(A2aTaskError, match="cannot do: please fail"):
        asyncio.run(failed.call)


def test_a_data_part_is_its_json_value(echo_agent: tuple[str, Path]) -> None:
    _, _, answers = _ask(echo_agent[0], "some data")
    [answer] = answers  # a data part travels as a protobuf Struct: its keys keep no order
    assert answer.startswith("Got: ") and json.loads(answer[5:]) == {"echo": "some data", "n": 1}


def test_a_failed_task_is_a_tool_error_the_model_sees(echo_agent: tuple[str, Path]) -> None:
    _, _, answers = _ask(echo_agent[0], "please fail")
    assert answers == ["Got: error: A2aTaskError: task failed: cannot do: please fail"]


def test_a_card_path_with_no_card_fails_at_start(echo_agent: tuple[str, Path]) -> None:
    url = echo_agent[0]
    with pytest.raises(ConfigurationError, match=f"tool 'ask': cannot fetch the agent card of A2A server "
                                                 f"'helper' at {url}/nope/agent.json: HTTP 404"):
        LocalRunner(agent(A2aServer(url), OpenAIServer(), agent_card_path="/nope/agent.json"))


@pytest.mark.parametrize(("body", "why"), [
    (b'{"protocol": "not a card"}', "not a valid agent card: it has no name"),
    (b"<html>hello</html>", "not a valid agent card: not JSON"),
    (b'["a", "list"]', "not a valid agent card: Agent card must be a JSON object"),
])
def test_what_is_no_agent_card_fails_at_start(body: bytes, why: str) -> None:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(ConfigurationError, match=f"tool 'ask': cannot fetch the agent card of A2A "
                                                     f"server 'helper' at {url}{CARD}: {why}"):
            LocalRunner(agent(A2aServer(url), OpenAIServer()))
    finally:
        httpd.shutdown()


def test_the_model_is_offered_one_tool_from_the_card(echo_agent: tuple[str, Path]) -> None:
    _, llm, _ = _ask(echo_agent[0], "hi")
    assert llm.requests[0]["tools"] == [{"type": "function", "function": {
        "name": "Echo_Agent", "description": "Repeats what it is told.",
        "parameters": {"type": "object", "required": ["prompt"], "additionalProperties": False,
                       "properties": {"prompt": {"type": "string", "description": PROMPT}}}}}]
    # name and description given on the tool win over the card's
    _, llm, _ = _ask(echo_agent[0], "hi", name="echo", description="Echoes.")
    function = llm.requests[0]["tools"][0]["function"]
    assert (function["name"], function["description"]) == ("echo", "Echoes.")


def test_a_slow_call_times_out_and_its_retry_succeeds_with_the_same_key(echo_agent: tuple[str, Path]) -> None:
    url, log = echo_agent
    before = len(_lines(log))
    runner, _, answers = _ask(url, "slow one", request_timeout=1.0)
    assert answers == ['Got: "echo: slow one"']
    [first, second] = [line.split(" ", 1) for line in _lines(log)[before:before + 2]]
    assert first == second and first[1] == "slow one"  # one call, asked twice, one key
    [request] = [c for c in _tool_calls(runner) if c.attempt == 1]
    assert first[0] == request.call_id


def test_an_agent_killed_and_restarted_between_calls(tmp_path: Path) -> None:
    log = tmp_path / "echo.log"
    port = free_port()
    proc, url = start_agent(log, port)
    llm = OpenAIServer(responder=calls_then_answers(TOOL, {"prompt": "hello"})).start()
    try:
        runner = LocalRunner(agent(A2aServer(url), llm))
        assert runner.run([("s1", "one")]) == ['Got: "echo: hello"']
        stop(proc)
        proc, _ = start_agent(log, port)
        assert runner.run([("s1", "two")]) == ['Got: "echo: hello"']  # a new client, the card again
    finally:
        stop(proc)
        llm.stop()
    keys = [line.split(" ", 1)[0] for line in _lines(log)]
    assert len(keys) == 2 and keys[0] != keys[1]


def test_keys_and_headers_are_sent_and_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("ECHO_KEY", SECRET)
    log = tmp_path / "echo.log"
    proc, url = start_agent(log, A2A_TEST_TOKEN=SECRET)
    llm = OpenAIServer(responder=calls_then_answers(TOOL, {"prompt": "hello"})).start()
    try:
        server = A2aServer(url, api_key_env="ECHO_KEY", headers={"X-Token": "${ECHO_KEY}"})
        runner = LocalRunner(agent(server, llm))
        assert runner.run([("s1", "one")]) == ['Got: "echo: hello"']
        monkeypatch.setenv("WRONG_KEY", "sk-wrong")
        with pytest.raises(ConfigurationError, match=f"at {url}/.well-known/agent-card.json: HTTP 401"):
            LocalRunner(agent(A2aServer(url, api_key_env="WRONG_KEY"), llm))
    finally:
        stop(proc)
        llm.stop()
    [sent] = [json.loads(line) for line in _lines(log, ".headers")]
    assert sent["authorization"] == f"Bearer {SECRET}" and sent["x-token"] == SECRET
    unreachable = A2aServer(f"http://user:{SECRET}@127.0.0.1:9/?key={SECRET}", api_key_env="ECHO_KEY")
    with pytest.raises(ConfigurationError) as failed:
        LocalRunner(agent(unreachable, OpenAIServer()))
    assert "A2A server 'helper' at http://127.0.0.1:9/.well-known/agent-card.json: " in str(failed.value)
    written = b"".join(encode(e) for e in runner.history) + str(failed.value).encode()
    written += "".join(r.getMessage() for r in caplog.records).encode()
    assert SECRET.encode() not in written
