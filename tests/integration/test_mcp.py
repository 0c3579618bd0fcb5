"""MCP tools against real servers on 127.0.0.1, the model reached through litellm over
HTTP: the reference mcp-server-time over stdio and over streamable HTTP (the model calls
get_current_time and answers with it); an allowed tool the server lacks fails at start,
naming it; an is_error result is a tool error the model sees; a slow call abandoned at
request_timeout succeeds on its retry (the same idempotency key twice at the server); a
server killed and restarted between calls; replays call nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from eddies import ChatModelSetup, LocalRunner, McpServer, McpTool, ReActAgent, ReActOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.remote.configuration import ConfigurationError
from eddies.events import CallKind, DurableCallRequest, DurableCallResult, OutputEvent
from tests.integration.tool_servers import calls_then_answers, free_port, stop
from tests.integration.tool_servers import start_server as start_tool_server
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


def start_server(*args: str, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A tests.mcp_servers server (``time``, or ``ledger LOG [DELAY_S]``) and its URL."""
    proc, port = start_tool_server("tests.mcp_servers", *args, port=port)
    return proc, f"http://127.0.0.1:{port}/mcp"


def agent(server: McpServer, model: OpenAIServer, allowed: list[str], **tool: Any) -> ReActAgent:
    a = ReActAgent("mcp", model="llm", options=ReActOptions(max_iterations=4, handle_exception="CONTINUE"))
    a.add_resource("srv", ResourceType.MCP_SERVER, server)
    a.add_resource("tools", ResourceType.TOOL, McpTool("srv", allowed_tools=allowed, **tool))
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   LiteLLMChatModel(api_base=model.base_url, api_key="none"))
    a.add_resource("llm", ResourceType.CHAT_MODEL,
                   ChatModelSetup("conn", model="openai/test", tools=["tools"]))
    return a


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    srv = OpenAIServer(responder=calls_then_answers("get_current_time", {"timezone": "UTC"})).start()
    yield srv
    srv.stop()


def _answers_with_the_time(runner: LocalRunner, model: OpenAIServer) -> None:
    [answer] = runner.run([("s1", "What time is it in UTC?")])
    got = json.loads(answer.removeprefix("Got: "))
    assert got["timezone"] == "UTC" and got["datetime"].startswith(time.strftime("%Y-%m-%d", time.gmtime()))
    offered = model.requests[0]["tools"]
    assert [t["function"]["name"] for t in offered] == ["get_current_time"]  # only the allowed one
    assert "IANA timezone" in offered[0]["function"]["parameters"]["properties"]["timezone"]["description"]
    asked = len(model.requests)
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == "s1"]
    assert replay(runner.plan, history, "s1").ok and len(model.requests) == asked


def test_the_time_server_over_stdio(model: OpenAIServer) -> None:
    server = McpServer(command=sys.executable, args=("-m", "mcp_server_time"))
    _answers_with_the_time(LocalRunner(agent(server, model, ["get_current_time"])), model)


def test_the_time_server_over_streamable_http(model: OpenAIServer) -> None:
    proc, url = start_server("time")
    try:
        _answers_with_the_time(LocalRunner(agent(McpServer(url=url), model, ["get_current_time"])), model)
    finally:
        stop(proc)


def test_an_allowed_tool_the_server_lacks_fails_at_start(model: OpenAIServer) -> None:
    server = McpServer(command=sys.executable, args=("-m", "mcp_server_time"))
    with pytest.raises(ConfigurationError, match="allowed_tools 'teleport' not offered by MCP server "
                                                 "'srv' .*it offers: convert_time, get_current_time"):
        LocalRunner(agent(server, model, ["get_current_time", "teleport"]))


def test_an_error_result_is_a_tool_error_the_model_sees(tmp_path: Path) -> None:
    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    llm = OpenAIServer(responder=calls_then_answers("fail", {"reason": "no"})).start()
    try:
        [answer] = LocalRunner(agent(McpServer(url=url), llm, ["fail"])).run([("s1", "try")])
    finally:
        stop(proc)
        llm.stop()
    assert answer == "Got: error: McpToolError: Error executing tool fail"


def _keys(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split(" ", 1)) for line in log.read_text().splitlines()]  # type: ignore[misc]


