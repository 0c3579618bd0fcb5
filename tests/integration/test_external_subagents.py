"""External sub-agents: an HTTP one (a server on 127.0.0.1 that honours Idempotency-Key)
and an A2A one served by a real ``a2a-sdk`` server in a subprocess; their calls are durable
calls the executor performs, each carrying its call id; failures and timeouts are failed
Results; after a worker is SIGKILLed between sending an A2A message and hearing its answer,
the restarted worker reconciles the call by looking its task up instead of sending again."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eddies import A2ASubagentSetup, Agent, HttpSubagentSetup, InputEvent, LocalRunner, OutputEvent, action
from eddies.engine import ResourceType
from eddies.events import DurableCallRequest
from tests.integration.tool_servers import free_port, start_server, stop

pytestmark = pytest.mark.integration


class Asks(Agent):
    """Asks sub-agent ``helper`` each comma-separated part of its input, in turn."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        helper = ctx.get_resource("helper", ResourceType.AGENT)
        said = []
        for part in str(event.input).split(","):
            result = helper.call(ctx, part, timeout=1 if part == "slow" else None)
            said.append(result.result if result.success else result.exception.error_type)
        ctx.send_event(OutputEvent(output=said))


class _Agents(ThreadingHTTPServer):
    """An HTTP sub-agent: answers each prompt once per Idempotency-Key (a repeat gets the
    first answer); ``fail`` is its own error, ``slow`` takes 3 s."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, dict[str, Any]]] = []
        self.ports: list[int] = []  # the client's port of each request
        self.identities: list[tuple[str | None, str | None]] = []  # who asked, as each request said
        self.answers: dict[str, bytes] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # a client may keep its connection

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key")
                server.seen.append((key, {**body, "authorization": self.headers.get("Authorization")}))
                server.ports.append(self.client_address[1])
                server.identities.append((self.headers.get("Eddies-User"), self.headers.get("Eddies-Tenant")))
                if key not in server.answers:
                    prompt = body["prompt"]
                    if prompt == "slow":
                        time.sleep(3)
                    answer = ({"error": "cannot do that"} if prompt == "fail"
                              else {"output": f"done: {prompt}"})
                    server.answers[key or ""] = json.dumps(answer).encode()
                data = server.answers[key or ""]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/agent"


def test_an_http_sub_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELPER_KEY", "sk-helper-1234")
    server = _Agents()
    try:
        agent = Asks("asks")
        agent.add_resource("helper", ResourceType.AGENT, HttpSubagentSetup(
            server.url, description="Does things.", api_key_env="HELPER_KEY"))
        runner = LocalRunner(agent)
        [out] = runner.run([("s1", "one,fail,slow,two")])
    finally:
        server.shutdown()
        server.server_close()
    assert out == ["done: one", "HttpSubagentError", "SubagentTimeoutError", "done: two"]
    calls = [e.payload.call_id for e in runner.history if isinstance(e.payload, DurableCallRequest)
             and e.payload.kind.value == "SUBAGENT"]
    assert [key for key, _ in server.seen] == calls  # each call's id as its Idempotency-Key
    assert server.seen[0][1] == {"prompt": "one", "session_id": None, "call_id": calls[0],
                                 "authorization": "Bearer sk-helper-1234"}


def test_an_http_sub_agent_is_told_who_asked() -> None:
    from eddies import Identity

    server = _Agents()
    try:
        asks = Asks("asks").add_resource("helper", ResourceType.AGENT, HttpSubagentSetup(server.url))
        runner = LocalRunner(asks)
        runner.submit("s1", "one", identity=Identity("ann", tenant="acme"))
        runner.submit("s2", "two", identity=Identity("bob"))
        runner.submit("s3", "three")
        runner.run_until_idle()
    finally:
        server.shutdown()
        server.server_close()
    assert sorted(server.identities, key=str) == [("ann", "acme"), ("bob", None), (None, None)]


def test_an_http_sub_agent_on_the_call_loop_answers_and_fails_as_on_a_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker awaits perform_async on its call loop: the same request (body, key, bearer
    token), the same answer, the same errors as perform; the loop's calls share a client,
    which keeps its connections."""
    import asyncio

    from eddies.connectors.remote.external_subagents import HttpSubagentError
    from eddies.engine.durable import SubagentTimeoutError

    monkeypatch.setenv("HELPER_KEY", "sk-helper-1234")
    server = _Agents()
    setup = HttpSubagentSetup(server.url, api_key_env="HELPER_KEY")

    async def ask(prompt: str, call_id: str, timeout_s: float = 5.0) -> Any:
        return await setup.perform_async(prompt, session_id="sub-1", call_id=call_id, timeout_s=timeout_s)

    async def one_after_another() -> list[Any]:
        return [await ask("four", "c4"), await ask("five", "c5")]

    try:
        assert asyncio.run(one_after_another()) == ["done: four", "done: five"]
        assert server.ports[0] == server.ports[1]  # the loop's client kept its connection
        assert asyncio.run(ask("one", "c1")) == "done: one" == setup.perform(
            "one", session_id="sub-1", call_id="c1", timeout_s=5.0)
        with pytest.raises(HttpSubagentError, match="cannot do that"):
            asyncio.run(ask("fail", "c2"))
        with pytest.raises(SubagentTimeoutError, match="no answer within 1 s"):
            asyncio.run(ask("slow", "c3", timeout_s=1.0))
    finally:
        server.shutdown()
        server.server_close()
    assert server.seen[2] == ("c1", {"prompt": "one", "session_id": "sub-1", "call_id": "c1",
                                     "authorization": "Bearer sk-helper-1234"})
    assert server.seen[3] == server.seen[2]  # perform sent the same


