"""Agents declared in YAML, in the shape of Apache Flink Agents' YAML API: an ``agents``
list, each with its actions and resources (prompts, tools, chat and embedding model
connections and setups, vector stores, memory sets, MCP servers) referring to each other
by name, and Eddies' built-in agents (``type: react``, ``reflection`` or ``rag``) with their options.
Unknown keys, wrong types and dangling references are errors naming the file, line and
column. Example::

    agents:
      - name: support
        type: react
        model: llm
        options: {max_iterations: 5, handle_exception: CONTINUE}
        chat_model_connections:
          - {name: local, clazz: openai, api_base: "http://127.0.0.1:8000/v1", api_key: "${KEY}"}
        chat_model_setups:
          - {name: llm, connection: local, model: openai/m, prompt: support_prompt, tools: [refund]}
        prompts:
          - {name: support_prompt, text: You answer billing questions.}
        tools:
          - {name: refund, function: my_pkg.tools:refund, requires_approval: true}

``load_yaml("agents.yaml")`` returns the (only, or ``agent=``-named) Agent. A string
written ``${NAME}`` is read from the environment variable NAME when the file is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddies.connectors.declarative.located import (
    DefinitionError,
    Map,
    Seq,
    located,
    parse_yaml,
    read_definition,
    where,
)
from eddies.connectors.declarative.references import hooks_named, read_env
from eddies.connectors.declarative.yaml_entries import blob_folder
from eddies.connectors.declarative.yaml_entries import boolean as _bool
from eddies.connectors.declarative.yaml_entries import entry_at as _entry
from eddies.connectors.declarative.yaml_entries import import_text as _import_text
from eddies.connectors.declarative.yaml_entries import imported as _import
from eddies.connectors.declarative.yaml_entries import integer as _int
from eddies.connectors.declarative.yaml_entries import keys as _keys
from eddies.connectors.declarative.yaml_entries import made_from_clazz as _made
from eddies.connectors.declarative.yaml_entries import mapping as _map
from eddies.connectors.declarative.yaml_entries import python_only as _python
from eddies.connectors.declarative.yaml_entries import seq as _list
from eddies.connectors.declarative.yaml_entries import text as _text
from eddies.connectors.declarative.yaml_knowledge import knowledge_resources, prompt_text
from eddies.connectors.declarative.yaml_knowledge import prompts as declared_prompts
from eddies.engine import (
    A2aServer,
    A2aTool,
    Agent,
    ChatModelSetup,
    FunctionTool,
    McpServer,
    McpTool,
    RagAgent,
    RagOptions,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    SubagentSetup,
)
from eddies.engine.agent import ActionSpec
from eddies.engine.options import did_you_mean
from eddies.engine.prompts import McpPrompt, Prompt
from eddies.engine.react import GENERAL_PURPOSE

#: Built-in event type aliases of Flink Agents' YAML, and Eddies' own.
EVENT_ALIASES = {"input": "InputEvent", "output": "OutputEvent", "chat_request": "ChatRequestEvent",
                 "chat_response": "ChatResponseEvent", "tool_request": "ToolRequestEvent",
                 "tool_response": "ToolResponseEvent", "signal": "SignalEvent"}
#: ``clazz`` aliases of chat model connections.
CONNECTIONS = {"openai": "eddies.connectors.models.litellm:LiteLLMChatModel",
               "litellm": "eddies.connectors.models.litellm:LiteLLMChatModel",
               "scripted": "eddies.connectors.models.scripted:ScriptedChatModel"}
#: ``clazz`` aliases of embedding model connections.
EMBEDDING_CONNECTIONS = {"openai": "eddies.connectors.models.embeddings:LiteLLMEmbeddingModel",
                         "litellm": "eddies.connectors.models.embeddings:LiteLLMEmbeddingModel",
                         "offline": "eddies.connectors.models.embeddings:OfflineEmbeddingModel"}
_AGENT_KEYS = {"name", "description", "version", "type", "config", "actions", "prompts", "tools",
               "chat_model_connections", "chat_model_setups", "embedding_model_connections",
               "embedding_model_setups", "vector_stores", "vector_store", "memory_sets", "skills",
               "mcp_servers", "a2a_servers",
               "model", "prompt",
               "options", "drafter", "critic", "drafter_prompt", "critic_prompt", "output_schema",
               "subagents", "subagent_compatible", "hooks"}
_SECTIONS = ("prompts", "mcp_servers", "a2a_servers", "tools", "subagents", "chat_model_connections",
             "chat_model_setups", "embedding_model_connections", "embedding_model_setups",
             "vector_stores", "memory_sets", "skills")
_SUBAGENT_KEYS = {"name", "agent_ref", "target_module", "target_clazz", "arguments", "description"}
_MCP_SERVER_KEYS = {"name", "clazz", "type", "endpoint", "url", "command", "args", "env", "headers",
                    "api_key_env", "blob_store"}
_SETUP_KEYS = {"name", "clazz", "type", "connection", "model", "prompt", "tools", "arguments",
               "idempotent", "timeout_ms", "fallbacks", "stream"}
_TOOL_KEYS = {"name", "type", "function", "description", "idempotent", "timeout_ms", "requires_approval",
              "approval_timeout_ms", "injected_args"}

#: The sections whose entries a chat model setup may offer its model as tools.
_OFFERED_SECTIONS = ("tools", "subagents", "vector_stores", "memory_sets", "skills")


def load_yaml(path: str | Path, agent: str | None = None) -> Agent:
    """The agent the YAML file ``path`` declares (``agent``: which one, when it declares
    several); DefinitionError naming file, line and column when it cannot be one."""
    text = read_definition(path)
    return load_yaml_text(text, str(path), agent)


def load_yaml_all(path: str | Path) -> list[Agent]:
    """Every agent the YAML file ``path`` declares, in its order."""
    text = read_definition(path)
    agents = _agents(parse_yaml(text, str(path)), str(path))
    return [_agent(agents, i) for i in range(len(agents))]


def _agents(doc: Any, source: str) -> Seq:
    if not isinstance(doc, Map):
        raise DefinitionError(f"{source}:1:1: expected a mapping with an 'agents' list")
    _keys(doc, {"agents"}, "the file")
    return _list(doc, "agents", required=True)


def load_yaml_text(text: str, source: str = "<yaml>", agent: str | None = None) -> Agent:
    """:func:`load_yaml` of YAML ``text`` (``source`` names it in errors)."""
    agents = _agents(parse_yaml(text, source), source)
    names = [a.get("name") if isinstance(a, Map) else None for a in agents]
    if agent is None:
        if len(agents) != 1:
            raise DefinitionError(f"{agents.where}: the file declares {len(agents)} agents "
                                  f"({', '.join(map(str, names))}): name the one to load")
        index = 0
    elif agent in names:
        index = names.index(agent)
    else:
        raise DefinitionError(f"{agents.where}: no agent {agent!r} (the file declares: "
                              f"{', '.join(map(str, names))})")
    return _agent(agents, index)


def _agent(agents: Seq, index: int, path: tuple[str, ...] = ()) -> Agent:
    """Agent ``index`` of the document (``path``: the agents above it, calling it as a
    sub-agent)."""
    spec = agents[index]
    if not isinstance(spec, Map):
        raise DefinitionError(f"{where(agents, index)}: an agent is a mapping")
    _keys(spec, _AGENT_KEYS, "an agent")
    name = _text(spec, "name", required=True)
    kind = _text(spec, "type") or ("react" if "model" in spec else "workflow")
    config = _map(spec, "config")
    version = _text(spec, "version")
    prompts = declared_prompts(spec)
    agent: Agent
    if kind == "react":
        _only(spec, {"model", "prompt", "options", "output_schema"}, kind)
        model = _text(spec, "model", required=True)
        options = _options(spec, ReActOptions)
        schema = _import(spec, "output_schema") if "output_schema" in spec else None
        prompt = _text(spec, "prompt") if "prompt" in spec else None
        agent = ReActAgent(name, model=model, prompt=prompt, output_schema=schema, options=options,
                           version=version, config=dict(config))
    elif kind == "reflection":
        _only(spec, {"drafter", "critic", "drafter_prompt", "critic_prompt", "options"}, kind)
        agent = ReflectionAgent(
            name, drafter=_text(spec, "drafter", required=True), critic=_text(spec, "critic", required=True),
            drafter_prompt=prompt_text(spec, "drafter_prompt", prompts) if "drafter_prompt" in spec else None,
            critic_prompt=prompt_text(spec, "critic_prompt", prompts) if "critic_prompt" in spec else None,
            options=_options(spec, ReflectionOptions), version=version, config=dict(config))
    elif kind == "rag":
        _only(spec, {"model", "vector_store", "prompt", "options"}, kind)
        agent = RagAgent(
            name, model=_text(spec, "model", required=True),
            vector_store=_text(spec, "vector_store", required=True),
            prompt=_text(spec, "prompt") if "prompt" in spec else None,
            options=_options(spec, RagOptions), version=version, config=dict(config))
    elif kind == "workflow":
        _only(spec, set(), kind)
        agent = Agent(name, version, dict(config))
    else:
        raise DefinitionError(f"{where(spec, 'type')}: type {kind!r} is not one of workflow, react, "
                              "reflection, rag")
    if "description" in spec:
        agent.description = _text(spec, "description")
    if "subagent_compatible" in spec:
        if not isinstance(spec["subagent_compatible"], bool):
            raise DefinitionError(f"{where(spec, 'subagent_compatible')}: subagent_compatible: expected true "
                                  "or false")
        agent.subagent_compatible = spec["subagent_compatible"]
    for i, action in enumerate(_list(spec, "actions")):
        agent.actions.append(_action(spec["actions"], i, action))
    _resources(spec, agent, prompts, inherits=bool(path))
    if kind == "rag" and not path:  # (a sub-agent's store may be its caller's)
        stores = {e.get("name") for e in _list(spec, "vector_stores") if isinstance(e, Map)}
        if spec["vector_store"] not in stores:
            raise DefinitionError(f"{where(spec, 'vector_store')}: vector store "
                                  f"{spec['vector_store']!r} is not declared in vector_stores")
    for i, item in enumerate(_list(spec, "hooks")):  # in order, each module:attribute
        if not isinstance(item, str):
            raise DefinitionError(f"{where(spec['hooks'], i)}: a hook is written module:attribute, "
                                  f"got {item!r}")
        for hook in hooks_named([item], where(spec["hooks"], i)):
            agent.add_hook(hook)
    for i, item in enumerate(_list(spec, "subagents")):
        entry = _entry(spec["subagents"], i, item, _SUBAGENT_KEYS, "a sub-agent")
        agent.add_resource(_text(entry, "name", required=True), ResourceType.AGENT,
                           _subagent(agents, entry, (*path, name)))
    return agent


def _subagent(agents: Seq, entry: Map, path: tuple[str, ...]) -> Any:
    """A ``subagents:`` entry: another agent of the document (``agent_ref``), or an external
    one (``target_module`` + ``target_clazz`` + ``arguments``: a SubagentSetup)."""
    if ("agent_ref" in entry) == ("target_clazz" in entry):
        raise DefinitionError(f"{entry.where}: a sub-agent is agent_ref (an agent of this file) or "
                              "target_module and target_clazz (a SubagentSetup), one of the two")
    if "agent_ref" in entry:
        ref = _text(entry, "agent_ref", required=True)
        names = [a.get("name") if isinstance(a, Map) else None for a in agents]
        if ref not in names:
            raise DefinitionError(f"{where(entry, 'agent_ref')}: agent {ref!r} is not declared in this file "
                                  f"(it declares: {', '.join(map(str, names))})")
        if ref in path:
            chain = " -> ".join((*path[path.index(ref):], ref))
            raise DefinitionError(f"{where(entry, 'agent_ref')}: sub-agents call each other in a cycle: "
                                  f"{chain}")
        child = _agent(agents, names.index(ref), path)
        if "description" in entry:
            child.description = _text(entry, "description")
        return child
    target = f"{_text(entry, 'target_module', required=True)}:{_text(entry, 'target_clazz', required=True)}"
    cls = _import_text(entry, "target_clazz", target)
    arguments = {k: read_env(v, where(entry["arguments"], k)) for k, v in _map(entry, "arguments").items()}
    with located(entry.where, f"{target}: "):
        setup = cls(**arguments)
    if not isinstance(setup, SubagentSetup):
        raise DefinitionError(f"{where(entry, 'target_clazz')}: {target} is not a SubagentSetup")
    if "description" in entry:
        setup.description = _text(entry, "description")
    return setup


def _only(spec: Map, allowed: set[str], kind: str) -> None:
    """Keys that belong to another type of agent are errors."""
    for key in ("model", "prompt", "options", "output_schema", "drafter", "critic", "drafter_prompt",
                "critic_prompt", "vector_store"):
        if key in spec and key not in allowed:
            raise DefinitionError(f"{where(spec, key)}: {key!r} is not an option of a {kind} agent")


def _options(spec: Map, kind: Any) -> Any:
    raw = _map(spec, "options")
    with located(where(spec, "options")):
        return kind.from_mapping(raw)


def _action(parent: Seq, i: int, item: Any) -> ActionSpec:
    if not isinstance(item, Map):
        raise DefinitionError(f"{where(parent, i)}: an action is a mapping (name, function, "
                              "trigger_conditions)")
    _keys(item, {"name", "function", "trigger_conditions", "type", "config"}, "an action")
    _python(item)
    fn = _import(item, "function", required=True)
    triggers = _list(item, "trigger_conditions", required=True)
    if not triggers or not all(isinstance(t, str) and t.strip() for t in triggers):
        raise DefinitionError(f"{where(item, 'trigger_conditions')}: expected a non-empty list of event "
                              "types")
    types = tuple(EVENT_ALIASES.get(t.strip(), t.strip()) for t in triggers)
    return ActionSpec(_text(item, "name", required=True), fn, types, dict(_map(item, "config")))


def _resources(spec: Map, agent: Agent, prompts: dict[str, Prompt | McpPrompt],
               inherits: bool = False) -> None:
    """The resources of ``spec``; a sub-agent's (``inherits``) may name its callers' too:
    those are checked when the plan is compiled."""
    declared: dict[str, tuple[str, str]] = {}  # name -> (section, where)
    for section in _SECTIONS:
        for i, item in enumerate(_list(spec, section)):
            if isinstance(item, Map) and isinstance(item.get("name"), str):
                if item["name"] in declared:
                    raise DefinitionError(f"{where(item, 'name')}: {item['name']!r} is declared twice "
                                          f"(first in {declared[item['name']][0]} at "
                                          f"{declared[item['name']][1]})")
                declared[item["name"]] = (section, where(spec[section], i))

    def ref(entry: Map, key: str, section: str, what: str) -> str:
        name: str = _text(entry, key, required=True)
        if declared.get(name, ("",))[0] != section and not (inherits and name not in declared):
            mates = [n for n, (s, _) in declared.items() if s == section]
            raise DefinitionError(f"{where(entry, key)}: {what} {name!r} is not declared in {section}"
                                  f"{did_you_mean(name, mates)}")
        return name

    for i, item in enumerate(_list(spec, "mcp_servers")):
        entry = _entry(spec["mcp_servers"], i, item, _MCP_SERVER_KEYS, "an MCP server")
        _python(entry)
        with located(entry.where):
            server = McpServer(
                url=_text(entry, "endpoint") or _text(entry, "url"), command=_text(entry, "command"),
                args=tuple(_list(entry, "args")), env=dict(_map(entry, "env")) or None,
                headers=dict(_map(entry, "headers")), api_key_env=_text(entry, "api_key_env"),
                blob_store=blob_folder(_text(entry, "blob_store")))
        agent.add_resource(_text(entry, "name", required=True), ResourceType.MCP_SERVER, server)
    for i, item in enumerate(_list(spec, "a2a_servers")):
        entry = _entry(spec["a2a_servers"], i, item, {"name", "type", "endpoint", "url", "headers",
                                                       "api_key_env"}, "an A2A server")
        _python(entry)
        with located(entry.where):
            a2a = A2aServer(url=_text(entry, "endpoint") or _text(entry, "url", required=True),
                            headers=dict(_map(entry, "headers")), api_key_env=_text(entry, "api_key_env"))
        agent.add_resource(_text(entry, "name", required=True), ResourceType.A2A_SERVER, a2a)
    for i, item in enumerate(_list(spec, "tools")):
        _tool(spec["tools"], i, item, agent, ref)
    for section, aliases, rtype, what in (
            ("chat_model_connections", CONNECTIONS, ResourceType.CHAT_MODEL_CONNECTION,
             "a chat model connection"),
            ("embedding_model_connections", EMBEDDING_CONNECTIONS,
             ResourceType.EMBEDDING_MODEL_CONNECTION, "an embedding model connection")):
        for i, item in enumerate(_list(spec, section)):
            name, conn = _made(spec[section], i, item, aliases, what)
            agent.add_resource(name, rtype, conn)
    for i, item in enumerate(_list(spec, "chat_model_setups")):
        entry = _entry(spec["chat_model_setups"], i, item, _SETUP_KEYS, "a chat model setup")
        _python(entry)
        tools = _list(entry, "tools")
        for k, t in enumerate(tools):
            known = (declared.get(t, ("",))[0] in _OFFERED_SECTIONS or t == GENERAL_PURPOSE)
            if not known and not (inherits and t not in declared):
                offered = [n for n, (s, _) in declared.items() if s in _OFFERED_SECTIONS]
                raise DefinitionError(f"{where(tools, k)}: tool {t!r} is not declared in tools (or "
                                      f"subagents, vector_stores, memory_sets, skills)"
                                      f"{did_you_mean(str(t), offered)}")
        setup = ChatModelSetup(
            ref(entry, "connection", "chat_model_connections", "connection"),
            model=_text(entry, "model") or "",
            tools=[str(t) for t in tools],
            prompt=_text(entry, "prompt") if "prompt" in entry else None,
            arguments=dict(_map(entry, "arguments")), idempotent=bool(entry.get("idempotent", True)),
            timeout_ms=_int(entry, "timeout_ms"), fallbacks=[str(f) for f in _list(entry, "fallbacks")],
            stream=_bool(entry, "stream"))
        agent.add_resource(_text(entry, "name", required=True), ResourceType.CHAT_MODEL, setup)
    knowledge_resources(spec, agent, ref, prompts)

def _tool(parent: Seq, i: int, item: Any, agent: Agent, ref: Callable[[Map, str, str, str], str]) -> None:
    if isinstance(item, Map) and item.get("type") == "a2a":
        entry = _entry(parent, i, item, {"name", "type", "server", "agent_card_path", "tool_name",
                                          "description", "request_timeout", "max_retries"}, "an A2A tool")
        server = ref(entry, "server", "a2a_servers", "A2A server")
        with located(entry.where):
            tool: Any = A2aTool(server,
                                agent_card_path=_text(entry, "agent_card_path", required=True),
                                name=_text(entry, "tool_name"),  # else the card's name
                                description=_text(entry, "description"),
                                request_timeout=float(entry.get("request_timeout", 60.0)),
                                max_retries=_int(entry, "max_retries", 2) or 0)
    elif isinstance(item, Map) and item.get("type") == "mcp":
        entry = _entry(parent, i, item, {"name", "type", "server", "allowed_tools", "request_timeout",
                                          "max_retries", "descriptions"}, "an MCP tool")
        server = ref(entry, "server", "mcp_servers", "MCP server")
        with located(entry.where):
            tool = McpTool(server,
                                allowed_tools=[str(t) for t in _list(entry, "allowed_tools", required=True)],
                                request_timeout=float(entry.get("request_timeout", 20.0)),
                                max_retries=_int(entry, "max_retries", 2) or 0,
                                descriptions=dict(_map(entry, "descriptions")))
    else:
        entry = _entry(parent, i, item, _TOOL_KEYS, "a tool")
        _python(entry)
        inject = {}
        args = _map(entry, "injected_args")
        for param, binding in args.items():
            if not isinstance(binding, Map):
                raise DefinitionError(f"{where(args, param)}: injected_args.{param}: expected "
                                      "{source, key}")
            _keys(binding, {"source", "key"}, "an injected argument")
            source = _text(binding, "source") or "short_term_memory"
            kinds = {"config": "config", "short_term_memory": "memory", "memory": "memory", "call": "call",
                     "identity": "identity"}
            if source not in kinds:
                raise DefinitionError(f"{where(binding, 'source')}: source {source!r} is not one of config, "
                                      "short_term_memory, call, identity")
            key = "id" if source == "call" and "key" not in binding else _text(binding, "key", required=True)
            inject[param] = f"{kinds[source]}:{key}"
        fn = _import(entry, "function", required=True)
        with located(entry.where):
            tool = FunctionTool(fn,
                                name=_text(entry, "name", required=True),
                                description=_text(entry, "description"),
                                idempotent=bool(entry.get("idempotent", False)),
                                timeout_ms=_int(entry, "timeout_ms"),
                                requires_approval=bool(entry.get("requires_approval", False)),
                                approval_timeout_ms=_int(entry, "approval_timeout_ms"), inject=inject)
    agent.add_resource(_text(entry, "name", required=True), ResourceType.TOOL, tool)


__all__ = ["CONNECTIONS", "EVENT_ALIASES", "DefinitionError", "load_yaml", "load_yaml_text"]