def test_a_slow_call_times_out_and_its_retry_succeeds_with_the_same_key(tmp_path: Path) -> None:
    log = tmp_path / "ledger.log"
    proc, url = start_server("ledger", str(log))
    llm = OpenAIServer(responder=calls_then_answers("slow_once", {"entry": "e1", "seconds": 3})).start()
    try:
        runner = LocalRunner(agent(McpServer(url=url), llm, ["slow_once"], request_timeout=1.0))
        [answer] = runner.run([("s1", "record it")])
    finally:
        stop(proc)
        llm.stop()
    assert answer == 'Got: {"result": "recorded e1"}'
    [(first, e1), (second, again)] = _keys(log)
    assert first == second and e1 == again == "e1"  # one call, asked twice, one key
    [request] = [p for e in runner.history if isinstance(p := e.payload, DurableCallRequest)
                 and p.kind is CallKind.TOOL and p.attempt == 1]
    assert first == request.call_id
    # Whichever timer fired first (the MCP client's or the executor's), the error says
    # what timed out and after how long; a bare TimeoutError said nothing.
    [timeout] = [p.error for e in runner.history if isinstance(p := e.payload, DurableCallResult)
                 and p.call_id == request.call_id and p.attempt == 1]
    assert timeout is not None and timeout.type == "TimeoutError"
    assert "slow_once" in timeout.message and re.search(r"within (1 s|timeout_ms=1000)", timeout.message)


def test_a_call_cut_off_by_its_own_timeout_says_what_and_after_how_long(tmp_path: Path) -> None:
    from eddies.connectors.remote import mcp

    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    llm = OpenAIServer(responder=calls_then_answers("slow_once", {"entry": "e1", "seconds": 3})).start()
    try:
        runner = LocalRunner(agent(McpServer(url=url), llm, ["slow_once"], request_timeout=1.0))
        tool = runner.plan.resource("slow_once", ResourceType.TOOL)
        with pytest.raises(TimeoutError) as got:  # the client's timer, not the executor's
            mcp.call_tool(runner.plan, tool, {"entry": "e2", "seconds": 3}, "k1")
    finally:
        stop(proc)
        llm.stop()
    assert str(got.value) == f"MCP server {url}: slow_once: no answer within 1 s"


def test_a_server_killed_and_restarted_between_calls(tmp_path: Path) -> None:
    log = tmp_path / "ledger.log"
    port = free_port()
    proc, url = start_server("ledger", str(log), port=port)
    llm = OpenAIServer(responder=calls_then_answers("record", {"entry": "e"})).start()
    try:
        runner = LocalRunner(agent(McpServer(url=url), llm, ["record"]))
        assert runner.run([("s1", "one")]) == ['Got: {"result": "recorded e"}']
        stop(proc)
        proc, _ = start_server("ledger", str(log), port=port)
        assert runner.run([("s1", "two")]) == ['Got: {"result": "recorded e"}']  # reconnected
    finally:
        stop(proc)
        llm.stop()
    keys = [k for k, _ in _keys(log)]
    assert len(keys) == 2 and keys[0] != keys[1]
    outputs = [e.payload for e in runner.outputs if isinstance(e.payload, OutputEvent)]
    assert all(o.error is None for o in outputs)


