"""The YAML sections of what agents know and remember: prompts (PROMPT resources, their
texts and messages templates), embedding model setups, vector stores, memory sets and
skills. Example::

    prompts:
      - {name: support_prompt, text: "You answer billing questions for {company}."}
      - name: triage
        messages:
          - {role: system, content: "Sort {company}'s tickets."}
          - {role: user, content: "Which team owns this?"}
      - {name: plan, mcp_server: guides, prompt: trip_plan, arguments: {city: "{city}"}}
    embedding_model_setups:
      - {name: emb, connection: emb_conn}
    vector_stores:
      - {name: docs, clazz: embedded, embedding_model: emb, collection: travel}
    memory_sets:
      - {name: facts, vector_store: docs, retention_days: 90, compaction_model: llm, key: "input:user"}
    skills:
      - {name: skills, paths: [./skills], allowed_commands: [python3, cat], timeout_s: 20}

A prompt a react or rag agent, or a chat model setup, names is its PROMPT resource,
formatted with the agent's config when the conversation opens (a placeholder the config
lacks fails the agent's compilation); a text that names no declared prompt is the prompt
itself. A skills entry's paths are folders (relative to the current directory, as every
path in the file) or ``package:NAME/FOLDER``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from eddies.connectors.declarative.located import DefinitionError, Map, located, where
from eddies.connectors.declarative.yaml_entries import (
    entry_at,
    integer,
    made_from_clazz,
    mapping,
    python_only,
    seq,
    text,
)
from eddies.engine import Agent, EmbeddingModelSetup, MemorySetSetup, ResourceType
from eddies.engine.prompts import McpPrompt, Prompt
from eddies.events import MessageRole

#: ``clazz`` aliases of vector stores.
VECTOR_STORES = {"embedded": "eddies.connectors.stores.embedded:EmbeddedVectorStore",
                 "pgvector": "eddies.connectors.stores.pgvector:PgVectorStore"}
_EMBEDDING_SETUP_KEYS = {"name", "clazz", "type", "connection", "model", "dimensions", "arguments",
                         "idempotent", "timeout_ms"}
_MEMORY_SET_KEYS = {"name", "vector_store", "retention_days", "description", "compaction_model",
                    "similarity", "key"}
_SKILLS_KEYS = {"name", "paths", "allowed_commands", "timeout_s", "outside_paths"}
_ROLES = {r.value: r for r in MessageRole}

Ref = Callable[[Map, str, str, str], str]


def prompts(spec: Map) -> dict[str, Prompt | McpPrompt]:
    """The agent's declared prompts, by name."""
    out: dict[str, Prompt | McpPrompt] = {}
    section = seq(spec, "prompts")
    servers = {e.get("name") for e in seq(spec, "mcp_servers") if isinstance(e, Map)}
    for i, item in enumerate(section):
        entry = entry_at(section, i, item, {"name", "text", "messages", "mcp_server", "prompt", "arguments"},
                         "a prompt")
        name = text(entry, "name", required=True)
        if sum(k in entry for k in ("text", "messages", "mcp_server")) != 1:
            raise DefinitionError(f"{entry.where}: prompt {name!r}: give exactly one of text, messages or "
                                  "mcp_server (with prompt)")
        if "mcp_server" in entry:
            server = text(entry, "mcp_server", required=True)
            if server not in servers:
                raise DefinitionError(f"{where(entry, 'mcp_server')}: MCP server {server!r} is not declared "
                                      "in mcp_servers")
            arguments = {str(k): str(v) for k, v in mapping(entry, "arguments").items()}
            out[name] = McpPrompt(server, text(entry, "prompt", required=True), arguments)
            continue
        if "text" in entry:
            with located(where(entry, "text"), f"prompt {name!r}: "):
                out[name] = Prompt.from_text(text(entry, "text", required=True))
            continue
        messages = seq(entry, "messages", required=True)
        made = []
        for k, m in enumerate(messages):
            msg = entry_at(messages, k, m, {"role", "content"}, "a message", named=False)
            role = text(msg, "role", required=True)
            if role not in _ROLES:
                raise DefinitionError(f"{where(msg, 'role')}: role {role!r} is not one of "
                                      f"{', '.join(_ROLES)}")
            made.append({"role": role, "content": text(msg, "content", required=True)})
        with located(where(entry, "messages"), f"prompt {name!r}: "):
            out[name] = Prompt.from_messages(made)
    return out


