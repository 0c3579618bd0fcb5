"""Agents declared in YAML (Flink Agents' shape): the same agent declared in Python and in
YAML compiles to the same plan and writes the same events (same ids) on the same inputs;
unknown keys, wrong types and dangling references are errors with file, line and column;
``${NAME}`` reads the environment; ``eddies check`` validates offline."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eddies import (
    ChatModelSetup,
    FunctionTool,
    LocalRunner,
    PlanError,
    Prompt,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
)
from eddies.cli import app
from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.yaml_agents import load_yaml, load_yaml_text
from eddies.connectors.local import RunFailedError
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.connectors.runtime.settings import ConfigError, load_agent
from eddies.demo import calculator_agent
from eddies.engine import Agent, AgentPlan
from tests.agents import critic_by_version, draft_by_version
from tests.unit.engine import test_react

DEFS = Path(__file__).resolve().parents[2] / "definitions"


def described(plan: AgentPlan) -> Any:
    """What a plan holds, comparable across sources (connections by class)."""
    resources = {}
    for name, (kind, obj) in plan.resources.items():
        if kind is ResourceType.CHAT_MODEL_CONNECTION:
            obj = (type(obj).__name__, getattr(getattr(obj, "responder", None), "__name__", None))
        elif kind is ResourceType.AGENT:  # a sub-agent (the built-in general-purpose one): its plan
            obj = (type(obj).__name__, described(plan.subagents[name]))
        resources[name] = (kind, obj)
    actions = {n: (a.fn, a.triggers if all(isinstance(t, str) for t in a.triggers) else
                   tuple(t if isinstance(t, str) else t.event_type for t in a.triggers), a.config)
               for n, a in plan.actions.items()}
    return (plan.agent_name, plan.agent_version, actions, resources, plan.config, plan.retry,
            plan.timeouts, plan.budgets)


def events(agent: Agent, inputs: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    runner = LocalRunner(agent)
    for session, value in inputs:
        runner.submit(session, value)
    runner.run_until_idle()
    return [(e.event_id, e.type) for e in runner.history]


def python_react() -> ReActAgent:
    a = ReActAgent("react", model="llm", prompt="adder", config={"step": 10},
                   options=ReActOptions(max_iterations=5, handle_exception="CONTINUE",
                                        tokens_management_strategy="TRIM", max_tokens_threshold=2000))
    a.add_resource("adder", ResourceType.PROMPT, Prompt.from_messages([
        {"role": "system", "content": "You add numbers."}, {"role": "user", "content": "{input}"}]))
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(test_react.adds_twice))
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["add"]))
    a.add_resource("add", ResourceType.TOOL,
                   FunctionTool(test_react.add, name="add", inject={"b": "config:step"}))
    return a


def python_haiku() -> ReflectionAgent:
    a = ReflectionAgent("haiku", drafter="writer", critic="editor", drafter_prompt="You write haiku.",
                        critic_prompt="You judge haiku.",
                        options=ReflectionOptions(max_iterations=2, confidence_value=0.8))
    a.add_resource("w", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(draft_by_version))
    a.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(critic_by_version))
    a.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("w"))
    a.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("c"))
    return a


@pytest.mark.parametrize(("make", "path", "name", "inputs"), [
    (calculator_agent, DEFS / "calculator.yaml", None, [("a", '{"a": 2, "b": 3}'), ("b", "hi")]),
    (python_react, DEFS / "agents.yaml", "react", [("a", "add things")]),
    (python_haiku, DEFS / "agents.yaml", "haiku", [("a", "a tagline"), ("b", "never good")]),
])
def test_python_and_yaml_give_the_same_plan_and_the_same_events(
        make: Any, path: Path, name: str | None, inputs: list[tuple[str, Any]]) -> None:
    from_yaml = load_yaml(path, name)
    assert described(AgentPlan.compile(from_yaml)) == described(AgentPlan.compile(make()))
    written = events(from_yaml, inputs)
    assert written == events(make(), inputs)
    assert len(written) > 10


def test_load_agent_takes_a_yaml_file_and_an_agent_name() -> None:
    assert load_agent(f"{DEFS / 'agents.yaml'}#haiku").name == "haiku"
    with pytest.raises(ConfigError, match=r"agents.yaml:4:3: the file declares 2 agents \(react, haiku\)"):
        load_agent(str(DEFS / "agents.yaml"))


BASE = """\
agents:
  - name: a
    chat_model_connections:
      - {name: conn, clazz: scripted}
    chat_model_setups:
      - {name: llm, connection: conn, tools: [add]}
    tools:
      - {name: add, function: "eddies.demo:add"}
