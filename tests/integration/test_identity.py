"""Who asked, on a worker (issue 57): `eddies send --user --tenant` signs the input's
identity with the identity key (on the embedded broker, its public development key); the
worker admits it, and it reaches a tool by injection, an A2A sub-agent (a real `a2a-sdk`
server, which logs the headers it got) as the Eddies-User and Eddies-Tenant headers, and
the trace. An identity that is not signed, or signed with another key, is cleared: that
input runs anonymous."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eddies.connectors.inspect.otel import spans_of
from eddies.connectors.runtime.client import read_events, send_input
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import identity_signer
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import Identity, InputEvent
from tests.integration.tool_servers import start_server, stop
from tests.integration.workers import ROOT, answers, start_worker, stop_worker, wait_until

pytestmark = pytest.mark.integration

AGENT = "tests.integration.identity_agents:identity_agent"


def test_who_asked_reaches_a_tool_an_a2a_agent_and_the_trace_only_when_signed(
        settings: Settings, tmp_path: Path) -> None:
    a2a_log = tmp_path / "echo.log"
    a2a, port = start_server("tests.a2a_servers", "echo", str(a2a_log))
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log, TEST_A2A_URL=f"http://127.0.0.1:{port}")
    try:
        sent = subprocess.run(
            [sys.executable, "-m", "eddies", "send", "signed", "hello", "--user", "ann", "--tenant", "acme",
             "--app", settings.app, "--bootstrap-servers", settings.bootstrap_servers],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr
        blocked = subprocess.run(
            [sys.executable, "-m", "eddies", "send", "blocked", "hello", "--user", "cy",
             "--tenant", "blocked-co", "--app", settings.app,
             "--bootstrap-servers", settings.bootstrap_servers],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert blocked.returncode == 0, blocked.stderr
        # A producer that claims an identity without the key: not believed.
        send_input(settings, "claimed", "hello", identity=Identity("root", "admin-co"))
        forger = identity_signer("FORGED", allow_dev_key=False, environ={"FORGED": "f" * 32})
        send_input(settings, "forged", "hello", identity=Identity("root", "admin-co"), signer=forger)
        done = wait_until("four answers", lambda: len(answers(settings)) == 4 and answers(settings), worker,
                          log, timeout=120)
    finally:
        stop_worker(worker)
        stop(a2a)
    said = {e.session_id: e.payload.output for e in done}
    refused = said.pop("blocked")
    assert said == {"signed": "ann of acme; echo: hello", "claimed": "None of None; echo: hello",
                    "forged": "None of None; echo: hello"}, said
    # A hook asked where the call is made (on the executor's call loop) refused the A2A
    # agent to that tenant: the call was never sent, its refusal is what the action got.
    assert refused.startswith("cy of blocked-co; ") and \
        "refused by hook 'policy': no sub-agents for blocked-co" in refused, refused
    # The A2A agent was told who asked, by headers, for the signed input only.
    heard = [json.loads(line) for line in Path(f"{a2a_log}.headers").read_text().splitlines()]
    assert sorted(((h["eddies-user"], h["eddies-tenant"]) for h in heard), key=str) == [
        ("ann", "acme"), (None, None), (None, None)], heard
    # The history records who asked (the verified identity, nothing else) ...
    history = list(read_events(settings, TopicNames(settings.app).events))
    recorded = {e.session_id: e.payload.identity for e in history if isinstance(e.payload, InputEvent)}
    assert recorded == {"signed": Identity("ann", "acme"), "claimed": None, "forged": None,
                        "blocked": Identity("cy", "blocked-co")}
    # ... and the trace shows it on the run's span and its calls'.
    spans = spans_of([e for e in history if e.session_id == "signed"])
    users = {s.name: s.attributes.get("enduser.id") for s in spans}
    assert users and set(users.values()) == {"ann"}, users
    assert {s.attributes.get("eddies.tenant") for s in spans} == {"acme"}