def prompt_text(spec: Map, key: str, declared: dict[str, Prompt | McpPrompt]) -> str:
    """A prompt given as its text (a reflection agent's): a declared prompt's system
    messages, else the text itself."""
    value: str = text(spec, key, required=True)
    prompt = declared.get(value)
    if prompt is None:
        return value
    if isinstance(prompt, McpPrompt):
        raise DefinitionError(f"{where(spec, key)}: {key}: a reflection agent's prompt is a text or a "
                              f"prompt with text or messages, not an MCP prompt ({value!r})")
    return prompt.system_text


def knowledge_resources(spec: Map, agent: Agent, ref: Ref,
                        declared_prompts: dict[str, Prompt | McpPrompt]) -> None:
    """The agent's prompts, embedding model setups, vector stores, memory sets and skills
    as its resources (``ref`` checks a name another section declares)."""
    for name, prompt in declared_prompts.items():
        agent.add_resource(name, ResourceType.PROMPT, prompt)
    for i, item in enumerate(seq(spec, "embedding_model_setups")):
        entry = entry_at(spec["embedding_model_setups"], i, item, _EMBEDDING_SETUP_KEYS,
                         "an embedding model setup")
        python_only(entry)
        with located(entry.where):
            embedding = EmbeddingModelSetup(
                ref(entry, "connection", "embedding_model_connections", "connection"),
                model=text(entry, "model"), dimensions=integer(entry, "dimensions"),
                arguments=dict(mapping(entry, "arguments")),
                idempotent=bool(entry.get("idempotent", True)), timeout_ms=integer(entry, "timeout_ms"))
        agent.add_resource(text(entry, "name", required=True), ResourceType.EMBEDDING_MODEL, embedding)
    for i, item in enumerate(seq(spec, "vector_stores")):
        if isinstance(item, Map) and "embedding_model" in item:
            ref(item, "embedding_model", "embedding_model_setups", "embedding model")
        name, store = made_from_clazz(spec["vector_stores"], i, item, VECTOR_STORES, "a vector store")
        agent.add_resource(name, ResourceType.VECTOR_STORE, store)
    for i, item in enumerate(seq(spec, "memory_sets")):
        entry = entry_at(spec["memory_sets"], i, item, _MEMORY_SET_KEYS, "a memory set")
        days = entry.get("retention_days")
        if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or days <= 0):
            raise DefinitionError(f"{where(entry, 'retention_days')}: retention_days: expected a positive "
                                  f"number, got {days!r}")
        model = (ref(entry, "compaction_model", "chat_model_setups", "chat model")
                 if "compaction_model" in entry else None)
        with located(entry.where):
            memory = MemorySetSetup(ref(entry, "vector_store", "vector_stores", "vector store"),
                                    retention=None if days is None else timedelta(days=days),
                                    description=text(entry, "description") or "",
                                    compaction_model=model, similarity=float(entry.get("similarity", 0.75)),
                                    key=text(entry, "key") or "session")
        agent.add_resource(text(entry, "name", required=True), ResourceType.MEMORY_SET, memory)

    for i, item in enumerate(seq(spec, "skills")):
        entry = entry_at(spec["skills"], i, item, _SKILLS_KEYS, "skills")
        paths = seq(entry, "paths", required=True)
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise DefinitionError(f"{where(entry, 'paths')}: paths: expected a non-empty list of "
                                  "folders (or package:NAME/FOLDER)")
        commands = seq(entry, "allowed_commands")
        if not all(isinstance(c, str) and c.strip() for c in commands):
            raise DefinitionError(f"{where(entry, 'allowed_commands')}: allowed_commands: expected "
                                  "a list of command names")
        timeout = entry.get("timeout_s", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise DefinitionError(f"{where(entry, 'timeout_s')}: timeout_s: expected a positive "
                                  f"number of seconds, got {timeout!r}")
        from eddies.connectors.skills.catalog import SkillError
        from eddies.connectors.skills.toolset import Skills

        try:
            skills = Skills(paths, allowed_commands=commands, timeout_s=float(timeout),
                            outside_paths=bool(entry.get("outside_paths", False)))
        except (SkillError, ImportError) as err:
            raise DefinitionError(f"{entry.where}: {err}") from None
        agent.add_resource(text(entry, "name", required=True), ResourceType.SKILLS, skills)


__all__ = ["VECTOR_STORES", "knowledge_resources", "prompt_text", "prompts"]
