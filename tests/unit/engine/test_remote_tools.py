"""MCP and A2A tool resources, offline: what is checked when they are made, how URLs are
named, and how a plan holds an A2A agent (one tool, named by its card, taking a prompt)."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    A2aServer,
    A2aTool,
    AgentPlan,
    ChatModelSetup,
    LocalRunner,
    McpServer,
    PlanError,
    ReActAgent,
    ResourceType,
    ScriptedChatModel,
)
from eddies.engine.remote_tools import A2A_PARAMETERS, RemoteTool, a2a_spec, redact_url, tool_name
from eddies.events import CallKind, Identity

CARD = "/.well-known/agent-card.json"


def test_an_a2a_tool_needs_its_card_path() -> None:
    with pytest.raises(ValueError, match="A2aTool on 'helper': agent_card_path is required.*got ''"):
        A2aTool("helper")
    with pytest.raises(ValueError, match="agent_card_path is required.*got 'agent.json'"):
        A2aTool("helper", agent_card_path="agent.json")  # a path on the server: from '/'
    assert A2aTool("helper", agent_card_path=CARD).agent_card_path == CARD


@pytest.mark.parametrize(("options", "error"), [
    ({"name": "two words"}, r"A2aTool.name: expected 1 to 64 letters"),
    ({"name": "x" * 65}, r"A2aTool.name"),
    ({"max_retries": -1}, r"A2aTool.max_retries: expected a whole number >= 0, got -1"),
    ({"max_retries": True}, r"A2aTool.max_retries"),
    ({"request_timeout": 0}, r"A2aTool.request_timeout: expected a positive number of seconds"),
])
def test_an_a2a_tool_checks_its_options(options: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        A2aTool("helper", agent_card_path=CARD, **options)


def test_an_a2a_server_takes_a_key_s_name_not_the_key() -> None:
    with pytest.raises(ValueError, match=r"A2aServer.api_key_env: 'sk-abc-123' is not the name of an "
                                         r"environment variable \(the key's NAME goes here"):
        A2aServer("http://helper:9999", api_key_env="sk-abc-123")
    assert A2aServer("http://helper:9999", api_key_env="HELPER_KEY").api_key_env == "HELPER_KEY"
    with pytest.raises(ValueError, match="McpServer.api_key_env"):
        McpServer(url="http://mcp/", api_key_env="sk-abc-123")


def test_an_a2a_server_needs_an_http_url_and_is_named_without_credentials() -> None:
    for bad in ("", "helper:9999", "ftp://helper/", "http://"):
        with pytest.raises(ValueError, match="A2aServer.url: expected the agent's http"):
            A2aServer(bad)
    with pytest.raises(ValueError) as failed:
        A2aServer("ftp://user:s3cret@helper/?key=s3cret")
    assert "s3cret" not in str(failed.value)
    assert A2aServer("https://user:s3cret@helper:9999/agents?key=s3cret").where == "https://helper:9999/agents"
    assert McpServer(url="http://u:p@mcp/x?k=v").where == redact_url("http://u:p@mcp/x?k=v") == "http://mcp/x"


def test_a_card_name_becomes_a_tool_name() -> None:
    assert tool_name("Echo Agent") == "Echo_Agent"
    assert tool_name("  Währung / FX-Agent v2! ") == "W_hrung_FX-Agent_v2"
    assert tool_name("a" * 80) == "a" * 64
    assert tool_name("***") == "agent"
    spec = a2a_spec(A2aTool("h", agent_card_path=CARD), "Echo Agent", "Repeats.")
    assert (spec.name, spec.description, spec.parameters) == ("Echo_Agent", "Repeats.", A2A_PARAMETERS)
    own = a2a_spec(A2aTool("h", agent_card_path=CARD, name="echo", description="Mine."), "Echo Agent", "x")
    assert (own.name, own.description) == ("echo", "Mine.")


def _agent(tool: A2aTool, server: Any = None, connection: Any = None) -> ReActAgent:
    agent = ReActAgent("a2a", model="llm")
    agent.add_resource("helper", ResourceType.A2A_SERVER,
                       server if server is not None else A2aServer("http://helper:9999"))
    agent.add_resource("ask", ResourceType.TOOL, tool)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection or ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["ask"]))
    return agent


def _fetched(**options: Any) -> A2aTool:
    """An A2A tool as discover_tools leaves it (its card fetched)."""
    tool = A2aTool("helper", agent_card_path=CARD, **options)
    spec = a2a_spec(tool, "Echo Agent", "Repeats what it is told.")
    tool.discovered[spec.name] = spec
    return tool


def test_a_plan_offers_an_a2a_agent_as_one_tool() -> None:
    plan = AgentPlan.compile(_agent(_fetched(request_timeout=5, max_retries=4)))
    assert plan.offered_tools("llm") == ("Echo_Agent",)
    [spec] = plan.tool_specs("llm")
    assert spec.to_dict() == {"name": "Echo_Agent", "description": "Repeats what it is told.",
                              "parameters": A2A_PARAMETERS}
    tool = plan.tool("Echo_Agent")
    assert isinstance(tool, RemoteTool)
    assert (tool.protocol, tool.resource, tool.server, tool.idempotent) == ("a2a", "ask", "helper", True)
    assert plan.call_timeout(CallKind.TOOL, "Echo_Agent") == 5000
    retry = plan.retry_for(CallKind.TOOL, "Echo_Agent")
    assert retry is not None and retry.max_attempts == 5


def test_a_plan_needs_the_card_fetched_and_an_a2a_server() -> None:
    with pytest.raises(PlanError, match="'ask': the agent card of A2A server 'helper' was not fetched.*"
                                        "eddies.connectors.remote.discovery.discover_tools"):
        AgentPlan.compile(_agent(A2aTool("helper", agent_card_path=CARD)))
    with pytest.raises(PlanError, match="'ask': server 'helper' is not an A2A_SERVER resource "
                                        r"\(an A2aServer\)"):
        AgentPlan.compile(_agent(_fetched(), server=McpServer(url="http://helper/")))
    with pytest.raises(PlanError, match="'ask': A2A tool 'ask' has the name of a resource.*name="):
        AgentPlan.compile(_agent(_fetched(name="ask")))


def test_a_call_of_an_a2a_tool_goes_to_the_a2a_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    import eddies.connectors.remote.a2a as a2a

    calls: list[tuple[str, dict[str, Any], str]] = []

    async def call_tool_async(plan: AgentPlan, tool: RemoteTool, arguments: dict[str, Any], key: str,
                              identity: Identity | None) -> str:
        assert identity is None  # an anonymous input
        calls.append((tool.name, dict(arguments), key))
        return "echo: hi"

    # (LocalRunner awaits an A2A tool's call on its call loop, as a worker does.)
    monkeypatch.setattr(a2a, "call_tool_async", call_tool_async)
    runner = LocalRunner(_agent(_fetched()))  # its card already fetched: nothing is asked
    assert runner.run([("s1", '{"prompt": "hi"}')]) == ['The result is "echo: hi".']
    [(name, arguments, key)] = calls
    assert (name, arguments) == ("Echo_Agent", {"prompt": "hi"}) and key.startswith("s1:")


def test_an_agent_without_remote_tools_imports_no_sdk() -> None:
    import subprocess
    import sys

    code = ("import sys; from eddies import Agent, LocalRunner; LocalRunner(Agent('plain')); "
            "print(sorted({'a2a', 'mcp', 'httpx'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
