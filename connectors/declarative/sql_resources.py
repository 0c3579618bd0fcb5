"""What single SQL statements make, apart from agents: connections (model providers, MCP
and A2A servers, HTTP agents, vector stores), functions, prompts, embedding models, and
the tools that stand for a vector store or for skills. Each reads its statement's
options and refuses the ones it does not know. Eddies' own statements and option values,
beside Confluent's (which has no prompts, skills or vector stores as such)::

    CREATE PROMPT support_prompt AS 'You answer billing questions for {company}.';
    CREATE PROMPT plan USING CONNECTION guides WITH ('prompt' = 'trip_plan', 'arguments.city' = '{city}');
    CREATE PROMPT triage WITH ('messages' = '[{"role": "system", "content": "Sort tickets."},
                                              {"role": "user", "content": "{input}"}]');
    CREATE MODEL emb WITH ('provider' = 'offline', 'task' = 'embedding');
    CREATE CONNECTION kb WITH ('type' = 'pgvector', 'dsn' = '${KB_DSN}');
    CREATE TOOL docs USING CONNECTION kb
      WITH ('type' = 'vector_search', 'embedding_model' = 'emb', 'collection' = 'travel');
    CREATE TOOL skills WITH ('type' = 'skills', 'paths' = '["./skills"]',
                             'allowed_commands' = 'python3, cat', 'timeout_s' = 20);
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from eddies.connectors.declarative.located import DefinitionError, located
from eddies.connectors.declarative.references import env_name, import_target, read_env
from eddies.connectors.declarative.sql_options import With, json_list, option_at, read_text
from eddies.connectors.declarative.sql_parse import Name, Statement
from eddies.connectors.declarative.sql_subagents import HttpEndpoint
from eddies.connectors.models.provider_limits import LIMIT_KEYS
from eddies.engine import (
    A2aServer,
    A2aTool,
    EmbeddingModelSetup,
    FunctionTool,
    McpServer,
    McpTool,
    MemorySetSetup,
    ResourceType,
)
from eddies.engine.prompts import McpPrompt, Prompt

#: The connection type of the offline model (tests, the demo); mcp_server, a2a and http are
#: servers' types, embedded and pgvector vector stores', and any other a litellm provider.
SCRIPTED = "scripted"
#: The provider of the offline embedding model (WordLlama, in eddies[embeddings]).
OFFLINE = "offline"
VECTOR_STORE_TYPES = {"embedded": "eddies.connectors.stores.embedded:EmbeddedVectorStore",
                      "pgvector": "eddies.connectors.stores.pgvector:PgVectorStore"}
#: The options a connection written inside its model gives that connection.
CONNECTION_OPTIONS = ("endpoint", "api_key", "timeout", "responder", "input_cost_per_token",
                      "output_cost_per_token", "media", *LIMIT_KEYS)
_PASSWORD = re.compile(r"://[^/@:]*:[^/@]+@|password\s*=", re.I)


@dataclass(frozen=True)
class VectorStoreConnection:
    """``CREATE CONNECTION c WITH ('type' = 'pgvector' | 'embedded', ...)``: how to make the
    store a vector_search tool names (each tool its own, with its collection)."""

    kind: str
    options: dict[str, Any]


@dataclass(frozen=True)
class EmbeddingModel:
    """``CREATE MODEL m WITH ('task' = 'embedding', ...)``: its setup, and the connection
    resource (name, object) it needs."""

    setup: EmbeddingModelSetup
    connection: str
    connection_obj: Any


@dataclass(frozen=True)
class Tool:
    """What a TOOL statement makes, and what else of the file it needs."""

    obj: Any
    rtype: ResourceType  # TOOL, VECTOR_STORE, SKILLS or MEMORY_SET
    server: str | None = None  # the MCP or A2A server's connection it needs
    model: str | None = None  # the embedding model a vector store needs
    store: tuple[str, Any] | None = None  # a memory set's own vector store (name, store)
    chat_model: str | None = None  # the MODEL of a memory set's compaction model


def connection(stmt: Statement) -> tuple[ResourceType | None, Any]:
    """The resource a CONNECTION statement makes (its type, the object); a vector store's
    has no type of its own: its tools make the stores."""
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
                                 headers=headers, api_key_env=key_env(opts))
            opts.finish("type, endpoint, command, args, env.NAME, headers.NAME, api-key, transport-type")
            return ResourceType.MCP_SERVER, obj
        if kind == "a2a":
            obj = A2aServer(url=opts.text("endpoint", required=True) or "", headers=headers,
                            api_key_env=key_env(opts))
            opts.finish("type, endpoint, headers.NAME, api-key")
            return ResourceType.A2A_SERVER, obj
        if kind == "http":  # an HTTP sub-agent's endpoint (CREATE AGENT ... USING CONNECTION)
            obj = HttpEndpoint(opts.text("endpoint", required=True) or "", headers, key_env(opts))
            opts.finish("type, endpoint, headers.NAME, api-key")
            return ResourceType.AGENT, obj
        if kind in VECTOR_STORE_TYPES:
            return None, _store_connection(stmt, opts, kind)
    return ResourceType.CHAT_MODEL_CONNECTION, model_connection(stmt, opts, kind)


def _store_connection(stmt: Statement, opts: With, kind: str) -> VectorStoreConnection:
    if kind == "pgvector":
        raw = next((o for k, o in stmt.options.items()
                    if k.lower().replace("-", "_") in ("dsn", "endpoint")), None)
        dsn = opts.text("dsn", "endpoint", required=True) or ""
        if raw is not None and env_name(raw.value) is None and _PASSWORD.search(dsn):
            raise DefinitionError(f"{raw.at}: {raw.key}: a DSN with a password is a secret: write "
                                  "'${NAME}', the name of the environment variable holding it")
        found: dict[str, Any] = {"dsn": dsn}
        prefix = opts.text("table_prefix")
        if prefix is not None:
            found["table_prefix"] = prefix
        opts.finish("type, dsn (or endpoint), table_prefix")
    else:
        path = opts.text("path")
        found = {} if path is None else {"path": path}
        opts.finish("type, path")
    return VectorStoreConnection(kind, found)


def key_env(opts: With) -> str | None:
    """The NAME of the api-key's variable: the executor reads it when it connects."""
    written = opts.text("api_key", secret=True)
    return None if written is None else env_name(written)