def test_an_a2a_sub_agent_served_by_a2a_sdk(tmp_path: Path) -> None:
    proc, port = start_server("tests.a2a_servers", "echo", str(tmp_path / "echo.log"))
    try:
        agent = Asks("asks")
        agent.add_resource("helper", ResourceType.AGENT, A2ASubagentSetup(f"http://127.0.0.1:{port}"))
        runner = LocalRunner(agent)
        [out] = runner.run([("s1", "hello,fail,data please,slow")])
    finally:
        stop(proc)
    assert out == ["echo: hello", "A2aTaskError", {"echo": "data please", "n": 1}, "SubagentTimeoutError"]
    [timed_out] = [e.payload.error for e in runner.history if e.type == "DurableCallResult"
                   and e.payload.error is not None and e.payload.error.type == "SubagentTimeoutError"]
    assert "no answer within 1 s; task" in timed_out.message and timed_out.message.endswith(" canceled")


def test_an_a2a_sub_agent_whose_card_cannot_be_fetched_fails_at_start(tmp_path: Path) -> None:
    from eddies.connectors.remote.configuration import ConfigurationError

    proc, port = start_server("tests.a2a_servers", "echo", str(tmp_path / "echo.log"))
    try:  # an A2A server, but the card is not where the setup says
        agent = Asks("asks")
        agent.add_resource("helper", ResourceType.AGENT,
                           A2ASubagentSetup(f"http://127.0.0.1:{port}", agent_card_path="/nope.json"))
        with pytest.raises(ConfigurationError, match=f"sub-agent 'helper': cannot fetch the agent card "
                                                     f"of its A2A server at http://127.0.0.1:{port}"
                                                     f"/nope.json: HTTP 404"):
            LocalRunner(agent)
    finally:
        stop(proc)
    nobody = free_port()  # nothing listens: refused, at start, not at the first call
    agent = Asks("asks")
    agent.add_resource("helper", ResourceType.AGENT, A2ASubagentSetup(f"http://127.0.0.1:{nobody}"))
    with pytest.raises(ConfigurationError, match="sub-agent 'helper': cannot fetch the agent card"):
        LocalRunner(agent)


def test_a_worker_killed_between_send_and_answer_reconciles_by_task(settings: Any, tmp_path: Path) -> None:
    """The echo agent takes 3 s over a "slow" message; the worker is killed once it has sent
    it. Restarted, the call's outcome is unknown: its task is looked up by the message id
    and followed to its end; the agent got the message once, the session answers once."""
    from eddies.connectors.runtime.client import producer, send_input
    from tests.integration.workers import answers, start_worker, stop_worker, wait_until

    echo_log = tmp_path / "echo.log"
    proc, port = start_server("tests.a2a_servers", "echo", str(echo_log))
    env = {"TEST_A2A_URL": f"http://127.0.0.1:{port}"}
    log = tmp_path / "worker.log"
    agent = "tests.integration.agents:a2a_asker"
    worker = start_worker(settings, agent, log, EDDIES_LOG_LEVEL="INFO", **env)
    try:
        prod = producer(settings)
        send_input(settings, "s1", "slow one", prod=prod)
        prod.flush(30)
        wait_until("the message at the agent", lambda: echo_log.exists() and echo_log.read_text(),
                   worker, log, timeout=90)
        worker.kill()
        worker.wait(10)
        worker = start_worker(settings, agent, log, EDDIES_LOG_LEVEL="INFO", **env)

        [out] = wait_until("the answer", lambda: answers(settings), worker, log, timeout=90)
        time.sleep(1)
        assert len({e.event_id for e in answers(settings)}) == 1
    finally:
        stop_worker(worker)
        stop(proc)
    assert out.payload.output == "echo: slow one"
    assert len(echo_log.read_text().splitlines()) == 1  # looked up, not sent again
    worker_log = log.read_text()
    assert "the task of call s1:r1:i1:c0 found" in worker_log and "not found" not in worker_log


def test_a_workers_a2a_calls_wait_on_its_call_loop_not_a_thread_each(settings: Any, tmp_path: Path) -> None:
    """24 sessions each send the echo agent a message it takes 3 s over: the worker's 8
    call threads would send them in three waves, 3 s apart; on the call loop (each claimed
    first: an A2A call is not idempotent) they are all at the agent at once."""
    from eddies.connectors.runtime.client import producer, send_input
    from tests.integration.workers import answers, start_worker, stop_worker, wait_until

    sessions = 24
    echo_log = tmp_path / "echo.log"
    proc, port = start_server("tests.a2a_servers", "echo", str(echo_log))
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.agents:a2a_asker", log,
                          TEST_A2A_URL=f"http://127.0.0.1:{port}", EDDIES_EXECUTOR_CONCURRENCY="8")
    try:
        prod = producer(settings)
        for n in range(sessions):
            send_input(settings, f"s{n}", f"slow {n}", prod=prod)
        prod.flush(30)
        said = wait_until("every answer", lambda: len(answers(settings)) >= sessions and answers(settings),
                          worker, log, timeout=120)
    finally:
        stop_worker(worker)
        stop(proc)
    assert sorted(a.payload.output for a in said) == sorted(f"echo: slow {n}" for n in range(sessions))
    arrived = [float(t) for t in Path(f"{echo_log}.times").read_text().split()]
    assert len(arrived) == sessions  # each message sent once
    assert max(arrived) - min(arrived) < 4.0, sorted(round(t - min(arrived), 2) for t in arrived)
