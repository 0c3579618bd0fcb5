"""Agents declared in Confluent-style SQL DDL: the same agent declared in Python, YAML and
SQL compiles to the same plan and writes the same events (same ids) on the same inputs;
unknown options, wrong types and dangling references are errors with file, line and
column; a secret is only ever the name of an environment variable; ``eddies check``
validates a SQL file offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eddies import A2aServer, A2aTool, ChatModelSetup, McpServer, McpTool, ReActAgent
from eddies.cli import app
from eddies.connectors.declarative import load_all, load_definition
from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.sql_agents import load_sql, load_sql_text
from eddies.connectors.declarative.yaml_agents import load_yaml_text
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.runtime.settings import load_agent, load_settings
from eddies.engine import AgentPlan
from tests.unit.connectors.test_yaml_agents import REMOTE, described, events, python_haiku, python_react

DEFS = Path(__file__).resolve().parents[2] / "definitions"


@pytest.mark.parametrize(("make", "name", "inputs"), [
    (python_react, "react", [("a", "add things"), ("b", "more")]),
    (python_haiku, "haiku", [("a", "a tagline"), ("b", "never good")]),
])
def test_python_yaml_and_sql_give_the_same_plan_and_the_same_events(
        make: Any, name: str, inputs: list[tuple[str, Any]]) -> None:
    sources = {"python": make(), "yaml": load_definition(DEFS / "agents.yaml", name),
               "sql": load_definition(DEFS / "agents.sql", name)}
    plans = {k: described(AgentPlan.compile(a)) for k, a in sources.items()}
    assert plans["sql"] == plans["python"] == plans["yaml"]
    written = {k: events(a, inputs) for k, a in sources.items()}
    assert written["sql"] == written["python"] == written["yaml"]
    assert len(written["sql"]) > 10


REMOTE_SQL = """\
CREATE CONNECTION conn WITH ('type' = 'scripted');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE CONNECTION time WITH ('type' = 'mcp_server', 'command' = 'python',
                             'args' = '["-m", "mcp_server_time"]', 'api-key' = '${TIME_KEY}');
CREATE CONNECTION agents WITH ('type' = 'a2a', 'endpoint' = 'http://127.0.0.1:9',
                               'headers.X-Team' = '${TEAM}');
CREATE TOOL clock USING CONNECTION time WITH ('type' = 'mcp', 'allowed_tools' = 'get_current_time',
                                              'max_retries' = 1);
CREATE TOOL helper USING CONNECTION agents
  WITH ('type' = 'a2a', 'agent_card_path' = '/.well-known/agent-card.json');