def model_connection(stmt: Statement, opts: With, provider: str) -> Any:
    """A chat model connection: the offline scripted model, or litellm for any provider."""
    if provider == SCRIPTED:
        from eddies.connectors.models.scripted import ScriptedChatModel

        responder = opts.pop("responder")
        opts.finish("type, responder")
        if responder is None:
            return ScriptedChatModel()
        return ScriptedChatModel(import_target(str(responder.value), responder.at, "responder"))
    from eddies.connectors.models.litellm import LiteLLMChatModel

    key = opts.text("api_key", secret=True)
    prices = [opts.number(k, -1.0) for k in ("input_cost_per_token", "output_cost_per_token")]
    limits = {k: opts.number(k, 0.0) for k in LIMIT_KEYS}
    for k, v in limits.items():
        if v < 0 or (k == "calls_at_once" and not v.is_integer()):
            raise DefinitionError(f"{stmt.with_at or stmt.at}: {k}: expected a positive "
                                  f"{'whole ' if k == 'calls_at_once' else ''}number, got {v:g}")
    conn = LiteLLMChatModel(api_base=opts.text("endpoint"), timeout=opts.number("timeout", 120.0),
                            api_key=None if key is None else read_env(key, stmt.at),
                            input_cost_per_token=prices[0] if prices[0] >= 0 else None,
                            output_cost_per_token=prices[1] if prices[1] >= 0 else None,
                            media=opts.flag("media", True),
                            limits={k: v for k, v in limits.items() if v > 0} or None)
    opts.finish("type, endpoint, api-key, timeout, input_cost_per_token, output_cost_per_token, "
                f"media, {', '.join(LIMIT_KEYS)}")
    return conn


