"""``CREATE MODEL`` statements of a SQL agent file: a text_generation model (its chat
model setup, its connection, its fallbacks) or an embedding one. Example::

    CREATE MODEL llm WITH ('provider' = 'openai', 'model' = 'gpt-5-mini', 'api-key' = '${OPENAI_API_KEY}',
                           'fallbacks' = 'backup');
    CREATE MODEL backup WITH ('provider' = 'anthropic', 'model' = 'claude-haiku-4-5',
                              'api-key' = '${ANTHROPIC_API_KEY}');
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.sql_options import With, option_at, read_text
from eddies.connectors.declarative.sql_parse import Name, Option, Statement
from eddies.connectors.declarative.sql_resources import (
    SCRIPTED,
    EmbeddingModel,
    embedding_model,
    implicit_connection,
    model_connection,
)
from eddies.engine import ChatModelSetup, ResourceType

#: Model arguments a CREATE MODEL may write without ``params.``.
MODEL_ARGUMENTS = ("temperature", "max_tokens", "top_p", "seed", "stop")

#: Resolves a statement a statement names: ``ref("CONNECTION", name)``.
Ref = Callable[[str, Name], Any]


@dataclass(frozen=True)
class ChatModel:
    """A text_generation CREATE MODEL."""

    setup: ChatModelSetup  # without the tools: an agent gives those
    connection: str  # the connection resource's name
    statement: Statement
    fallbacks: tuple[Name, ...] = ()  # other CREATE MODELs, asked in turn when it fails


def model(stmt: Statement, ref: Ref, connections: dict[str, Statement],
          objects: dict[tuple[str, str], Any]) -> ChatModel | EmbeddingModel:
    """The model ``stmt`` creates. ``connections``: the file's CREATE CONNECTIONs; a
    connection written in the model itself is added to ``objects`` as one of its own."""
    provider = (With(stmt).text("provider") or "").lower()
    opts = With(stmt, provider)
    opts.pop("provider")
    task = (opts.text("task") or "text_generation").lower()
    if task not in ("text_generation", "embedding"):
        raise DefinitionError(f"{option_at(stmt, 'task')}: task {task!r}: a model's task is "
                              "text_generation or embedding")
    conn_ref = opts.pop("connection")
    if task == "embedding":
        if conn_ref is None and not provider:
            opts.misspelt("provider", "connection")
            raise DefinitionError(f"{stmt.with_at or stmt.at}: CREATE MODEL {stmt.name}: give "
                                  "'provider' (offline, or a provider with a connection)")
        named = None
        if conn_ref is not None:
            _model_connection(conn_ref, ref)
            named = (str(conn_ref.value), connections[str(conn_ref.value)])
        return embedding_model(stmt, opts, provider, named)
    if conn_ref is not None:
        _model_connection(conn_ref, ref)
        connection = str(conn_ref.value)
        types = {k.lower(): o.value for k, o in connections[connection].options.items()}
        provider = provider or str(types.get("type", "")).lower()
    elif not provider:
        opts.misspelt("provider", "connection")
        raise DefinitionError(f"{stmt.with_at or stmt.at}: CREATE MODEL {stmt.name}: give 'provider' "
                              "(and a connection, or its endpoint and api-key)")
    else:  # the connection is written in the model: it becomes one of its own
        connection, implicit = implicit_connection(stmt, opts, provider)
        objects[("CONNECTION", connection)] = (
            ResourceType.CHAT_MODEL_CONNECTION, model_connection(stmt, implicit, provider))
    name = opts.text("model", "model_version") or ""
    if name and provider not in (SCRIPTED, "litellm") and not name.startswith(provider + "/"):
        name = f"{provider}/{name}"  # litellm's provider/model form
    params = {k: o.value for k, o in opts.prefixed("params").items()}
    for key in MODEL_ARGUMENTS:
        option = opts.pop(key)
        if option is not None:
            params[key] = option.value
    fallbacks = fallback_names(opts.pop("fallbacks"), ref)
    setup = ChatModelSetup(connection, model=name, prompt=opts.text("system_prompt"),
                           arguments=params, idempotent=opts.flag("idempotent", True),
                           timeout_ms=opts.whole("timeout_ms"), fallbacks=[f.text for f in fallbacks],
                           stream=opts.flag("stream", False))
    opts.finish("provider, connection, model (or model_version), endpoint, api-key, task, "
                f"system_prompt, params.NAME, {', '.join(MODEL_ARGUMENTS)}, idempotent, timeout_ms, "
                "fallbacks, stream")
    return ChatModel(setup, connection, stmt, fallbacks)


def fallback_names(option: Option | None, ref: Ref) -> tuple[Name, ...]:
    """``'fallbacks' = 'backup, other'``: text_generation models of this file, asked in
    turn when a call of the model fails after its retries."""
    if option is None:
        return ()
    names = tuple(Name(n.strip(), option.at) for n in read_text(option).split(",") if n.strip())
    for name in names:
        if not isinstance(ref("MODEL", name), ChatModel):
            raise DefinitionError(f"{name.at}: fallback {name.text!r} is an embedding model: a "
                                  "chat model falls back on text_generation ones")
    return names


def _model_connection(conn_ref: Option, ref: Ref) -> None:
    kind, _conn = ref("CONNECTION", Name(str(conn_ref.value), conn_ref.at))
    if kind is not ResourceType.CHAT_MODEL_CONNECTION:
        raise DefinitionError(f"{conn_ref.at}: connection {conn_ref.value!r} is not a model provider's")


__all__ = ["MODEL_ARGUMENTS", "ChatModel", "fallback_names", "model"]
