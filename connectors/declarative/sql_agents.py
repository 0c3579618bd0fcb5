"""Agents declared in Confluent-style SQL DDL: connections, models, functions, tools and
agents (standard ReAct agents and drafter-critic reflection agents), referring to each
other by name. Unknown options, wrong types and dangling references are errors naming
the file, line and column. Example::

    CREATE CONNECTION local WITH ('type' = 'openai', 'endpoint' = 'http://127.0.0.1:8000/v1',
                                  'api-key' = '${OPENAI_KEY}');
    CREATE MODEL llm WITH ('provider' = 'openai', 'openai.connection' = 'local',
                           'openai.model_version' = 'gpt-4o-mini');
    CREATE FUNCTION refund AS 'my_pkg.tools.refund' LANGUAGE PYTHON;
    CREATE TOOL refund_tool USING FUNCTION refund WITH ('type' = 'function');
    CREATE AGENT support USING MODEL llm USING PROMPT 'You answer billing questions.'
      USING TOOLS refund_tool WITH ('max_iterations' = '5');

``load_sql("agents.sql")`` returns the agent no other agent uses (or the ``agent=``-named
one). A secret option (``api-key``) is written ``'${NAME}'``, the name of the environment
variable holding it: a secret written out in the file is refused, so it is never in the
file, a topic, a log or an error. How each statement maps to the Python API is in the
README's "Agents in SQL".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eddies.connectors.declarative.located import DefinitionError, located, read_definition
from eddies.connectors.declarative.references import env_name, import_target, read_env
from eddies.connectors.declarative.sql_options import With, checked_options, json_list, option_at, read_text
from eddies.connectors.declarative.sql_parse import Name, Option, Statement, parse_sql
from eddies.connectors.declarative.sql_subagents import HttpEndpoint, external_agent
from eddies.engine import (
    A2aServer,
    A2aTool,
    Agent,
    ChatModelSetup,
    FunctionTool,
    McpServer,
    McpTool,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    SubagentSetup,
)
from eddies.engine.react import GENERAL_PURPOSE

#: The connection type of the offline model (tests, the demo); mcp_server, a2a and http are
#: servers' types, and any other is a litellm provider.
_SCRIPTED = "scripted"
_MODEL_ARGUMENTS = ("temperature", "max_tokens", "top_p", "seed", "stop")
#: Which clauses each statement takes.
_CLAUSES = {
    "CONNECTION": {"WITH", "COMMENT"},
    "MODEL": {"WITH", "COMMENT", "INPUT", "OUTPUT"},
    "FUNCTION": {"AS", "LANGUAGE", "COMMENT"},
    "TOOL": {"USING FUNCTION", "USING CONNECTION", "WITH", "COMMENT"},
    "AGENT": {"USING MODEL", "USING PROMPT", "USING TOOLS", "USING AGENTS", "USING CONNECTION", "WITH",
              "COMMENT"},
}


def load_sql(path: str | Path, agent: str | None = None) -> Agent:
    """The agent the SQL file ``path`` declares (``agent``: which one, when several are
    not used by another); DefinitionError naming file, line and column when it cannot be
    one."""
    text = read_definition(path)
    return load_sql_text(text, str(path), agent)


def load_sql_text(text: str, source: str = "<sql>", agent: str | None = None) -> Agent:
    """:func:`load_sql` of SQL ``text`` (``source`` names it in errors)."""
    return _Script(parse_sql(text, source), source).agent(agent)


def load_sql_all(path: str | Path) -> list[Agent]:
    """Every agent of the SQL file ``path`` that no other agent uses (each one
    :func:`load_sql` could load by name), in the file's order."""
    text = read_definition(path)
    script = _Script(parse_sql(text, str(path)), str(path))
    return [script.make(name) for name in script.top()]


@dataclass(frozen=True)
class _Model:
    setup: ChatModelSetup  # without the tools: an agent gives those
    connection: str  # the connection resource's name
    statement: Statement


@dataclass(frozen=True)
class _Standard:
    """A standard agent, before it is an Agent (it may be a reflection's drafter or critic)."""

    model: _Model
    prompt: str | None
    tools: tuple[str, ...]
    options: dict[str, Option]
    statement: Statement