CREATE AGENT remote USING MODEL llm USING TOOLS clock, helper;
"""


def resources(agent: Any) -> dict[str, Any]:
    return {r.name: (r.type, r.obj) for r in agent.resources
            if not isinstance(r.obj, (LiteLLMChatModel,)) and r.name != "conn"}


def test_mcp_and_a2a_tools_in_sql_are_those_of_yaml_and_python() -> None:
    sql, yaml = load_sql_text(REMOTE_SQL), load_yaml_text(REMOTE)
    assert resources(sql) == resources(yaml)
    got = {r.name: r.obj for r in sql.resources}
    assert got["time"] == McpServer(command="python", args=("-m", "mcp_server_time"), api_key_env="TIME_KEY")
    assert got["clock"] == McpTool("time", allowed_tools=("get_current_time",), max_retries=1)
    assert got["agents"] == A2aServer(url="http://127.0.0.1:9", headers={"X-Team": "${TEAM}"})
    assert got["helper"] == A2aTool("agents", agent_card_path="/.well-known/agent-card.json")
    assert got["llm"] == ChatModelSetup("conn", tools=("clock", "helper"))
    assert isinstance(sql, ReActAgent)


@pytest.mark.parametrize(("change", "message"), [
    (("'allowed_tools'", "'allowed_tool'"),
     "<sql>:7:63: 'allowed_tool' is not an option of CREATE TOOL clock (did you mean 'allowed_tools'?)"),
    (("'agent_card_path'", "'agent_card_pat'"),
     "<sql>:10:25: 'agent_card_pat' is not an option of CREATE TOOL helper "
     "(did you mean 'agent_card_path'?)"),
    (("('type' = 'mcp'", "('typ' = 'mcp'"),
     "<sql>:7:47: 'typ' is not an option of CREATE TOOL clock (did you mean 'type'?)"),
    # Missing, not misspelt: what is required is still what the error names.
    (("'allowed_tools' = 'get_current_time',", ""),
     "<sql>:7:41: CREATE TOOL clock: the option 'allowed_tools' is required"),
])
def test_a_misspelt_required_option_names_the_one_meant(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_sql_text(REMOTE_SQL.replace(*change))
    assert str(err.value) == message


def test_a_misspelt_skills_path_names_the_one_meant() -> None:
    text = BASE.replace("USING FUNCTION add WITH ('type' = 'function')",
                        "WITH ('type' = 'skills', 'path' = '[\"skills\"]')")
    with pytest.raises(DefinitionError) as err:
        load_sql_text(text)
    assert str(err.value) == ("<sql>:4:44: 'path' is not an option of CREATE TOOL adder "
                              "(did you mean 'paths'?)")


def test_a_model_with_its_own_endpoint_and_a_secret_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
        CREATE MODEL gpt COMMENT 'the big one'
          INPUT (prompt STRING) OUTPUT (response STRING)
          WITH ('provider' = 'openai', 'endpoint' = 'http://127.0.0.1:9/v1', 'api-key' = '${SQL_KEY}',
                'openai.model_version' = 'gpt-4o-mini', 'task' = 'text_generation', 'temperature' = 0.2);
        CREATE AGENT IF NOT EXISTS a USING MODEL gpt USING PROMPT 'Be brief; don''t ramble.';
        CREATE AGENT IF NOT EXISTS a USING MODEL nothing_checks_this_one;
    """
    with pytest.raises(DefinitionError, match="the environment variable SQL_KEY is not set"):
        load_sql_text(text)
    monkeypatch.setenv("SQL_KEY", "sk-sql-123456")
    agent = load_sql_text(text)
    got = {r.name: r.obj for r in agent.resources}
    assert got["gpt"] == ChatModelSetup("gpt-connection", model="openai/gpt-4o-mini",
                                        arguments={"temperature": 0.2})
    conn = got["gpt-connection"]
    assert isinstance(conn, LiteLLMChatModel)
    assert (conn.api_base, conn.api_key) == ("http://127.0.0.1:9/v1", "sk-sql-123456")
    plan = AgentPlan.compile(agent)
    assert plan.actions["react"].config["prompt"] == "Be brief; don't ramble."


def test_a_secret_written_out_is_refused_without_echoing_it() -> None:
    text = "CREATE CONNECTION c WITH ('type' = 'openai', 'api-key' = 'sk-live-abcdef123');"
    with pytest.raises(DefinitionError) as err:
        load_sql_text(text + "CREATE MODEL m WITH ('connection' = 'c'); CREATE AGENT a USING MODEL m;")
    assert str(err.value).startswith("<sql>:1:58: api-key: write a secret as '${NAME}'")
    assert "sk-live" not in str(err.value)


BASE = """\
CREATE CONNECTION conn WITH ('type' = 'scripted');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE FUNCTION add AS 'eddies.demo.add' LANGUAGE PYTHON;
CREATE TOOL adder USING FUNCTION add WITH ('type' = 'function');
CREATE AGENT a USING MODEL llm USING PROMPT 'You add.' USING TOOLS adder WITH ('max_iterations' = '5');
"""