def implicit_connection(stmt: Statement, opts: With, provider: str) -> tuple[str, With]:
    """A model that writes its connection's options in itself (no ``connection``): the
    connection's name (``MODEL-connection``) and its options, taken out of ``opts``."""
    name = f"{stmt.name}-connection"
    implicit = With(Statement("CONNECTION", name, stmt.at, stmt.start, options={
        k: o for k, o in stmt.options.items()
        if k.lower().replace("-", "_").removeprefix(provider + ".") in CONNECTION_OPTIONS}))
    for key in implicit.left:
        opts.pop(key)
    return name, implicit


def embedding_connection(stmt: Statement, opts: With, provider: str) -> Any:
    """An embedding model connection: the offline model, or litellm's embeddings."""
    if provider == OFFLINE:
        from eddies.connectors.models.embeddings import OfflineEmbeddingModel

        opts.finish("type")
        return OfflineEmbeddingModel()
    from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel

    key = opts.text("api_key", secret=True)
    price = opts.number("input_cost_per_token", -1.0)
    conn = LiteLLMEmbeddingModel(api_base=opts.text("endpoint"), timeout=opts.number("timeout", 60.0),
                                 api_key=None if key is None else read_env(key, stmt.at),
                                 input_cost_per_token=price if price >= 0 else None)
    opts.finish("type, endpoint, api-key, timeout, input_cost_per_token")
    return conn


def function(stmt: Statement) -> Any:
    """``CREATE FUNCTION f AS 'module.function' LANGUAGE PYTHON``: the function."""
    if stmt.target is None:
        raise DefinitionError(f"{stmt.at}: CREATE FUNCTION {stmt.name}: AS 'module.function' is required")
    if stmt.language is not None and stmt.language.text.upper() != "PYTHON":
        raise DefinitionError(f"{stmt.language.at}: language {stmt.language.text!r}: only PYTHON "
                              "functions run here")
    fn = import_target(stmt.target.text, stmt.target.at, "AS", dotted=True)
    if not callable(fn):
        raise DefinitionError(f"{stmt.target.at}: {stmt.target.text!r} is not a function")
    return fn


def prompt(stmt: Statement) -> Prompt:
    """``CREATE PROMPT p AS 'text'`` (a system message) or ``WITH ('messages' = '[...]')``
    (a JSON list of ``{"role", "content"}``), each content a ``{name}`` template."""
    opts = With(stmt)
    messages = opts.pop("messages")
    opts.finish("messages")
    if (stmt.target is None) == (messages is None):
        raise DefinitionError(f"{stmt.at}: CREATE PROMPT {stmt.name}: give its text (AS '...') or its "
                              "messages (WITH ('messages' = '[...]')), one of them")
    if stmt.target is not None:
        with located(stmt.target.at, f"prompt {stmt.name!r}: "):
            return Prompt.from_text(stmt.target.text)
    assert messages is not None
    try:
        listed = json.loads(str(messages.value))
    except ValueError as err:
        raise DefinitionError(f"{messages.at}: messages: not JSON: {err}") from None
    if not isinstance(listed, list):
        raise DefinitionError(f"{messages.at}: messages: expected a JSON list of "
                              '{"role": ..., "content": ...}')
    with located(messages.at, f"prompt {stmt.name!r}: "):
        return Prompt.from_messages(listed)


def mcp_prompt(stmt: Statement, server: str) -> McpPrompt:
    """``CREATE PROMPT p USING CONNECTION c WITH ('prompt' = 'NAME', 'arguments.ARG' = ...)``:
    prompt NAME of MCP server c (an argument may be a ``{placeholder}``)."""
    opts = With(stmt)
    name = opts.text("prompt", required=True) or ""
    arguments = {k: read_text(o) for k, o in opts.prefixed("arguments").items()}
    opts.finish("prompt, arguments.NAME")
    if stmt.target is not None:
        raise DefinitionError(f"{stmt.target.at}: a prompt USING CONNECTION is the server's: it takes no AS")
    return McpPrompt(server, name, arguments)


