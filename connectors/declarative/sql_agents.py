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
docs/guide/declarative.md, "Agents in SQL".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eddies.connectors.declarative.located import DefinitionError, read_definition
from eddies.connectors.declarative.references import hooks_named, import_target
from eddies.connectors.declarative.sql_models import ChatModel, model
from eddies.connectors.declarative.sql_options import With, checked_options, option_at
from eddies.connectors.declarative.sql_parse import Name, Option, Statement, parse_sql
from eddies.connectors.declarative.sql_resources import (
    EmbeddingModel,
    Tool,
    connection,
    function,
    mcp_prompt,
    prompt,
)
from eddies.connectors.declarative.sql_resources import tool as made_tool
from eddies.connectors.declarative.sql_subagents import external_agent
from eddies.engine import (
    Agent,
    RagAgent,
    RagOptions,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    SubagentSetup,
)
from eddies.engine.options import did_you_mean
from eddies.engine.prompts import McpPrompt, Prompt
from eddies.engine.react import GENERAL_PURPOSE

#: Which clauses each statement takes.
_CLAUSES = {
    "CONNECTION": {"WITH", "COMMENT"},
    "MODEL": {"WITH", "COMMENT", "INPUT", "OUTPUT"},
    "FUNCTION": {"AS", "LANGUAGE", "COMMENT"},
    "PROMPT": {"AS", "WITH", "COMMENT", "USING CONNECTION"},
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
class _Standard:
    """A standard agent, before it is an Agent (it may be a reflection's drafter or critic)."""

    model: ChatModel
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
        # Every statement is checked, used or not.
        for kind in ("CONNECTION", "FUNCTION", "PROMPT", "MODEL", "TOOL", "AGENT"):
            for name in self.by_kind.get(kind, {}):
                self.build(kind, name)

    # --- references ---------------------------------------------------------------------

    def ref(self, kind: str, name: Name) -> Any:
        if name.text not in self.by_kind.get(kind, {}):
            other = next((k for k, named in self.by_kind.items() if name.text in named), None)
            also = (f" ({name.text!r} is a {other.lower()})" if other else
                    did_you_mean(name.text, self.by_kind.get(kind, {})))
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

    def _connection(self, stmt: Statement) -> tuple[ResourceType | None, Any]:
        return connection(stmt)

    def _function(self, stmt: Statement) -> Any:
        return function(stmt)

    def _prompt(self, stmt: Statement) -> Prompt | McpPrompt:
        uses = stmt.using.get("CONNECTION")
        if not uses:
            return prompt(stmt)
        kind, _server = self.ref("CONNECTION", uses[0])
        if kind is not ResourceType.MCP_SERVER:
            raise DefinitionError(f"{uses[0].at}: connection {uses[0].text!r} is not of type mcp_server")
        return mcp_prompt(stmt, uses[0].text)

    def _model(self, stmt: Statement) -> ChatModel | EmbeddingModel:
        return model(stmt, self.ref, self.by_kind.get("CONNECTION", {}), self.objects)

    def _tool(self, stmt: Statement) -> Tool:
        return made_tool(stmt, self.ref)

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
        if not isinstance(model, ChatModel):
            raise DefinitionError(f"{stmt.using['MODEL'][0].at}: model {stmt.using['MODEL'][0].text!r} is an "
                                  "embedding model: an agent is USING MODEL a text_generation one")
        tools = stmt.using.get("TOOLS", [])
        for tool in tools:  # a tool, or an agent called as one (a sub-agent)
            if tool.text in self.by_kind.get("AGENT", {}) and tool.text not in self.by_kind.get("TOOL", {}):
                self.ref("AGENT", tool)
            elif tool.text != GENERAL_PURPOSE:
                self.ref("TOOL", tool)
        prompt = None if stmt.prompt is None else stmt.prompt.text
        if stmt.prompt_name is not None:  # a CREATE PROMPT's name: the agent's PROMPT resource
            self.ref("PROMPT", stmt.prompt_name)
            prompt = stmt.prompt_name.text
        standard = _Standard(model, prompt, tuple(t.text for t in tools), stmt.options, stmt)
        self._options(standard)  # checked now, used or not
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
        agent = self._made(name)
        hooks = With(self.by_kind["AGENT"][name]).pop("hooks")
        if hooks is not None:
            texts = [t.strip() for t in str(hooks.value).split(",") if t.strip()]
            for hook in hooks_named(texts, hooks.at):
                agent.add_hook(hook)
        return agent

    def _made(self, name: str) -> Agent:
        built = self.build("AGENT", name)
        agent: Agent
        if isinstance(built, SubagentSetup):
            raise DefinitionError(f"{self.by_kind['AGENT'][name].at}: agent {name!r} is external (USING "
                                  "CONNECTION): another agent calls it, it does not run here")
        if isinstance(built, _Standard):
            general = With(built.statement)
            version, config, schema = self._general(general)
            options = self._options(built)
            if isinstance(options, RagOptions):
                store = self._rag_store(built)
                agent = RagAgent(name, model=built.model.statement.name, vector_store=store,
                                 prompt=built.prompt, options=options, version=version, config=config)
                self._add(agent, built.model.statement.name, built, offered=False)
                return agent
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
                                drafter_prompt=self._prompt_text(drafter),
                                critic_prompt=self._prompt_text(critic),
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
        opts.pop("hooks")  # read by make
        return version, config, schema

    def _options(self, standard: _Standard) -> ReActOptions | RagOptions:
        opts = With(standard.statement)
        kind = (opts.text("type") or "react").lower()
        if kind not in ("react", "rag"):
            raise DefinitionError(f"{option_at(standard.statement, 'type')}: a USING MODEL agent is of type "
                                  f"react or rag, not {kind!r}")
        self._general(opts)
        if kind == "rag":
            self._rag_store(standard)
            rag: RagOptions = checked_options(RagOptions, opts.left, standard.statement)
            return rag
        options: ReActOptions = checked_options(ReActOptions, opts.left, standard.statement)
        return options

    def _rag_store(self, standard: _Standard) -> str:
        """The vector store a rag agent answers from: its one tool, a vector_search one."""
        stores = [t for t in standard.tools if t in self.by_kind.get("TOOL", {})
                  and self.build("TOOL", t).rtype is ResourceType.VECTOR_STORE]
        if len(stores) != 1 or len(standard.tools) != 1:
            raise DefinitionError(f"{standard.statement.at}: a rag agent is USING TOOLS one vector_search "
                                  "tool, the store it answers from (got: "
                                  f"{', '.join(standard.tools) or 'none'})")
        return stores[0]

    def _prompt_text(self, standard: _Standard) -> str | None:
        """A drafter's or critic's prompt as text (a CREATE PROMPT's system messages)."""
        if standard.prompt is None or standard.statement.prompt_name is None:
            return standard.prompt
        made: Prompt | McpPrompt = self.build("PROMPT", standard.prompt)
        if isinstance(made, McpPrompt):
            raise DefinitionError(f"{standard.statement.prompt_name.at}: a reflection agent's drafter or "
                                  "critic takes a prompt with text or messages, not an MCP prompt")
        return made.system_text

    def _add_compaction_model(self, tool: Tool, stmt: Statement,
                              add: Callable[[str, ResourceType, Any, str], None]) -> None:
        """A memory set's compaction model (its MODEL ``tool.chat_model``) and connection."""
        name = Name(str(tool.chat_model), option_at(stmt, "compaction_model"))
        model = self.ref("MODEL", name)
        if not isinstance(model, ChatModel):
            raise DefinitionError(f"{name.at}: model {name.text!r} is not a chat model")
        add(str(tool.obj.compaction_model), ResourceType.CHAT_MODEL, model.setup, stmt.at)
        kind, conn = self.objects[("CONNECTION", model.connection)]
        add(model.connection, kind, conn, model.statement.at)

    def _add_fallbacks(self, model: ChatModel, tools: tuple[str, ...] | list[str],
                       add: Callable[[str, ResourceType, Any, str], None], have: dict[str, Any]) -> None:
        """The fallbacks of ``model`` (and theirs), each offered the same ``tools``, and
        their connections (a fallback already added for another setup stays as it is)."""
        for name in model.fallbacks:
            if name.text in have and have[name.text].type is ResourceType.CHAT_MODEL:
                continue
            fallback: ChatModel = self.build("MODEL", name.text)
            add(name.text, ResourceType.CHAT_MODEL, replace(fallback.setup, tools=tools), name.at)
            kind, conn = self.objects[("CONNECTION", fallback.connection)]
            add(fallback.connection, kind, conn, fallback.statement.at)
            self._add_fallbacks(fallback, tools, add, have)

    def _add(self, agent: Agent, setup_name: str, standard: _Standard, offered: bool = True) -> None:
        """The model setup ``setup_name`` with the agent's tools (``offered``: offered to its
        model; a rag agent's store is not), and every resource it needs."""
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
        setup = replace(model.setup, tools=standard.tools if offered else ())
        add(setup_name, ResourceType.CHAT_MODEL, setup, standard.statement.at)
        if standard.statement.prompt_name is not None and isinstance(agent, ReActAgent | RagAgent):
            name = standard.statement.prompt_name.text
            made = self.build("PROMPT", name)
            add(name, ResourceType.PROMPT, made, self.by_kind["PROMPT"][name].at)
            if isinstance(made, McpPrompt):
                server_kind, obj = self.build("CONNECTION", made.server)
                add(made.server, server_kind, obj, self.by_kind["CONNECTION"][made.server].at)
        kind, conn = self.objects[("CONNECTION", model.connection)]
        add(model.connection, kind, conn, model.statement.at)
        self._add_fallbacks(model, setup.tools, add, have)
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
            tool: Tool = self.build("TOOL", tool_name)
            add(tool_name, tool.rtype, tool.obj, self.by_kind["TOOL"][tool_name].at)
            if tool.server is not None:
                server_kind, obj = self.build("CONNECTION", tool.server)
                add(tool.server, server_kind, obj, self.by_kind["CONNECTION"][tool.server].at)
            if tool.store is not None:
                store_name, store = tool.store
                add(store_name, ResourceType.VECTOR_STORE, store, self.by_kind["TOOL"][tool_name].at)
            if tool.chat_model is not None:
                self._add_compaction_model(tool, self.by_kind["TOOL"][tool_name], add)
            if tool.model is not None:
                emb: EmbeddingModel = self.build("MODEL", tool.model)
                at = self.by_kind["MODEL"][tool.model].at
                add(tool.model, ResourceType.EMBEDDING_MODEL, emb.setup, at)
                add(emb.connection, ResourceType.EMBEDDING_MODEL_CONNECTION, emb.connection_obj, at)


__all__ = ["DefinitionError", "load_sql", "load_sql_text"]