class _Script:
    def __init__(self, statements: list[Statement], source: str) -> None:
        self.source = source
        self.by_kind: dict[str, dict[str, Statement]] = {}
        for stmt in statements:
            allowed = _CLAUSES[stmt.kind]
            for clause, at in stmt.clauses.items():
                if clause not in allowed:
                    raise DefinitionError(f"{at}: CREATE {stmt.kind} takes no {clause}")
            named = self.by_kind.setdefault(stmt.kind, {})
            if stmt.name in named:
                if stmt.if_not_exists:
                    continue
                raise DefinitionError(f"{stmt.at}: {stmt.kind.lower()} {stmt.name!r} is created twice "
                                      f"(first at {named[stmt.name].at}; CREATE ... IF NOT EXISTS keeps "
                                      "the first)")
            named[stmt.name] = stmt
        self.objects: dict[tuple[str, str], Any] = {}
        for kind in ("CONNECTION", "FUNCTION", "MODEL", "TOOL", "AGENT"):  # all checked, used or not
            for name in self.by_kind.get(kind, {}):
                self.build(kind, name)

    # --- references ---------------------------------------------------------------------

    def ref(self, kind: str, name: Name) -> Any:
        if name.text not in self.by_kind.get(kind, {}):
            other = next((k for k, named in self.by_kind.items() if name.text in named), None)
            also = f" ({name.text!r} is a {other.lower()})" if other else ""
            raise DefinitionError(f"{name.at}: {kind.lower()} {name.text!r} is not created in this "
                                  f"file{also}")
        return self.build(kind, name.text)

    def build(self, kind: str, name: str) -> Any:
        key = (kind, name)
        if key not in self.objects:
            self.objects[key] = None  # a cycle would find this and fail below
            stmt = self.by_kind[kind][name]
            self.objects[key] = getattr(self, f"_{kind.lower()}")(stmt)
        if self.objects[key] is None:
            raise DefinitionError(f"{self.by_kind[kind][name].at}: {kind.lower()} {name!r} refers to "
                                  "itself")
        return self.objects[key]

    # --- statements -------------------------------------------------------------------------

    def _connection(self, stmt: Statement) -> tuple[ResourceType, Any]:
        opts = With(stmt)
        kind = (opts.text("type", required=True) or "").lower()
        headers = {k: read_text(o) for k, o in opts.prefixed("headers").items()}
        with located(stmt.at):
            if kind == "mcp_server":
                transport = (opts.text("transport_type") or "").lower()
                if transport not in ("", "streamable_http", "http", "stdio"):
                    raise DefinitionError(f"{option_at(stmt, 'transport_type')}: transport-type "
                                          f"{transport!r} is not one of streamable_http, stdio")
                args = opts.pop("args")
                env = {k: read_text(o) for k, o in opts.prefixed("env").items()}
                obj: Any = McpServer(url=opts.text("endpoint"), command=opts.text("command"),
                                     args=json_list(args) if args else (), env=env or None,
                                     headers=headers, api_key_env=self._key_env(opts))
                opts.finish("type, endpoint, command, args, env.NAME, headers.NAME, api-key, transport-type")
                return ResourceType.MCP_SERVER, obj
            if kind == "a2a":
                obj = A2aServer(url=opts.text("endpoint", required=True) or "", headers=headers,
                                api_key_env=self._key_env(opts))
                opts.finish("type, endpoint, headers.NAME, api-key")
                return ResourceType.A2A_SERVER, obj
            if kind == "http":  # an HTTP sub-agent's endpoint (CREATE AGENT ... USING CONNECTION)
                obj = HttpEndpoint(opts.text("endpoint", required=True) or "", headers, self._key_env(opts))
                opts.finish("type, endpoint, headers.NAME, api-key")
                return ResourceType.AGENT, obj
        return ResourceType.CHAT_MODEL_CONNECTION, self._model_connection(stmt, opts, kind)

    @staticmethod
    def _key_env(opts: With) -> str | None:
        """The NAME of the api-key's variable: the executor reads it when it connects."""
        written = opts.text("api_key", secret=True)
        return None if written is None else env_name(written)

    def _model_connection(self, stmt: Statement, opts: With, provider: str) -> Any:
        """A chat model connection: the offline scripted model, or litellm for any provider."""
        if provider == _SCRIPTED:
            from eddies.connectors.models.scripted import ScriptedChatModel

            responder = opts.pop("responder")
            opts.finish("type, responder")
            if responder is None:
                return ScriptedChatModel()
            return ScriptedChatModel(import_target(str(responder.value), responder.at, "responder"))
        from eddies.connectors.models.litellm import LiteLLMChatModel

        key = opts.text("api_key", secret=True)
        prices = {k: opts.number(k, -1.0) for k in ("input_cost_per_token", "output_cost_per_token")}
        conn = LiteLLMChatModel(api_base=opts.text("endpoint"), timeout=opts.number("timeout", 120.0),
                                api_key=None if key is None else read_env(key, stmt.at),
                                **{k: v for k, v in prices.items() if v >= 0})
        opts.finish("type, endpoint, api-key, timeout, input_cost_per_token, output_cost_per_token")
        return conn

    def _function(self, stmt: Statement) -> Any:
        if stmt.target is None:
            raise DefinitionError(f"{stmt.at}: CREATE FUNCTION {stmt.name}: AS 'module.function' is required")
        if stmt.language is not None and stmt.language.text.upper() != "PYTHON":
            raise DefinitionError(f"{stmt.language.at}: language {stmt.language.text!r}: only PYTHON "
                                  "functions run here")
        fn = import_target(stmt.target.text, stmt.target.at, "AS", dotted=True)
        if not callable(fn):
            raise DefinitionError(f"{stmt.target.at}: {stmt.target.text!r} is not a function")
        return fn

    def _model(self, stmt: Statement) -> _Model:
        probe = With(stmt)
        provider = (probe.text("provider") or "").lower()
        opts = With(stmt, provider)
        opts.pop("provider")
        task = opts.text("task")
        if task is not None and task.lower() != "text_generation":
            raise DefinitionError(f"{option_at(stmt, 'task')}: task {task!r}: agents use text_generation "
                                  "models")
        conn_ref = opts.pop("connection")
        if conn_ref is not None:
            kind, _conn = self.ref("CONNECTION", Name(str(conn_ref.value), conn_ref.at))
            if kind is not ResourceType.CHAT_MODEL_CONNECTION:
                raise DefinitionError(f"{conn_ref.at}: connection {conn_ref.value!r} is not a model "
                                      "provider's")
            connection = str(conn_ref.value)
            types = {k.lower(): o.value for k, o in self.by_kind["CONNECTION"][connection].options.items()}
            provider = provider or str(types.get("type", "")).lower()
        elif not provider:
            raise DefinitionError(f"{stmt.with_at or stmt.at}: CREATE MODEL {stmt.name}: give 'provider' "
                                  "(and a connection, or its endpoint and api-key)")
        else:  # the connection is written in the model: it becomes one of its own
            connection = f"{stmt.name}-connection"
            implicit = With(Statement("CONNECTION", connection, stmt.at, stmt.start, options={
                k: o for k, o in stmt.options.items()
                if k.lower().replace("-", "_").removeprefix(provider + ".") in (
                    "endpoint", "api_key", "timeout", "responder", "input_cost_per_token",
                    "output_cost_per_token")}))
            for key in implicit.left:
                opts.pop(key)
            self.objects[("CONNECTION", connection)] = (
                ResourceType.CHAT_MODEL_CONNECTION, self._model_connection(stmt, implicit, provider))
        model = opts.text("model", "model_version") or ""
        if model and provider not in (_SCRIPTED, "litellm") and not model.startswith(provider + "/"):
            model = f"{provider}/{model}"  # litellm's provider/model form
        params = {k: o.value for k, o in opts.prefixed("params").items()}
        for key in _MODEL_ARGUMENTS:
            option = opts.pop(key)
            if option is not None:
                params[key] = option.value
        setup = ChatModelSetup(connection, model=model, prompt=opts.text("system_prompt"),
                               arguments=params, idempotent=opts.flag("idempotent", True),
                               timeout_ms=opts.whole("timeout_ms"))
        opts.finish("provider, connection, model (or model_version), endpoint, api-key, task, "
                    f"system_prompt, params.NAME, {', '.join(_MODEL_ARGUMENTS)}, idempotent, timeout_ms")
        return _Model(setup, connection, stmt)

    def _tool(self, stmt: Statement) -> tuple[Any, str | None]:
        """The tool, and the name of the server resource it needs (None for a function)."""
        opts = With(stmt)
        kind = (opts.text("type", required=True) or "").lower()
        uses_fn = stmt.using.get("FUNCTION")
        uses_conn = stmt.using.get("CONNECTION")
        if kind == "function":
            if not uses_fn:
                raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: a function tool is USING "
                                      "FUNCTION f")
            fn = self.ref("FUNCTION", uses_fn[0])
            inject = {param: read_text(o).replace("short_term_memory:", "memory:")
                      for param, o in opts.prefixed("injected_args").items()}
            with located(stmt.at):
                tool: Any = FunctionTool(fn, name=stmt.name, description=opts.text("description"),
                                         idempotent=opts.flag("idempotent", False),
                                         timeout_ms=opts.whole("timeout_ms"),
                                         requires_approval=opts.flag("requires_approval", False),
                                         approval_timeout_ms=opts.whole("approval_timeout_ms"), inject=inject)
            opts.finish("type, description, idempotent, timeout_ms, requires_approval, approval_timeout_ms, "
                        "injected_args.PARAMETER")
            return tool, None
        if kind not in ("mcp", "a2a"):
            raise DefinitionError(f"{option_at(stmt, 'type')}: type {kind!r} is not one of function, mcp, "
                                  "a2a")
        if not uses_conn:
            raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: an {kind} tool is USING CONNECTION c")
        server_kind, _server = self.ref("CONNECTION", uses_conn[0])
        if server_kind is not (ResourceType.MCP_SERVER if kind == "mcp" else ResourceType.A2A_SERVER):
            raise DefinitionError(f"{uses_conn[0].at}: connection {uses_conn[0].text!r} is not of type "
                                  f"{'mcp_server' if kind == 'mcp' else 'a2a'}")
        server = uses_conn[0].text
        with located(stmt.at):
            if kind == "mcp":
                allowed = [t.strip() for t in (opts.text("allowed_tools", required=True) or "").split(",")
                           if t.strip()]
                descriptions = {k: read_text(o) for k, o in opts.prefixed("description").items()}
                one = opts.text("description")
                if one is not None:
                    if len(allowed) != 1:
                        raise DefinitionError(f"{option_at(stmt, 'description')}: 'description' overrides "
                                              "one tool's: write 'description.TOOL' for each")
                    descriptions[allowed[0]] = one
                tool = McpTool(server, allowed_tools=allowed,
                               request_timeout=opts.number("request_timeout", 20.0),
                               max_retries=opts.whole("max_retries", 2) or 0, descriptions=descriptions)
                opts.finish("type, allowed_tools, request_timeout, max_retries, description, "
                            "description.TOOL")
            else:
                tool = A2aTool(server, agent_card_path=opts.text("agent_card_path", required=True) or "",
                               name=opts.text("tool_name"), description=opts.text("description"),
                               request_timeout=opts.number("request_timeout", 60.0),
                               max_retries=opts.whole("max_retries", 2) or 0)
                opts.finish("type, agent_card_path, tool_name, description, request_timeout, max_retries")
        return tool, server

    def _external(self, stmt: Statement) -> SubagentSetup:
        """``CREATE AGENT a USING CONNECTION c``: the agent behind an A2A or HTTP connection."""
        for clause in ("USING MODEL", "USING PROMPT", "USING TOOLS", "USING AGENTS"):
            if clause in stmt.clauses:
                raise DefinitionError(f"{stmt.clauses[clause]}: an agent USING CONNECTION is external: it "
                                      f"takes no {clause}")
        conn = stmt.using["CONNECTION"][0]
        _kind, server = self.ref("CONNECTION", conn)
        return external_agent(stmt, conn, server)

    def _agent(self, stmt: Statement) -> _Standard | tuple[Statement, _Standard, _Standard] | SubagentSetup:
        if "USING AGENTS" in stmt.clauses:
            for clause in ("USING MODEL", "USING PROMPT", "USING TOOLS"):
                if clause in stmt.clauses:
                    raise DefinitionError(f"{stmt.clauses[clause]}: a reflection agent (USING AGENTS) takes "
                                          f"no {clause}: its drafter and critic have their own")
            agents = stmt.using["AGENTS"]
            if len(agents) != 2:
                raise DefinitionError(f"{agents[0].at}: USING AGENTS names the drafter and the critic, "
                                      f"got {len(agents)} agents")
            roles = []
            for name in agents:
                sub = self.ref("AGENT", name)
                if not isinstance(sub, _Standard):
                    raise DefinitionError(f"{name.at}: agent {name.text!r} is a reflection agent: a drafter "
                                          "or critic is a standard agent (USING MODEL)")
                roles.append(sub)
            return stmt, roles[0], roles[1]
        if "USING CONNECTION" in stmt.clauses:
            return self._external(stmt)
        if "USING MODEL" not in stmt.clauses:
            raise DefinitionError(f"{stmt.at}: CREATE AGENT {stmt.name}: USING MODEL m (or USING AGENTS "
                                  "drafter, critic, or USING CONNECTION c) is required")
        model = self.ref("MODEL", stmt.using["MODEL"][0])
        tools = stmt.using.get("TOOLS", [])
        for tool in tools:  # a tool, or an agent called as one (a sub-agent)
            if tool.text in self.by_kind.get("AGENT", {}) and tool.text not in self.by_kind.get("TOOL", {}):
                self.ref("AGENT", tool)
            elif tool.text != GENERAL_PURPOSE:
                self.ref("TOOL", tool)
        prompt = None if stmt.prompt is None else stmt.prompt.text
        standard = _Standard(model, prompt, tuple(t.text for t in tools), stmt.options, stmt)
        self._react_options(standard)  # checked now, used or not
        return standard

    # --- agents ---------------------------------------------------------------------------

    def _declared(self) -> dict[str, Statement]:
        declared = self.by_kind.get("AGENT", {})
        if not declared:
            raise DefinitionError(f"{self.source}:1:1: the file creates no agent (CREATE AGENT)")
        return declared

    def top(self) -> list[str]:
        """The agents no other agent uses (as drafter, critic or tool) and that run here."""
        declared = self._declared()
        used = {n.text for stmt in declared.values()  # as drafters, critics, or tools
                for n in (*stmt.using.get("AGENTS", []), *stmt.using.get("TOOLS", []))}
        return [n for n, stmt in declared.items() if n not in used and "USING CONNECTION" not in stmt.clauses]

    def agent(self, name: str | None) -> Agent:
        declared = self._declared()
        if name is not None:
            if name not in declared:
                raise DefinitionError(f"{self.source}:1:1: no agent {name!r} (the file creates: "
                                      f"{', '.join(declared)})")
            return self.make(name)
        top = self.top()
        if len(top) != 1:
            raise DefinitionError(f"{self.source}:1:1: the file creates {len(top)} agents no other agent "
                                  f"uses ({', '.join(top)}): name the one to load")
        return self.make(top[0])

    def make(self, name: str) -> Agent:
        built = self.build("AGENT", name)
        agent: Agent
        if isinstance(built, SubagentSetup):
            raise DefinitionError(f"{self.by_kind['AGENT'][name].at}: agent {name!r} is external (USING "
                                  "CONNECTION): another agent calls it, it does not run here")
        if isinstance(built, _Standard):
            general = With(built.statement)
            version, config, schema = self._general(general)
            options = self._react_options(built)
            agent = ReActAgent(name, model=built.model.statement.name, prompt=built.prompt,
                               output_schema=schema, options=options, version=version, config=config)
            self._add(agent, built.model.statement.name, built)
            return agent
        stmt, drafter, critic = built
        opts = With(stmt)
        kind = opts.text("type")
        if kind is not None and kind.lower() != "reflection":
            raise DefinitionError(f"{option_at(stmt, 'type')}: a USING AGENTS agent is of type reflection, "
                                  f"not {kind!r}")
        version, config, schema = self._general(opts)
        if schema is not None:
            raise DefinitionError(f"{option_at(stmt, 'output_schema')}: a reflection agent's output is its "
                                  "verdict: give output_schema to neither")
        loop: dict[str, Any] = {}
        for sub in (drafter, critic):
            sub_opts = With(sub.statement)
            sub_opts.pop("type")
            for extra in ("version", "output_schema"):
                if extra in sub_opts.left:
                    role = "drafter" if sub is drafter else "critic"
                    raise DefinitionError(f"{sub_opts.left[extra].key_at}: {sub.statement.name} is {name}'s "
                                          f"{role}: give {extra} to {name}")
            if sub_opts.prefixed("config"):
                raise DefinitionError(f"{sub.statement.at}: {sub.statement.name} is {name}'s drafter or "
                                      f"critic: give its config.NAME options to {name}")
            for key, option in sub_opts.left.items():
                if key in loop and loop[key][0] != option.value:
                    raise DefinitionError(f"{option.key_at}: drafter and critic run under one set of loop "
                                          f"options, and {key!r} differs (also at {loop[key][1]})")
                loop[key] = (option.value, option.key_at)
        loop_values = {k: v for k, (v, _) in loop.items()}
        for key, option in opts.prefixed("loop").items():
            loop_values[key] = option.value
        reflection = checked_options(ReflectionOptions, opts.left, stmt, {"loop": loop_values})
        agent = ReflectionAgent(name, drafter=drafter.statement.name, critic=critic.statement.name,
                                drafter_prompt=drafter.prompt, critic_prompt=critic.prompt,
                                options=reflection, version=version, config=config)
        self._add(agent, drafter.statement.name, drafter)
        self._add(agent, critic.statement.name, critic)
        return agent

    def _general(self, opts: With) -> tuple[str | None, dict[str, Any], Any]:
        """An agent's version, config and output schema options (removed from ``opts``)."""
        version = opts.text("version")
        config = {k: o.value for k, o in opts.prefixed("config").items()}
        schema_ref = opts.pop("output_schema")
        schema = (None if schema_ref is None else
                  import_target(str(schema_ref.value), schema_ref.at, "output_schema"))
        opts.pop("type")
        return version, config, schema

    def _react_options(self, standard: _Standard) -> ReActOptions:
        opts = With(standard.statement)
        kind = opts.text("type")
        if kind is not None and kind.lower() != "react":
            raise DefinitionError(f"{option_at(standard.statement, 'type')}: a USING MODEL agent is of type "
                                  f"react, not {kind!r}")
        self._general(opts)
        options: ReActOptions = checked_options(ReActOptions, opts.left, standard.statement)
        return options

    def _add(self, agent: Agent, setup_name: str, standard: _Standard) -> None:
        """The model setup ``setup_name`` with the agent's tools, and every resource it needs."""
        have = {r.name: r for r in agent.resources}

        def add(name: str, kind: ResourceType, obj: Any, at: str) -> None:
            if name in have:
                if have[name].type is kind and have[name].obj is obj:
                    return
                raise DefinitionError(f"{at}: {name!r} names two resources of agent {agent.name!r} "
                                      f"({have[name].type.value} and {kind.value})")
            agent.add_resource(name, kind, obj)
            have[name] = agent.resources[-1]

        model = standard.model
        setup = replace(model.setup, tools=standard.tools)
        add(setup_name, ResourceType.CHAT_MODEL, setup, standard.statement.at)
        kind, conn = self.objects[("CONNECTION", model.connection)]
        add(model.connection, kind, conn, model.statement.at)
        for tool_name in standard.tools:
            if tool_name == GENERAL_PURPOSE and tool_name not in self.by_kind.get("AGENT", {}):
                continue  # the built-in one: the plan adds it
            if tool_name in self.by_kind.get("AGENT", {}) and tool_name not in self.by_kind.get("TOOL", {}):
                built = self.build("AGENT", tool_name)
                sub = built if isinstance(built, SubagentSetup) else self.make(tool_name)
                if isinstance(sub, Agent) and self.by_kind["AGENT"][tool_name].comment is not None:
                    sub.description = self.by_kind["AGENT"][tool_name].comment.text  # type: ignore[union-attr]
                add(tool_name, ResourceType.AGENT, sub, self.by_kind["AGENT"][tool_name].at)
                continue
            tool, server = self.build("TOOL", tool_name)
            add(tool_name, ResourceType.TOOL, tool, self.by_kind["TOOL"][tool_name].at)
            if server is not None:
                server_kind, obj = self.build("CONNECTION", server)
                add(server, server_kind, obj, self.by_kind["CONNECTION"][server].at)


__all__ = ["DefinitionError", "load_sql", "load_sql_text"]