def embedding_model(stmt: Statement, opts: With, provider: str, conn_ref: tuple[str, Statement] | None
                    ) -> EmbeddingModel:
    """``CREATE MODEL m WITH ('task' = 'embedding', ...)`` (``opts`` read under its
    provider's prefix; ``conn_ref``: the CONNECTION it names, if any)."""
    if conn_ref is not None:
        name, conn_stmt = conn_ref
        conn_opts = With(conn_stmt)
        kind = (conn_opts.text("type", required=True) or "").lower()
        connection_name = f"{name}-embeddings"  # the chat connection of that name is another object
        conn = embedding_connection(conn_stmt, conn_opts, kind)
    else:
        connection_name, implicit = implicit_connection(stmt, opts, provider)
        conn = embedding_connection(stmt, implicit, provider)
    model = opts.text("model", "model_version")
    if model and provider not in (OFFLINE, "litellm") and not model.startswith(provider + "/"):
        model = f"{provider}/{model}"
    params = {k: o.value for k, o in opts.prefixed("params").items()}
    with located(stmt.at):
        setup = EmbeddingModelSetup(connection_name, model=model, dimensions=opts.whole("dimensions"),
                                    arguments=params, idempotent=opts.flag("idempotent", True),
                                    timeout_ms=opts.whole("timeout_ms"))
    opts.finish("provider, task, connection, model (or model_version), endpoint, api-key, dimensions, "
                "params.NAME, idempotent, timeout_ms")
    return EmbeddingModel(setup, connection_name, conn)


def vector_store(stmt: Statement, opts: With, store: VectorStoreConnection, embedding: str) -> Any:
    """``CREATE TOOL t USING CONNECTION c WITH ('type' = 'vector_search', ...)``: the store
    (a VECTOR_STORE resource, offered to a model as a search)."""
    target = import_target(VECTOR_STORE_TYPES[store.kind], stmt.at, "type")
    collection = opts.text("collection") or "default"
    description = opts.text("description")
    opts.finish("type, embedding_model, collection, description")
    with located(stmt.at):
        made = target(embedding_model=embedding, collection=collection, **store.options)
    if description is not None:
        made.description = description  # what the model is told of its search
    return made


def memory_set(stmt: Statement, opts: With, store: VectorStoreConnection, embedding: str) -> Tool:
    """``CREATE TOOL m USING CONNECTION c WITH ('type' = 'memory_set', ...)``: a MEMORY_SET
    (offered to a model to remember and recall) kept in a store of its own, ``m-store``."""
    target = import_target(VECTOR_STORE_TYPES[store.kind], stmt.at, "type")
    retention = None
    if "retention_days" in opts.left:
        days = opts.number("retention_days", 0.0)
        if days <= 0:
            raise DefinitionError(f"{option_at(stmt, 'retention_days')}: retention_days: expected a "
                                  f"positive number, got {days!r}")
        retention = timedelta(days=days)
    compaction = opts.text("compaction_model")
    key = opts.text("key") or "session"
    similarity = opts.number("similarity", 0.75)
    description = opts.text("description") or ""
    opts.finish("type, embedding_model, key, retention_days, compaction_model, similarity, description")
    name = f"{stmt.name}-store"
    with located(stmt.at):  # a memory set keeps its items in a collection of its own
        made = target(embedding_model=embedding, collection="default", **store.options)
    # The compaction model gets a setup of its own (offering no tools), apart from the
    # agent's model even when both are the same MODEL.
    with located(option_at(stmt, "key") if key != "session" else stmt.at):
        setup = MemorySetSetup(name, retention=retention, description=description,
                               compaction_model=None if compaction is None else f"{stmt.name}-compaction",
                               similarity=similarity, key=key)
    return Tool(setup, ResourceType.MEMORY_SET, model=embedding, store=(name, made), chat_model=compaction)


