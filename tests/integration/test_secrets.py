"""No secret is ever written: one API key, given to a worker of an agent declared in SQL as
``'${NAME}'``, authenticates its model provider, its MCP server and its A2A agent, and
then every session of the tools issue runs: an MCP call, an MCP error, an A2A task, a
function tool that returns the key, one that raises it, a model that writes it, a
provider error that quotes it, and a record for the dead-letter topic. Every record of
every topic of the app, every log line (JSON, at INFO) and every metric is scanned for
the key: zero hits, while the servers show they were sent it."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

from eddies.events import OutputEvent
from tests.integration.tool_servers import free_port, start_server, stop
from tests.openai_server import OpenAIServer

SECRET = "sk-eddies-5ecret-31f7a9c2"
A2A_TOOL = "Echo_Agent"  # the echo agent's card name, as a tool name

SQL = """\
CREATE CONNECTION provider WITH (
  'type' = 'openai', 'endpoint' = '{model_url}', 'api-key' = '${{KEEPER_API_KEY}}');
CREATE MODEL llm WITH ('provider' = 'openai', 'openai.connection' = 'provider',
                       'openai.model_version' = 'test-model');
CREATE CONNECTION ledger WITH (
  'type' = 'mcp_server', 'endpoint' = '{mcp_url}', 'api-key' = '${{KEEPER_API_KEY}}',
  'headers.X-Token' = '${{KEEPER_API_KEY}}');
CREATE CONNECTION helper WITH ('type' = 'a2a', 'endpoint' = '{a2a_url}',
                               'api-key' = '${{KEEPER_API_KEY}}');
CREATE TOOL book USING CONNECTION ledger WITH ('type' = 'mcp', 'allowed_tools' = 'record,fail');
CREATE TOOL ask USING CONNECTION helper WITH ('type' = 'a2a',
                                              'agent_card_path' = '/.well-known/agent-card.json');
CREATE FUNCTION whoami AS 'tests.integration.test_secrets.whoami' LANGUAGE PYTHON;
CREATE TOOL leak USING FUNCTION whoami WITH ('type' = 'function', 'idempotent' = TRUE);
CREATE AGENT keeper USING MODEL llm USING PROMPT 'You keep secrets.' USING TOOLS book, ask, leak
  WITH ('handle_exception' = 'CONTINUE');
"""


def whoami(how: str) -> str:
    """A careless tool: it returns, or raises with, the key it finds in its environment."""
    key = os.environ["KEEPER_API_KEY"]
    if how == "raise":
        raise PermissionError(f"the key {key} may not do that")
    return f"I run with the key {key}"


#: Session -> the tool the model calls and its arguments (None: it answers at once).
CALLS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "mcp": ("record", {"entry": "e1"}),
    "mcp-error": ("fail", {"reason": f"rejected {SECRET}"}),
    "mcp-echo": ("record", {"entry": f"note {SECRET}"}),
    "a2a": (A2A_TOOL, {"prompt": "hello"}),
    "returns": ("leak", {"how": "return"}),
    "raises": ("leak", {"how": "raise"}),
    "says": None,
}


def model(body: dict[str, Any]) -> dict[str, Any]:
    """Calls the session's tool, then answers with its result; one session's model writes
    the key itself (in a tool call's arguments, then in its answer)."""
    messages = body["messages"]
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    call = CALLS[prompt]
    if messages[-1]["role"] == "tool" or call is None:
        said = messages[-1]["content"] if messages[-1]["role"] == "tool" else f"my key is {SECRET}"
        return {"role": "assistant", "content": f"Got: {said}"}
    name, args = call
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call_{len(messages)}", "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)}}]}