"""


@pytest.mark.parametrize(("change", "message"), [
    (("tools: [add]", "tools: [sub]"), "<yaml>:6:47: tool 'sub' is not declared in tools"),
    (("connection: conn", "connection: nope"), "<yaml>:6:33: connection 'nope' is not declared in "
                                               "chat_model_connections"),
    (("- name: a\n", "- name: a\n    colour: blue\n"), "<yaml>:3:5: 'colour' is not a key of an agent"),
    # A misspelt name or key: the error says which one was meant.
    (("connection: conn", "connection: con"), "<yaml>:6:33: connection 'con' is not declared in "
                                              "chat_model_connections (did you mean 'conn'?)"),
    (("tools: [add]", "tools: [ad]"), "<yaml>:6:47: tool 'ad' is not declared in tools (or subagents, "
                                      "vector_stores, memory_sets, skills) (did you mean 'add'?)"),
    (("connection: conn", "conection: conn"), "<yaml>:6:21: 'conection' is not a key of a chat model "
                                              "setup (did you mean 'connection'?)"),
    (('"eddies.demo:add"', '"eddies.demo:sub"'), "<yaml>:8:31: 'eddies.demo' has no 'sub'"),
    (("- name: a\n", "- name: a\n    config: [1]\n"), "<yaml>:3:13: config: expected a mapping"),
    (("- name: a\n", "- name: a\n    type: react\n    model: llm\n    options: {max_iterations: lots}\n"),
     "<yaml>:5:14: ReActOptions.max_iterations: 'lots' is not a number"),
    (("- name: a\n", "- name: a\n    actions:\n      - {name: x, function: 'eddies.demo:add'}\n"),
     "<yaml>:4:9: 'trigger_conditions' is required"),
])
def test_errors_name_the_line_and_column(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_yaml_text(BASE.replace(*change))
    assert str(err.value).startswith(message), str(err.value)


def test_a_value_written_dollar_brace_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    text = BASE.replace("{name: conn, clazz: scripted}", "{name: conn, clazz: litellm, "
                        "api_base: 'http://127.0.0.1:9/v1', api_key: '${TEST_KEY}'}")
    with pytest.raises(DefinitionError, match="the environment variable TEST_KEY is not set"):
        load_yaml_text(text)
    monkeypatch.setenv("TEST_KEY", "sk-123")
    [conn] = [r.obj for r in load_yaml_text(text).resources if r.name == "conn"]
    assert conn.api_key == "sk-123"


def test_eddies_check_validates_offline(tmp_path: Path) -> None:
    good = CliRunner().invoke(app, ["check", str(DEFS / "agents.yaml"), "--agent", "react"])
    assert good.exit_code == 0, good.output
    assert "agent react (version 1): valid" in good.output and "tool add: FunctionTool" in good.output
    every = CliRunner().invoke(app, ["check", str(DEFS / "agents.yaml")])  # no --agent: each
    assert every.exit_code == 0, every.output
    valid = [line.split()[1] for line in every.output.splitlines() if line.endswith(": valid")]
    assert len(valid) > 1 and "react" in valid and f"agents ({', '.join(valid)})" in every.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent(BASE.replace("tools: [add]", "tools: [sub]")))
    failed = CliRunner().invoke(app, ["check", str(bad)])
    assert failed.exit_code == 2 and "bad.yaml:6:47: tool 'sub' is not declared in tools" in failed.output


REMOTE = """\
agents:
  - name: remote
    type: react
    model: llm
    chat_model_connections:
      - {name: conn, clazz: scripted}
    chat_model_setups:
      - {name: llm, connection: conn, tools: [clock, helper]}
    mcp_servers:
      - {name: time, command: python, args: [-m, mcp_server_time], api_key_env: TIME_KEY}
    a2a_servers:
      - {name: agents, endpoint: "http://127.0.0.1:9", headers: {X-Team: "${TEAM}"}}
    tools:
      - {name: clock, type: mcp, server: time, allowed_tools: [get_current_time], max_retries: 1}
      - {name: helper, type: a2a, server: agents, agent_card_path: /.well-known/agent-card.json}