@pytest.mark.parametrize(("change", "message"), [
    (("TOOLS adder", "TOOLS sub"), "<sql>:5:68: tool 'sub' is not created in this file"),
    (("MODEL llm USING", "MODEL add USING"), "<sql>:5:28: model 'add' is not created in this file "
                                             "('add' is a function)"),
    (("'connection' = 'conn'", "'connection' = 'nope'"), "<sql>:2:39: connection 'nope' is not created"),
    (("'max_iterations' = '5'", "'max_iterations' = 'lots'"),
     "<sql>:5:99: ReActOptions.max_iterations: 'lots' is not a number"),
    (("'max_iterations' = '5'", "'colour' = 'blue'"), "<sql>:5:80: ReActOptions: unknown option 'colour'"),
    # A misspelt name or option: the error says which one was meant.
    (("'max_iterations' = '5'", "'max_iteration' = '5'"),
     "<sql>:5:80: ReActOptions: unknown option 'max_iteration' (did you mean 'max_iterations'?)"),
    (("('type' = 'scripted')", "('type' = 'scripted', 'responer' = 'x')"),
     "<sql>:1:51: 'responer' is not an option of CREATE CONNECTION conn (did you mean 'responder'?)"),
    (("'connection' = 'conn'", "'conection' = 'conn'"),
     "<sql>:2:24: 'conection' is not an option of CREATE MODEL llm (did you mean 'connection'?)"),
    (("'connection' = 'conn'", "'connection' = 'con'"),
     "<sql>:2:39: connection 'con' is not created in this file (did you mean 'conn'?)"),
    (("('type' = 'scripted')", "('type' = 'scripted', 'colour' = 'blue')"),
     "<sql>:1:51: 'colour' is not an option of CREATE CONNECTION conn (its options: type, responder)"),
    (("'eddies.demo.add'", "'eddies.demo.sub'"), "<sql>:3:24: 'eddies.demo' has no 'sub'"),
    (("LANGUAGE PYTHON", "LANGUAGE JAVA"), "<sql>:3:51: language 'JAVA': only PYTHON functions run here"),
    (("WITH ('type' = 'function')", "USING MODEL llm WITH ('type' = 'function')"),
     "<sql>:4:38: CREATE TOOL takes no USING MODEL"),
    (("'type' = 'function'", "'type' = 'rest'"), "<sql>:4:53: type 'rest' is not one of function, mcp, a2a"),
    (("'You add.'", "'You add."), "<sql>:5:100: this quote is never closed"),
    (("WITH ('max_iterations' = '5')", "WITH ('max_iterations' = '5'"),
     "<sql>:5:102: expected ')' or ',' between options, got ';'"),
    (("CREATE MODEL llm", "CREATE MODLE llm"), "<sql>:2:8: expected CONNECTION or MODEL or FUNCTION or "
                                               "PROMPT or TOOL or AGENT, got 'MODLE'"),
    (("CREATE TOOL adder", "CREATE MODEL llm WITH ('connection' = 'conn');\nCREATE TOOL adder"),
     "<sql>:4:14: model 'llm' is created twice (first at <sql>:2:14"),
    (("'type' = 'function'", "'type' = 'function', 'TYPE' = 'function'"),
     "<sql>:4:65: option 'TYPE' is given twice (first at <sql>:4:44)"),
    (("'type' = 'function'", "'type' = 'function', 'injected_args.z' = 'config:k'"),
     "<sql>:4:13: tool 'adder': inject names 'z', which is not a parameter of it"),
])
def test_errors_name_the_line_and_column(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_sql_text(BASE.replace(*change))
    assert str(err.value).startswith(message), str(err.value)


def test_the_base_definition_loads() -> None:
    agent = load_sql_text(BASE)
    assert [r.name for r in agent.resources] == ["llm", "conn", "adder"]
    assert AgentPlan.compile(agent).tool_specs("llm")[0].name == "adder"


REFLECTION = """\
CREATE CONNECTION c WITH ('type' = 'scripted');
CREATE MODEL m WITH ('connection' = 'c');
CREATE AGENT writer USING MODEL m USING PROMPT 'Write.' WITH ('max_iterations' = 4);
CREATE AGENT judge USING MODEL m USING PROMPT 'Judge.';
CREATE AGENT r USING AGENTS writer, judge WITH ('type' = 'reflection', 'pass_condition' = '$.ok');
"""


def test_a_reflection_agent_is_the_one_no_other_agent_uses() -> None:
    agent = load_sql_text(REFLECTION)
    assert agent.name == "r"
    opts = AgentPlan.compile(agent).actions["draft"].config["options"]
    assert (opts.pass_condition, opts.loop.max_iterations) == ("$.ok", 4)
    assert load_sql_text(REFLECTION, agent="writer").name == "writer"  # a drafter alone
    with pytest.raises(DefinitionError, match=r"^<sql>:4:62: drafter and critic run under one set of loop "
                                              r"options, and 'max_iterations' differs \(also at <sql>:3:"):
        load_sql_text(REFLECTION.replace("PROMPT 'Judge.'", "PROMPT 'Judge.' WITH ('max_iterations' = 2)"))
    with pytest.raises(DefinitionError, match=r"^<sql>:5:14: agent 'r' refers to itself"):
        load_sql_text(REFLECTION.replace("writer, judge", "r, judge"))
    with pytest.raises(DefinitionError, match=r"^<sql>:6:30: agent 'r' is a reflection agent: a drafter"):
        load_sql_text(REFLECTION + "CREATE AGENT r2 USING AGENTS r, judge;")
    with pytest.raises(DefinitionError, match=r"^<sql>:5:68: ReflectionOptions.max_iterations: 'x' is not"):
        load_sql_text(REFLECTION.replace("'type' = 'reflection'", "'max_iterations' = 'x'"))


def test_a_file_of_several_agents_names_the_one_to_load(tmp_path: Path) -> None:
    assert load_agent(f"{DEFS / 'agents.sql'}#haiku").name == "haiku"
    with pytest.raises(DefinitionError, match=r"creates 2 agents no other agent uses \(react, haiku\)"):
        load_sql(DEFS / "agents.sql")
    settings = load_settings(env={}, overrides={"agent": str(DEFS / "agents.sql")})
    assert settings.agent.endswith("agents.sql")  # a file is an agent, without a colon


def test_eddies_check_validates_sql_offline(tmp_path: Path) -> None:
    good = CliRunner().invoke(app, ["check", str(DEFS / "agents.sql"), "--agent", "haiku"])
    assert good.exit_code == 0, good.output
    assert "agent haiku (version 1): valid" in good.output
    assert "chat_model writer: ChatModelSetup" in good.output
    remote = tmp_path / "remote.sql"
    remote.write_text(REMOTE_SQL)
    checked = CliRunner().invoke(app, ["check", str(remote)])  # offline: no server is asked
    assert checked.exit_code == 0, checked.output
    assert "tool get_current_time: RemoteTool" in checked.output
    bad = tmp_path / "bad.sql"
    bad.write_text(BASE.replace("TOOLS adder", "TOOLS sub"))
    failed = CliRunner().invoke(app, ["check", str(bad)])
    assert failed.exit_code == 2 and "bad.sql:5:68: tool 'sub' is not created in this file" in failed.output


def test_eddies_check_checks_every_agent_the_file_can_load() -> None:
    checked = CliRunner().invoke(app, ["check", str(DEFS / "agents.sql")])  # no --agent
    assert checked.exit_code == 0, checked.output
    assert "agent react (version 1): valid" in checked.output
    assert "agent haiku (version 1): valid" in checked.output
    assert f"2 agents (react, haiku); to run one: {DEFS / 'agents.sql'}#NAME" in checked.output
    assert [a.name for a in load_all(DEFS / "agents.sql")] == ["react", "haiku"]
    only = load_definition(DEFS / "subagents.sql").name
    assert [a.name for a in load_all(DEFS / "subagents.sql")] == [only]


@pytest.mark.parametrize(("sql_args", "yaml_args", "injected"), [
    ("'injected_args.account' = 'call:id', 'injected_args.region' = 'short_term_memory:region'",
     "{account: {source: call}, region: {source: short_term_memory, key: region}}",
     {"account": "call:id", "region": "memory:region"}),
    ("'injected_args.account' = 'identity:tenant', 'injected_args.region' = 'identity:user'",
     "{account: {source: identity, key: tenant}, region: {source: identity, key: user}}",
     {"account": "identity:tenant", "region": "identity:user"}),
], ids=["the call id", "who asked"])
def test_injected_arguments_from_yaml_and_sql_alike(sql_args: str, yaml_args: str,
                                                     injected: dict[str, str]) -> None:
    from tests.unit.engine.test_tool_schema import reserve

    sql = load_sql_text(BASE.replace("'eddies.demo.add'", "'tests.unit.engine.test_tool_schema.reserve'")
                        .replace("'type' = 'function'", f"'type' = 'function', {sql_args}"))
    yaml = load_yaml_text(f"""\
agents:
  - name: a
    tools:
      - name: adder
        function: tests.unit.engine.test_tool_schema:reserve
        injected_args: {yaml_args}
""")
    [from_sql] = [r.obj for r in sql.resources if r.name == "adder"]
    [from_yaml] = [r.obj for r in yaml.resources if r.name == "adder"]
    assert from_sql == from_yaml
    assert from_sql.fn is reserve
    assert dict(from_sql.inject) == injected


def test_who_asked_is_injected_only_as_user_or_tenant() -> None:
    with pytest.raises(DefinitionError, match="'identity:email'"):
        load_yaml_text("""\
agents:
  - name: a
    tools:
      - name: adder
        function: tests.unit.engine.test_tool_schema:reserve
        injected_args: {account: {source: identity, key: email}}
""")


def test_sub_agents_in_python_yaml_and_sql_give_the_same_plan_and_events() -> None:
    from tests.agents import delegating_agent

    sources = {"python": delegating_agent(), "yaml": load_definition(DEFS / "subagents.yaml", "boss"),
               "sql": load_definition(DEFS / "subagents.sql")}  # the one no other agent uses
    plans = {k: described(AgentPlan.compile(a)) for k, a in sources.items()}
    assert plans["sql"] == plans["python"] == plans["yaml"]
    written = {k: events(a, [("s1", "the plan"), ("s2", "a draft")]) for k, a in sources.items()}
    assert written["sql"] == written["python"] == written["yaml"]
    assert sum(1 for _, kind in written["sql"] if kind == "SubagentCallEvent") == 4


def test_external_sub_agents_in_yaml_and_sql() -> None:
    from eddies.connectors.remote.external_subagents import A2ASubagentSetup, HttpSubagentSetup

    sql = load_sql_text("""
        CREATE CONNECTION c WITH ('type' = 'scripted');
        CREATE MODEL m WITH ('connection' = 'c');
        CREATE CONNECTION agents WITH ('type' = 'a2a', 'endpoint' = 'http://127.0.0.1:9', 'api-key' = '${K}');
        CREATE CONNECTION web WITH ('type' = 'http', 'endpoint' = 'http://127.0.0.1:8/agent');
        CREATE AGENT helper USING CONNECTION agents COMMENT 'Helps.' WITH ('request_timeout' = 30);
        CREATE AGENT translator USING CONNECTION web
          WITH ('description' = 'Translates.', 'idempotent' = FALSE);
        CREATE AGENT a USING MODEL m USING TOOLS helper, translator;
    """)
    got = {r.name: r.obj for r in sql.resources}
    helper, translator = got["helper"], got["translator"]
    assert isinstance(helper, A2ASubagentSetup) and isinstance(translator, HttpSubagentSetup)
    assert (helper.server.url, helper.server.api_key_env, helper.description, helper.timeout_s) == (
        "http://127.0.0.1:9", "K", "Helps.", 30.0)
    assert (translator.endpoint, translator.description, translator.idempotent) == (
        "http://127.0.0.1:8/agent", "Translates.", False)
    specs = {s.name: s.description for s in AgentPlan.compile(sql).tool_specs("m")}
    assert specs == {"helper": "Helps.", "translator": "Translates."}
    yaml = load_yaml_text("""\
agents:
  - name: a
    subagents:
      - name: helper
        target_module: eddies.connectors.remote.external_subagents
        target_clazz: A2ASubagentSetup
        arguments: {endpoint: "http://127.0.0.1:9", description: Helps.}
""")
    [setup] = [r.obj for r in yaml.resources]
    assert isinstance(setup, A2ASubagentSetup) and setup.description == "Helps."
    with pytest.raises(DefinitionError, match=r"sub-agents call each other in a cycle: a -> b -> a"):
        load_yaml_text("""\
agents:
  - {name: a, subagents: [{name: b, agent_ref: b}]}
  - {name: b, subagents: [{name: a, agent_ref: a}]}
""", agent="a")


KNOWING_SQL = """\
CREATE CONNECTION conn WITH ('type' = 'scripted',
                             'responder' = 'tests.unit.connectors.test_yaml_agents:echo_prompt');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE PROMPT ask WITH ('messages' = '[{"role": "system", "content": "You plan trips for {company}."},
                                       {"role": "user", "content": "Plan this: {input}"}]');
CREATE PROMPT tone AS 'Be brief, {company} style.';
CREATE MODEL emb WITH ('provider' = 'offline', 'task' = 'embedding');
CREATE CONNECTION kb WITH ('type' = 'embedded');
CREATE TOOL docs USING CONNECTION kb
  WITH ('type' = 'vector_search', 'embedding_model' = 'emb', 'collection' = 'travel',
        'description' = 'Search the travel guide.');
CREATE TOOL skills WITH ('type' = 'skills', 'paths' = '["SKILLS"]',
                         'allowed_commands' = 'python3, cat', 'timeout_s' = 5);
CREATE AGENT planner USING MODEL llm USING PROMPT ask USING TOOLS docs, skills
  WITH ('config.company' = 'Acme');
CREATE AGENT guide USING MODEL llm USING PROMPT tone USING TOOLS docs
  WITH ('type' = 'rag', 'max_results' = 2, 'config.company' = 'Acme');
"""


def _knowing(sql: str = KNOWING_SQL, name: str = "planner") -> Any:
    from tests.unit.connectors.test_yaml_agents import SKILLS_DIR

    return load_sql_text(sql.replace("SKILLS", str(SKILLS_DIR)), agent=name)


def test_prompts_embedding_models_vector_stores_and_skills_in_sql() -> None:
    from eddies import EmbeddedVectorStore, LocalRunner, RagAgent, Skills
    from eddies.engine import ResourceType

    planner = _knowing()
    [out] = LocalRunner(planner).run([("s1", "3 days in Porto")])
    assert out == "You plan trips for Acme. | Plan this: 3 days in Porto | docs | load_skill | bash"
    kinds = {r.name: (r.type, type(r.obj).__name__) for r in planner.resources}
    assert kinds["docs"] == (ResourceType.VECTOR_STORE, "EmbeddedVectorStore")
    assert kinds["emb"] == (ResourceType.EMBEDDING_MODEL, "EmbeddingModelSetup")
    assert kinds["emb-connection"] == (ResourceType.EMBEDDING_MODEL_CONNECTION, "OfflineEmbeddingModel")
    assert kinds["skills"][0] is ResourceType.SKILLS and kinds["ask"][0] is ResourceType.PROMPT
    [docs] = [r.obj for r in planner.resources if r.name == "docs"]
    assert isinstance(docs, EmbeddedVectorStore) and docs.collection == "travel"
    assert docs.description == "Search the travel guide."
    [skills] = [r.obj for r in planner.resources if r.name == "skills"]
    assert isinstance(skills, Skills) and skills.allowed_commands == {"python3", "cat"}

    guide = _knowing(name="guide")
    assert isinstance(guide, RagAgent)
    plan = AgentPlan.compile(guide)
    assert plan.resources["llm"][1].tools == ()  # a rag agent's store is not offered as a tool
    assert plan.resources["docs"][0] is ResourceType.VECTOR_STORE


@pytest.mark.parametrize(("change", "message"), [
    (("USING PROMPT ask", "USING PROMPT asks"), "<sql>:14:51: prompt 'asks' is not created in this file"),
    (("'embedding_model' = 'emb'", "'embedding_model' = 'llm'"),
     "<sql>:10:55: model 'llm' is not an embedding model"),
    (("USING MODEL llm USING PROMPT ask", "USING MODEL emb USING PROMPT ask"),
     "<sql>:14:34: model 'emb' is an embedding model"),
    (("'type' = 'embedded'", "'type' = 'pgvector', 'dsn' = 'postgresql://u:hunter2@db/kb'"),
     "<sql>:8:57: dsn: a DSN with a password is a secret"),
    (("USING TOOLS docs\n  WITH ('type' = 'rag'", "USING TOOLS docs, skills\n  WITH ('type' = 'rag'"),
     "<sql>:16:14: a rag agent is USING TOOLS one vector_search tool"),
    (("AS 'Be brief, {company} style.'", "AS 'Be brief, {company style.'"),
     "<sql>:6:23: prompt 'tone': prompt template"),
    (("'timeout_s' = 5", "'timeout_s' = 5, 'shell' = 'zsh'"), "'shell' is not an option"),
    (("'[\"SKILLS\"]'", "'[\"/nowhere\"]'"), "/nowhere: not a folder"),
])
def test_knowledge_errors_name_the_line_and_column(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        _knowing(KNOWING_SQL.replace(*change))
    assert message in str(err.value), str(err.value)


MEMORY_SQL = """\
CREATE CONNECTION conn WITH ('type' = 'scripted',
                             'responder' = 'tests.unit.connectors.test_long_term_memory:remembering');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE MODEL emb WITH ('provider' = 'offline', 'task' = 'embedding');
CREATE CONNECTION kb WITH ('type' = 'embedded');
CREATE TOOL facts USING CONNECTION kb
  WITH ('type' = 'memory_set', 'embedding_model' = 'emb', 'key' = 'input:user',
        'retention_days' = 30, 'compaction_model' = 'llm', 'similarity' = 0.99);
CREATE AGENT concierge USING MODEL llm USING TOOLS facts;
"""


def test_a_memory_set_in_sql_is_a_tool_the_model_remembers_and_recalls_with() -> None:
    import json
    from datetime import timedelta

    from eddies import LocalRunner, MemorySetSetup
    from eddies.engine import ResourceType

    agent = load_sql_text(MEMORY_SQL)
    kinds = {r.name: r.type for r in agent.resources}
    assert kinds["facts"] is ResourceType.MEMORY_SET
    assert kinds["facts-store"] is ResourceType.VECTOR_STORE and kinds["emb"] is ResourceType.EMBEDDING_MODEL
    assert kinds["facts-compaction"] is ResourceType.CHAT_MODEL
    [facts] = [r.obj for r in agent.resources if r.name == "facts"]
    assert facts == MemorySetSetup("facts-store", retention=timedelta(days=30),
                                   compaction_model="facts-compaction", similarity=0.99, key="input:user")
    runner = LocalRunner(agent)
    runner.run([("s1", {"user": "ana", "say": "I am vegetarian"}),
                ("s2", {"user": "bo", "say": "I eat fish"})])
    [ana] = runner.run([("s3", {"user": "ana", "say": "what do I eat?"})])
    assert [r["content"] for r in json.loads(ana)["recalled"]] == ["I am vegetarian"]


@pytest.mark.parametrize(("change", "message"), [
    (("'key' = 'input:user'", "'key' = 'user'"),
     "<sql>:7:67: MemorySetSetup: key is 'session', 'input:FIELD'"),
    (("'compaction_model' = 'llm'", "'compaction_model' = 'emb'"),
     "<sql>:8:53: model 'emb' is not a chat model"),
    (("'retention_days' = 30", "'retention_days' = 0"), "<sql>:8:28: retention_days: expected a positive"),
    (("'similarity' = 0.99", "'similarity' = 0.99, 'collection' = 'x'"), "'collection' is not an option"),
])
def test_memory_set_errors_name_the_line_and_column(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_sql_text(MEMORY_SQL.replace(*change))
    assert message in str(err.value)


def test_a_connection_declares_its_provider_limits() -> None:
    from eddies import ProviderLimits

    text = ("CREATE CONNECTION c WITH ('type' = 'openai', 'endpoint' = 'http://127.0.0.1:9/v1', "
            "'requests_per_minute' = '600', 'calls_at_once' = '20', 'max_wait_s' = '2.5');\n"
            "CREATE MODEL m WITH ('connection' = 'c', 'model' = 'gpt'); CREATE AGENT a USING MODEL m;")
    got = {r.name: r.obj for r in load_sql_text(text).resources}
    assert got["c"].limits == ProviderLimits(calls_at_once=20, requests_per_minute=600, max_wait_s=2.5)
    with pytest.raises(DefinitionError, match=r"calls_at_once: expected a positive whole number, got 2.5"):
        load_sql_text(text.replace("'calls_at_once' = '20'", "'calls_at_once' = '2.5'"))
    with pytest.raises(DefinitionError, match=r"'request_per_minute' is not an option.*did you mean"):
        load_sql_text(text.replace("requests_per_minute", "request_per_minute"))


FALLBACK_SQL = """
CREATE FUNCTION add AS 'eddies.demo.add' LANGUAGE PYTHON;
CREATE TOOL add USING FUNCTION add WITH ('type' = 'function');
CREATE MODEL llm WITH ('provider' = 'scripted', 'responder' = 'tests.unit.connectors.test_sql_agents:down',
                       'fallbacks' = 'backup');
CREATE MODEL backup WITH ('provider' = 'scripted', 'model' = 'spare');
CREATE AGENT a USING MODEL llm USING TOOLS add;
"""


def test_a_model_may_stream_in_sql() -> None:
    agent = load_sql_text(FALLBACK_SQL.replace("'model' = 'spare'", "'model' = 'spare', 'stream' = 'true'"))
    got = {r.name: r.obj for r in agent.resources}
    assert got["backup"].stream is True and got["llm"].stream is False
    with pytest.raises(DefinitionError, match=r"stream: expected TRUE or FALSE, got 'maybe'"):
        load_sql_text(FALLBACK_SQL.replace("'model' = 'spare'", "'model' = 'spare', 'stream' = 'maybe'"))


def down(messages: Any, tools: Any) -> Any:
    """A scripted model whose provider is down."""
    raise ConnectionError("the primary is down")


def test_a_model_names_its_fallbacks_in_sql_and_the_fallback_answers() -> None:
    """'fallbacks' names other CREATE MODELs: each becomes a CHAT_MODEL of the agent with
    the same tools, and its connection; when the primary fails, the fallback answers."""
    from eddies import LocalRunner

    agent = load_sql_text(FALLBACK_SQL)
    got = {r.name: r.obj for r in agent.resources}
    assert got["llm"].fallbacks == ("backup",) and got["backup"].model == "spare"
    assert got["backup"].tools == got["llm"].tools == ("add",)
    assert {"llm-connection", "backup-connection"} <= set(got)
    AgentPlan.compile(agent)  # the plan takes it
    [out] = LocalRunner(agent).run([("s1", '{"a": 2, "b": 3}')])
    assert out == "The result is 5."  # the offline policy: add, then answer
    with pytest.raises(DefinitionError, match=r"<sql>:5:\d+: model 'nope' is not created in this file"):
        load_sql_text(FALLBACK_SQL.replace("'fallbacks' = 'backup'", "'fallbacks' = 'nope'"))
    embedding = FALLBACK_SQL.replace("'model' = 'spare'", "'task' = 'embedding'").replace(
        "'provider' = 'scripted', 'task'", "'provider' = 'offline', 'task'")
    with pytest.raises(DefinitionError, match="fallback 'backup' is an embedding model"):
        load_sql_text(embedding)


def test_an_agent_names_its_hooks_in_sql() -> None:
    """'hooks' names Hook classes (made with no arguments) or instances, in order."""
    from eddies.engine import Hook

    named = "tests.unit.engine.test_hooks:MaskCards, tests.unit.engine.test_hooks:TRIALS"
    text = FALLBACK_SQL.replace("USING TOOLS add;", f"USING TOOLS add WITH ('hooks' = '{named}');")
    hooks = load_sql_text(text).hooks
    assert [type(h).__name__ for h in hooks] == ["MaskCards", "NoRefundsForTrials"]
    assert all(isinstance(h, Hook) for h in hooks)
    AgentPlan.compile(load_sql_text(text))
    with pytest.raises(DefinitionError, match=r"<sql>:7:\d+: hooks: eddies.demo:add is not a Hook"):
        load_sql_text(text.replace("tests.unit.engine.test_hooks:TRIALS", "eddies.demo:add"))
