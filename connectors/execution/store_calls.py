"""Performing EMBEDDING and VECTOR_STORE calls: texts embedded by an EMBEDDING_MODEL
setup's connection, and a vector store's operations with the vectors they need.

A query embeds its text, then searches; an add or update embeds its documents' contents,
then writes them. A document added without an id gets ``CALL_ID:N`` (N its place in the
call), the same on every attempt of the call, so a repeated attempt replaces what an
interrupted one wrote instead of adding it again. Example::

    vectors, usage = embed(plan, "emb", ["a text"])
    vectors, usage = await embed_async(plan, "emb", ["a text"])  # a connection's embed_async
    value = vector_store_call(plan, request, {"op": "query", "text": "a bed", "limit": 3, ...})
    value = await vector_store_call_async(plan, request, kwargs)  # embedding's embed_async
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from eddies.engine import AgentPlan
from eddies.engine.embeddings import EmbeddingModelSetup
from eddies.engine.resources import ResourceType
from eddies.engine.vector_stores import MISSING_OK, OPERATIONS, CollectionNotFoundError, store_value
from eddies.events import DurableCallRequest


def embed(plan: AgentPlan, setup_name: str, texts: list[str]) -> tuple[list[list[float]], dict[str, Any]]:
    """The vectors of ``texts`` by EMBEDDING_MODEL ``setup_name``, and their usage."""
    setup, conn = embedding_connection(plan, setup_name)
    if not texts:
        return [], {}
    vectors, usage = conn.embed(texts, model=setup.model, dimensions=setup.dimensions,
                                **setup.arguments)
    return vectors, dict(usage or {})


async def embed_async(plan: AgentPlan, setup_name: str,
                      texts: list[str]) -> tuple[list[list[float]], dict[str, Any]]:
    """:func:`embed` by the connection's ``embed_async`` (its asynchronous client)."""
    setup, conn = embedding_connection(plan, setup_name)
    if not texts:
        return [], {}
    vectors, usage = await conn.embed_async(texts, model=setup.model, dimensions=setup.dimensions,
                                            **setup.arguments)
    return vectors, dict(usage or {})


def embedding_connection(plan: AgentPlan, setup_name: str) -> tuple[EmbeddingModelSetup, Any]:
    """EMBEDDING_MODEL ``setup_name`` and its connection."""
    setup: EmbeddingModelSetup = plan.resource(setup_name, ResourceType.EMBEDDING_MODEL)
    return setup, plan.resource(setup.connection, ResourceType.EMBEDDING_MODEL_CONNECTION)


def vector_store_call(plan: AgentPlan, req: DurableCallRequest, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Perform a VECTOR_STORE request (its decoded ``kwargs``); its outcome's value. A
    collection the store does not have is a CollectionNotFoundError naming the store
    resource, or, for a call that says ``missing_ok`` (a memory set's), an empty one."""
    store, texts, operation = _operation(plan, req, kwargs)
    vectors, usage = embed(plan, store.embedding_model, texts) if texts else ([], {})
    try:
        return store_value(operation(vectors), usage)
    except CollectionNotFoundError as err:
        return _missing(req, kwargs, err, usage)


async def vector_store_call_async(plan: AgentPlan, req: DurableCallRequest,
                                  kwargs: dict[str, Any]) -> dict[str, Any]:
    """:func:`vector_store_call` on an event loop: its texts embedded by the connection's
    ``embed_async`` (the provider's seconds hold no thread), the store's operation on a
    thread of the loop's pool (a database's milliseconds, or the embedded store's work)."""
    store, texts, operation = _operation(plan, req, kwargs)
    vectors, usage = await embed_async(plan, store.embedding_model, texts) if texts else ([], {})
    try:
        return store_value(await asyncio.to_thread(operation, vectors), usage)
    except CollectionNotFoundError as err:
        return _missing(req, kwargs, err, usage)


def embeds(kwargs: dict[str, Any]) -> bool:
    """Whether a VECTOR_STORE call of these ``kwargs`` embeds texts (asks its embedding
    model's provider) before it reads or writes the store."""
    return kwargs.get("op") in ("query", "add", "update")


def _operation(plan: AgentPlan, req: DurableCallRequest, kwargs: dict[str, Any]
               ) -> tuple[Any, list[str], Callable[[list[list[float]]], Any]]:
    """The store of a VECTOR_STORE request, the texts its operation needs embedded, and
    the operation, given their vectors."""
    store = plan.resource(req.target, ResourceType.VECTOR_STORE)
    op, collection = kwargs.get("op"), kwargs["collection"]
    if op not in OPERATIONS:
        raise ValueError(f"{req.target}: {op!r} is not a vector store operation")
    filters = kwargs.get("filters") or None
    if op == "query":
        return store, [kwargs["text"]], lambda vectors: store.query(collection, vectors[0], kwargs["limit"],
                                                                    filters)
    if op in ("add", "update"):
        docs = [dict(d) for d in kwargs["documents"]]
        for n, doc in enumerate(docs):
            if doc.get("id") is None:
                doc["id"] = f"{req.call_id}:{n}"
            doc.pop("score", None)
        write = store.add if op == "add" else store.update
        return store, [str(d["content"]) for d in docs], lambda vectors: write(collection, docs, vectors)
    if op == "get":
        return store, [], lambda _: store.get(collection, kwargs.get("ids"), filters, kwargs.get("limit"))
    return store, [], lambda _: store.delete(collection, kwargs.get("ids"), filters)


def _missing(req: DurableCallRequest, kwargs: dict[str, Any], err: CollectionNotFoundError,
             usage: dict[str, Any]) -> dict[str, Any]:
    if kwargs.get(MISSING_OK):
        return store_value([] if kwargs.get("op") in ("query", "get") else 0, usage)
    raise CollectionNotFoundError(err.collection, err.known, req.target) from None


__all__ = ["embed", "embed_async", "embedding_connection", "embeds", "vector_store_call",
           "vector_store_call_async"]