def test_a_stdio_server_that_dies_in_a_call_says_why_in_the_error(tmp_path: Path) -> None:
    """The end of its stderr is in the call's error; the next call starts it again."""
    from eddies.connectors.remote.discovery import discover_tools
    from eddies.connectors.remote.mcp import McpConnectionError, call_tool
    from eddies.engine import AgentPlan

    log = tmp_path / "ledger.log"
    server = McpServer(command=sys.executable, args=("-m", "tests.mcp_servers", "ledger-stdio", str(log)),
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    declared = agent(server, OpenAIServer(), ["record", "crash"])
    discover_tools(declared)
    plan = AgentPlan.compile(declared)
    with pytest.raises(McpConnectionError) as died:
        call_tool(plan, plan.tool("crash"), {"reason": "the disk is full"}, key="s1:r1:i1:c0")
    assert str(died.value).startswith(f"MCP server {sys.executable}: crash: "), died.value
    assert str(died.value).endswith("its stderr ends with:\n    crashing: the disk is full"), died.value
    assert call_tool(plan, plan.tool("record"), {"entry": "e"}, key="s1:r1:i1:c1") == {"result": "recorded e"}


def test_a_worker_killed_during_an_mcp_call(settings: Any, tmp_path: Path) -> None:
    """SIGKILL while the server performs the call; restarted, the worker asks again with
    the same idempotency key (seen twice at the server) and the answer is written once."""
    from eddies.connectors.runtime.client import producer, read_events, send_input
    from eddies.connectors.runtime.topics import TopicNames
    from tests.integration.workers import start_worker, stop_worker, wait_until

    log = tmp_path / "ledger.log"
    proc, url = start_server("ledger", str(log), "4")  # each call takes 4 s
    llm = OpenAIServer(responder=calls_then_answers("record", {"entry": "e1"})).start()
    env = {"TEST_OPENAI_BASE": llm.base_url, "TEST_MCP_URL": url}
    wlog = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:mcp_ledger_http", wlog, **env)
    try:
        prod = producer(settings)
        send_input(settings, "s1", "record e1", prod=prod)
        prod.flush(30)
        wait_until("the call at the server", lambda: log.exists() and log.read_text(), worker, wlog)
        worker.kill()
        worker.wait(10)
        worker = start_worker(settings, "tests.integration.agents:mcp_ledger_http", wlog, **env)

        def answers() -> list[Any]:
            return [e for e in read_events(settings, TopicNames(settings.app).output)
                    if isinstance(e.payload, OutputEvent)]
        [out] = wait_until("the answer", answers, worker, wlog, timeout=90)
        time.sleep(1)  # nothing more comes
        assert len({e.event_id for e in answers()}) == 1
    finally:
        stop_worker(worker)
        stop(proc)
        llm.stop()
    assert out.payload.output == 'Got: {"result": "recorded e1"}'
    [(first, _), (second, _)] = _keys(log)
    assert first == second  # the same call, asked again after the crash


SECRET = "sk-test-5ecret-9f2c"


def test_an_api_key_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     caplog: pytest.LogCaptureFixture) -> None:
    from eddies.events import encode

    monkeypatch.setenv("LEDGER_KEY", SECRET)
    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    llm = OpenAIServer(responder=calls_then_answers("record", {"entry": "e"})).start()
    try:
        server = McpServer(url=url, api_key_env="LEDGER_KEY", headers={"X-Token": "${LEDGER_KEY}"})
        runner = LocalRunner(agent(server, llm, ["record"]))
        assert runner.run([("s1", "one")]) == ['Got: {"result": "recorded e"}']
    finally:
        stop(proc)
        llm.stop()
    unreachable = McpServer(url=f"http://user:{SECRET}@127.0.0.1:9/mcp?key={SECRET}",
                            api_key_env="LEDGER_KEY")
    with pytest.raises(ConfigurationError) as failed:  # at start: the declaration's to fix
        LocalRunner(agent(unreachable, OpenAIServer(), ["record"]))
    assert "MCP server 'srv' (http://127.0.0.1:9/mcp): cannot connect" in str(failed.value)
    written = b"".join(encode(e) for e in runner.history) + str(failed.value).encode()
    written += "".join(r.getMessage() for r in caplog.records).encode()
    assert SECRET.encode() not in written


def test_an_image_a_tool_gives_reaches_the_model_and_the_rest_is_said(tmp_path: Path) -> None:
    import base64

    from eddies.engine.content import split_blocks
    from eddies.events import ContentKind, decode_value

    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    llm = OpenAIServer(responder=calls_then_answers("brochure", {})).start()
    try:
        runner = LocalRunner(agent(McpServer(url=url), llm, ["brochure"]))
        [answer] = runner.run([("s1", "show")])
    finally:
        stop(proc)
        llm.stop()
    # The text says what every part was, for a model that reads text only ...
    assert json.loads(answer.removeprefix("Got: ")) == (
        "Our brochure:\n[image image/png, 95 bytes]\n"
        "[resource file:///guide/lisbon.txt]\nHostels in Alfama from 18 euros.\n"
        "[resource link map: https://example.invalid/map.pdf]")
    # ... and the image itself went to the model over HTTP, in a user message after the
    # tool's (the API takes images there only).
    png = b"\x89PNG" + b"0" * 91
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent[-2:]] == ["tool", "user"]
    parts = sent[-1]["content"]
    assert parts[1] == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(png).decode()}}
    # The call's outcome keeps the blocks (the image's bytes, the link's uri): a replay
    # gives the model the same.
    [outcome] = [e.payload for e in runner.history if isinstance(e.payload, DurableCallResult)
                 and e.payload.kind is CallKind.TOOL]
    _, [image, link] = split_blocks(decode_value(outcome.value))
    assert (image.kind, image.data, image.size) == (ContentKind.IMAGE, png, 95)
    assert (link.kind, link.uri, link.data) == (ContentKind.RESOURCE, "https://example.invalid/map.pdf",
                                                None)
    assert replay(runner.plan, list(enumerate(runner.history)), "s1").ok