"""


def test_mcp_and_a2a_tools_in_yaml(tmp_path: Path) -> None:
    from eddies.engine import A2aServer, A2aTool, McpServer, McpTool

    agent = load_yaml_text(REMOTE)
    got = {r.name: r.obj for r in agent.resources}
    assert got["time"] == McpServer(command="python", args=("-m", "mcp_server_time"), api_key_env="TIME_KEY")
    assert got["clock"] == McpTool("time", allowed_tools=("get_current_time",), max_retries=1)
    # ${TEAM} in a header stays as written: the connector reads it when the worker starts.
    assert got["agents"] == A2aServer(url="http://127.0.0.1:9", headers={"X-Team": "${TEAM}"})
    assert isinstance(got["helper"], A2aTool)
    assert got["helper"].agent_card_path == "/.well-known/agent-card.json"
    file = tmp_path / "remote.yaml"
    file.write_text(REMOTE)
    checked = CliRunner().invoke(app, ["check", str(file)])  # offline: no server is asked
    assert checked.exit_code == 0, checked.output
    assert "tool get_current_time: RemoteTool" in checked.output
    assert "tool helper-card-name: RemoteTool" in checked.output
    with pytest.raises(DefinitionError, match=r"^<yaml>:14:42: MCP server 'nope' is not declared in "):
        load_yaml_text(REMOTE.replace("server: time", "server: nope"))
    # A missing key inside a resource's constructor call: its place, once.
    for gone, key in [(", agent_card_path: /.well-known/agent-card.json", "agent_card_path"),
                      (", allowed_tools: [get_current_time]", "allowed_tools")]:
        with pytest.raises(DefinitionError) as err:
            load_yaml_text(REMOTE.replace(gone, ""))
        assert str(err.value) == f"<yaml>:{15 if key == 'agent_card_path' else 14}:9: {key!r} is required"


KNOWING = """\
agents:
  - name: planner
    type: react
    model: llm
    prompt: ask
    config: {company: Acme}
    prompts:
      - {name: tone, text: "Be brief, {company} style."}
      - name: ask
        messages:
          - {role: system, content: "You plan trips for {company}."}
          - {role: user, content: "Plan this: {input}"}
    chat_model_connections:
      - {name: conn, clazz: scripted, responder: "tests.unit.connectors.test_yaml_agents:echo_prompt"}
    chat_model_setups:
      - {name: llm, connection: conn, tools: [skills]}
    skills:
      - {name: skills, paths: [SKILLS], allowed_commands: [python3, cat], timeout_s: 5}
"""
SKILLS_DIR = Path(__file__).resolve().parents[2] / "skills"


def echo_prompt(messages: list[Any], tools: list[Any]) -> str:
    """Answers with the messages it was sent and the tools it was offered."""
    return " | ".join([*(m.content for m in messages), *(t.name for t in tools)])


def test_prompts_as_templates_and_skills_in_yaml() -> None:
    agent = load_yaml_text(KNOWING.replace("SKILLS", str(SKILLS_DIR)))
    [out] = LocalRunner(agent).run([("s1", "3 days in Porto")])
    assert out == "You plan trips for Acme. | Plan this: 3 days in Porto | load_skill | bash"
    [skills] = [r.obj for r in agent.resources if r.name == "skills"]
    assert sorted(skills.skills) == ["packing", "trip-budget"] and skills.timeout_s == 5
    for change, message in [
            (("{company} style", "{company style"), "<yaml>:8:28: prompt 'tone': prompt template"),
            (("paths: [SKILLS]", "paths: [/nowhere]"), "<yaml>:18:9: /nowhere: not a folder"),
            (("timeout_s: 5", "timeout_s: -1"), "timeout_s: expected a positive number of seconds"),
            (("tools: [skills]", "tools: [skils]"), "<yaml>:16:47: tool 'skils' is not declared"),
            (("role: user", "role: boss"), "<yaml>:12:20: role 'boss' is not one of")]:
        with pytest.raises((DefinitionError, PlanError)) as err:
            LocalRunner(load_yaml_text(KNOWING.replace(*change).replace("SKILLS", str(SKILLS_DIR))))
        assert message in str(err.value), (change, str(err.value))
    # A ReAct prompt's placeholder the config lacks may be a field of the input (as in Flink
    # Agents), known when it comes: an input without it fails its run, naming it.
    runner = LocalRunner(load_yaml_text(KNOWING.replace("config: {company: Acme}", "config: {}")
                                        .replace("SKILLS", str(SKILLS_DIR))))
    with pytest.raises(RunFailedError, match="prompt 'ask' has placeholders neither the agent's config "
                                             "nor the input's fields hold: company"):
        runner.run([("s1", "3 days in Porto")])
    assert runner.run([("s2", {"company": "Rota", "days": 3})]) == [
        'You plan trips for Rota. | Plan this: {"company": "Rota", "days": 3} | load_skill | bash']


def test_a_blob_store_in_yaml_is_a_folder_for_mcp_servers_and_models(tmp_path: Path) -> None:
    from eddies import FolderBlobStore

    text = REMOTE.replace('args: [-m, mcp_server_time], api_key_env: TIME_KEY}',
                          f'args: [-m, mcp_server_time], blob_store: "{tmp_path}/blobs"}}')
    text = text.replace("{name: conn, clazz: scripted}",
                        f'{{name: conn, clazz: litellm, blob_store: "{tmp_path}/blobs"}}')
    agent = load_yaml_text(text)
    objs = {r.name: r.obj for r in agent.resources}
    assert isinstance(objs["time"].blob_store, FolderBlobStore)
    assert isinstance(objs["conn"].blob_store, FolderBlobStore)
    assert objs["conn"].blob_store.path == tmp_path / "blobs"


def test_a_chat_model_setup_names_its_fallbacks(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("""agents:
  - name: asks
    chat_model_connections:
      - {name: main, clazz: scripted}
      - {name: spare, clazz: scripted}
    chat_model_setups:
      - {name: llm, connection: main, model: m1, fallbacks: [backup]}
      - {name: backup, connection: spare, model: m2}