def skills(stmt: Statement, opts: With) -> Any:
    """``CREATE TOOL t WITH ('type' = 'skills', 'paths' = '[...]', ...)``: a SKILLS resource."""
    from eddies.connectors.skills.catalog import SkillError
    from eddies.connectors.skills.toolset import Skills

    paths = opts.pop("paths")
    if paths is None:
        opts.misspelt("paths")
        raise DefinitionError(f"{stmt.with_at or stmt.at}: CREATE TOOL {stmt.name}: 'paths' (a JSON list of "
                              "skill folders) is required")
    allowed = [c.strip() for c in (opts.text("allowed_commands") or "").split(",") if c.strip()]
    timeout = opts.number("timeout_s", 30.0)
    outside = opts.flag("outside_paths", False)
    opts.finish("type, paths, allowed_commands, timeout_s, outside_paths")
    try:
        with located(stmt.at):
            return Skills(json_list(paths), allowed_commands=allowed, timeout_s=timeout,
                          outside_paths=outside)
    except (SkillError, ImportError) as err:
        raise DefinitionError(f"{stmt.at}: {err}") from None


def tool(stmt: Statement, ref: Callable[[str, Name], Any]) -> Tool:
    """The tool, its resource type, and what else of the file it needs."""
    opts = With(stmt)
    kind = (opts.text("type", required=True) or "").lower()
    uses_fn = stmt.using.get("FUNCTION")
    uses_conn = stmt.using.get("CONNECTION")
    if kind == "skills":
        if uses_fn or uses_conn:
            raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: a skills tool uses no function "
                                  "or connection: its WITH ('paths' = ...) says where the skills are")
        return Tool(skills(stmt, opts), ResourceType.SKILLS)
    if kind in ("vector_search", "memory_set"):
        if not uses_conn:
            raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: a {kind} tool is USING "
                                  "CONNECTION c (of type pgvector or embedded)")
        _none, store = ref("CONNECTION", uses_conn[0])
        if not isinstance(store, VectorStoreConnection):
            raise DefinitionError(f"{uses_conn[0].at}: connection {uses_conn[0].text!r} is not a vector "
                                  "store's (type pgvector or embedded)")
        emb = opts.pop("embedding_model")
        if emb is None:
            opts.misspelt("embedding_model")
            raise DefinitionError(f"{stmt.with_at or stmt.at}: CREATE TOOL {stmt.name}: "
                                  "'embedding_model' (a model of task embedding) is required")
        model = ref("MODEL", Name(str(emb.value), emb.at))
        if not isinstance(model, EmbeddingModel):
            raise DefinitionError(f"{emb.at}: model {emb.value!r} is not an embedding model "
                                  "('task' = 'embedding')")
        if kind == "memory_set":
            return memory_set(stmt, opts, store, str(emb.value))
        return Tool(vector_store(stmt, opts, store, str(emb.value)), ResourceType.VECTOR_STORE,
                     model=str(emb.value))
    if kind == "function":
        if not uses_fn:
            raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: a function tool is USING "
                                  "FUNCTION f")
        fn = ref("FUNCTION", uses_fn[0])
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
        return Tool(tool, ResourceType.TOOL)
    if kind not in ("mcp", "a2a"):
        raise DefinitionError(f"{option_at(stmt, 'type')}: type {kind!r} is not one of function, mcp, "
                              "a2a, vector_search, memory_set, skills")
    if not uses_conn:
        raise DefinitionError(f"{stmt.at}: CREATE TOOL {stmt.name}: an {kind} tool is USING CONNECTION c")
    server_kind, _server = ref("CONNECTION", uses_conn[0])
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
    return Tool(tool, ResourceType.TOOL, server=server)



__all__ = [
    "OFFLINE",
    "SCRIPTED",
    "EmbeddingModel",
    "Tool",
    "VectorStoreConnection",
    "connection",
    "embedding_connection",
    "embedding_model",
    "function",
    "key_env",
    "mcp_prompt",
    "model_connection",
    "prompt",
    "skills",
    "tool",
    "vector_store",
]