def test_a_prompt_served_by_an_mcp_server_opens_the_conversation(tmp_path: Path) -> None:
    from eddies import McpPrompt, ScriptedChatModel

    def planner(prompt: McpPrompt) -> ReActAgent:
        a = ReActAgent("planner", model="llm", prompt="plan", config={"city": "Lisbon"})
        a.add_resource("srv", ResourceType.MCP_SERVER, McpServer(url=url))
        a.add_resource("plan", ResourceType.PROMPT, prompt)
        a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(roles_and_contents))
        a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
        return a

    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    try:
        # {city} goes to the server as a mark and comes back a placeholder, filled from the
        # config; the braces the server wrote stay text.
        [answer] = LocalRunner(planner(McpPrompt("srv", "trip_plan", {"city": "{city}", "days": "2"}))).run(
            [("s1", "in May")])
        assert answer == 'user: Plan 2 days in Lisbon. Answer as JSON like {"days": [...]}. | user: in May'
        with pytest.raises(ConfigurationError, match="has no prompt 'trip'; it offers: trip_plan"):
            LocalRunner(planner(McpPrompt("srv", "trip")))
        with pytest.raises(ConfigurationError, match="'trip_plan' needs the arguments city"):
            LocalRunner(planner(McpPrompt("srv", "trip_plan", {"days": "2"})))
        from eddies.connectors.declarative.yaml_agents import load_yaml_text

        declared = load_yaml_text(MCP_PROMPT_YAML.replace("URL", url))
        assert LocalRunner(declared).run([("s1", "in May")]) == [answer.replace("2 days", "3 days")]
        from eddies.connectors.declarative.sql_agents import load_sql_text

        declared = load_sql_text(MCP_PROMPT_SQL.replace("URL", url))
        assert LocalRunner(declared).run([("s1", "in May")]) == [answer.replace("2 days", "3 days")]
    finally:
        stop(proc)


MCP_PROMPT_YAML = """\
agents:
  - name: planner
    type: react
    model: llm
    prompt: plan
    config: {city: Lisbon}
    mcp_servers:
      - {name: srv, endpoint: "URL"}
    prompts:
      - {name: plan, mcp_server: srv, prompt: trip_plan, arguments: {city: "{city}"}}
    chat_model_connections:
      - {name: conn, clazz: scripted, responder: "tests.integration.test_mcp:roles_and_contents"}
    chat_model_setups:
      - {name: llm, connection: conn}
"""


MCP_PROMPT_SQL = """\
CREATE CONNECTION srv WITH ('type' = 'mcp_server', 'endpoint' = 'URL');
CREATE PROMPT plan USING CONNECTION srv WITH ('prompt' = 'trip_plan', 'arguments.city' = '{city}');
CREATE CONNECTION conn WITH ('type' = 'scripted',
                             'responder' = 'tests.integration.test_mcp:roles_and_contents');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE AGENT planner USING MODEL llm USING PROMPT plan WITH ('config.city' = 'Lisbon');
"""


def roles_and_contents(messages: list[Any], tools: list[Any]) -> str:
    """Answers with the messages it was sent."""
    return " | ".join(f"{m.role.value}: {m.content}" for m in messages)


def test_an_image_over_the_inline_limit_travels_by_reference_to_its_blob_store(tmp_path: Path) -> None:
    import base64

    from eddies.connectors.stores.blobs import FolderBlobStore
    from eddies.engine.content import MAX_INLINE_BYTES, split_blocks
    from eddies.events import decode_value
    from tests.mcp_servers import poster_bytes

    blobs = FolderBlobStore(tmp_path / "blobs")
    proc, url = start_server("ledger", str(tmp_path / "ledger.log"))
    llm = OpenAIServer(responder=calls_then_answers("poster", {"kib": 400})).start()
    try:
        a = agent(McpServer(url=url, blob_store=blobs), llm, ["poster"])
        [conn] = [r for r in a.resources if r.name == "conn"]
        conn.obj.blob_store = blobs  # the model reads what the tool wrote
        runner = LocalRunner(a)
        [answer] = runner.run([("s1", "a poster")])
        without = LocalRunner(agent(McpServer(url=url), llm, ["poster"]))
        [told] = without.run([("s2", "a poster")])
    finally:
        stop(proc)
        llm.stop()
    image = poster_bytes(400)
    assert len(image) > MAX_INLINE_BYTES
    [outcome] = [e.payload for e in runner.history if isinstance(e.payload, DurableCallResult)
                 and e.payload.kind is CallKind.TOOL]
    _, [block] = split_blocks(decode_value(outcome.value))
    assert block.data is None and block.size == len(image) and block.uri.startswith("eddies-blob:")
    assert len(outcome.value) < 2_000  # the session holds the reference, not the 400 KiB
    assert blobs.get(block.uri) == image
    sent = llm.requests[1]["messages"][-1]["content"]  # the first session's second model call
    assert sent[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(image).decode()
    assert "[image image/png, 409600 bytes]" in answer
    # Without a blob store the bytes are not carried, and the text says so.
    assert "409600 bytes: over the 262144-byte limit, not passed on" in told