""")
    agent = load_yaml(path)
    setups = {r.name: r.obj for r in agent.resources if r.type is ResourceType.CHAT_MODEL}
    assert setups["llm"].fallbacks == ("backup",) and setups["backup"].fallbacks == ()
    path.write_text(path.read_text().replace("fallbacks: [backup]", "fallbacks: [nope]"))
    with pytest.raises(PlanError, match="fallback 'nope' is not another CHAT_MODEL"):
        AgentPlan.compile(load_yaml(path))


def test_a_chat_model_setup_may_stream(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("""agents:
  - name: asks
    chat_model_connections:
      - {name: main, clazz: scripted}
    chat_model_setups:
      - {name: llm, connection: main, model: m1, stream: true}
      - {name: quiet, connection: main, model: m1}
""")
    setups = {r.name: r.obj for r in load_yaml(path).resources if r.type is ResourceType.CHAT_MODEL}
    assert setups["llm"].stream is True and setups["quiet"].stream is False
    assert AgentPlan.compile(load_yaml(path)).streams()
    path.write_text(path.read_text().replace("stream: true", "stream: yes please"))
    with pytest.raises(DefinitionError,
                       match=r"agents.yaml:6:\d+: stream: expected true or false, got 'yes please'"):
        load_yaml(path)


def test_a_model_connection_declares_its_provider_limits(tmp_path: Path) -> None:
    from eddies import ProviderLimits

    path = tmp_path / "agents.yaml"
    path.write_text("""agents:
  - name: asks
    chat_model_connections:
      - {name: main, clazz: litellm, limits: {requests_per_minute: 600, calls_at_once: 50}}
    chat_model_setups:
      - {name: llm, connection: main, model: openai/m1}
""")
    [conn] = [r.obj for r in load_yaml(path).resources if r.type is ResourceType.CHAT_MODEL_CONNECTION]
    assert conn.limits == ProviderLimits(calls_at_once=50, requests_per_minute=600)
    path.write_text(path.read_text().replace("requests_per_minute", "request_per_minute"))
    with pytest.raises(DefinitionError,
                       match=r"agents.yaml:4:.*limits.request_per_minute: not a provider limit"):
        load_yaml(path)


def test_an_agent_names_its_hooks_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("""agents:
  - name: asks
    hooks: [tests.unit.engine.test_hooks:MaskCards, tests.unit.engine.test_hooks:TRIALS]
    chat_model_connections:
      - {name: main, clazz: scripted}
""")
    assert [type(h).__name__ for h in load_yaml(path).hooks] == ["MaskCards", "NoRefundsForTrials"]
    checked = CliRunner().invoke(app, ["check", str(path)])  # listed in the order they run
    assert checked.exit_code == 0, checked.output
    assert "hook 1: MaskCards (MaskCards)\n  hook 2: trial-limits (NoRefundsForTrials)" in checked.output
    path.write_text(path.read_text().replace("test_hooks:TRIALS", "test_hooks:nothing"))
    with pytest.raises(DefinitionError, match=r"agents.yaml:3:\d+: '[\w.]+test_hooks' has no 'nothing'"):
        load_yaml(path)
    path.write_text(path.read_text().replace("test_hooks:nothing", "test_hooks:refund"))
    with pytest.raises(DefinitionError, match=r"agents.yaml:3:\d+: hooks: .*:refund is not a Hook"):
        load_yaml(path)