def test_no_secret_is_written_anywhere(settings: Any, tmp_path: Path) -> None:
    from eddies.connectors.runtime.client import producer, read_events, read_records, send_input
    from eddies.connectors.runtime.topics import TopicNames
    from tests.integration.workers import start_worker, stop_worker, wait_until

    ledger_log, echo_log = tmp_path / "ledger.log", tmp_path / "echo.log"
    mcp, mcp_port = start_server("tests.mcp_servers", "ledger", str(ledger_log))
    a2a, a2a_port = start_server("tests.a2a_servers", "echo", str(echo_log), env={"A2A_TEST_TOKEN": SECRET})
    llm = OpenAIServer(responder=model).start()
    sql = tmp_path / "keeper.sql"
    sql.write_text(SQL.format(model_url=llm.base_url, mcp_url=f"http://127.0.0.1:{mcp_port}/mcp",
                              a2a_url=f"http://127.0.0.1:{a2a_port}"))
    metrics_port = free_port()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, str(sql), log, option="--sql",
                          args=("--log-format", "json", "--metrics-port", str(metrics_port),
                                "--metrics-host", "127.0.0.1"),
                          KEEPER_API_KEY=SECRET, EDDIES_LOG_LEVEL="INFO")
    topics = TopicNames(settings.app)

    def outputs() -> dict[str, OutputEvent]:
        return {e.session_id: e.payload for e in read_events(settings, topics.output)
                if isinstance(e.payload, OutputEvent)}
    try:
        prod = producer(settings)
        for session in CALLS:
            send_input(settings, session, session, prod=prod)
        prod.produce(topics.input, key=b"garbage", value=b"\x00not an event")  # to the DLQ
        prod.flush(30)
        wait_until("an answer in every session", lambda: len(outputs()) == len(CALLS), worker, log,
                   timeout=120)
        llm.fail(401, message="Incorrect API key provided: {authorization}")
        send_input(settings, "refused", "says", prod=prod)
        prod.flush(30)
        wait_until("the refused session's answer", lambda: "refused" in outputs(), worker, log)
        time.sleep(1)  # the journal and the DLQ written meanwhile
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as got:
            metrics = got.read()
    finally:
        stop_worker(worker)
        stop(mcp)
        stop(a2a)
        llm.stop()
    answers = outputs()

    # The key reached every server it is for.
    assert set(llm.authorizations) == {f"Bearer {SECRET}"}
    sent = [json.loads(line) for line in Path(f"{echo_log}.headers").read_text().splitlines()]
    assert sent and all(h["authorization"] == f"Bearer {SECRET}" for h in sent)
    # And every session ran: what would have been written holds the mask instead.
    assert answers["mcp"].output == 'Got: {"result": "recorded e1"}'
    assert answers["a2a"].output == 'Got: "echo: hello"'
    assert answers["returns"].output == 'Got: "I run with the key [secret]"'
    assert "[secret]" in str(answers["raises"].output) and "PermissionError" in str(answers["raises"].output)
    assert answers["mcp-error"].output == "Got: error: McpToolError: Error executing tool fail"
    # What the model wrote was masked before a tool was asked: the server never saw the key.
    assert answers["mcp-echo"].output == 'Got: {"result": "recorded note [secret]"}'
    assert SECRET not in ledger_log.read_text() and "note [secret]" in ledger_log.read_text()
    assert answers["says"].output == "Got: my key is [secret]"
    assert answers["refused"].error is not None and "[secret]" in answers["refused"].error.message

    # Zero hits: records (keys, values, headers) of every topic, the log, the metrics.
    written = [metrics, log.read_bytes()]
    for topic in topics.all():
        for record in read_records(settings, topic):
            written += [record.key() or b"", record.value() or b""]
            written += [(v or b"") for _, v in record.headers() or []]
    assert sum(1 for r in read_records(settings, topics.dlq)) == 1
    assert b"eddies_" in metrics and b'"level": "INFO"' in log.read_bytes()
    hits = [chunk[max(0, i - 80):i + 80] for chunk in written
            if (i := chunk.find(SECRET.encode())) >= 0]
    assert hits == []
