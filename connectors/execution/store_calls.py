"""Performing EMBEDDING and VECTOR_STORE calls: texts embedded by an EMBEDDING_MODEL
setup's connection, and a vector store's operations with the vectors they need.

A query embeds its text, then searches; an add or update embeds its documents' contents,
then writes them. A document added without an id gets ``CALL_ID:N`` (N its place in the
call), the same on every attempt of the call, so a repeated attempt replaces what an
interrupted one wrote instead of adding it again. Example::

    vectors, usage = embed(plan, "emb", ["a text"])
    vectors, usage = await embed_async(plan, "emb", ["a text"])  # a connection's embed_async
    value = vector_store_call(plan, request, {"op": "query", "text": "a bed", "limit": 3, ...})
"""

from __future__ import annotations

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
    store = plan.resource(req.target, ResourceType.VECTOR_STORE)
    op, collection = kwargs.get("op"), kwargs["collection"]
    if op not in OPERATIONS:
        raise ValueError(f"{req.target}: {op!r} is not a vector store operation")
    usage: dict[str, Any] = {}
    try:
        return _performed(plan, req, store, op, collection, kwargs, usage)
    except CollectionNotFoundError as err:
        if kwargs.get(MISSING_OK):
            return store_value([] if op in ("query", "get") else 0, usage)
        raise CollectionNotFoundError(err.collection, err.known, req.target) from None


def _performed(plan: AgentPlan, req: DurableCallRequest, store: Any, op: str, collection: str,
               kwargs: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """What operation ``op`` returned (``usage`` gets its embedding's usage)."""
    if op == "query":
        [vector], spent = embed(plan, store.embedding_model, [kwargs["text"]])
        usage.update(spent)
        found = store.query(collection, vector, kwargs["limit"], kwargs.get("filters") or None)
        return store_value(found, usage)
    if op in ("add", "update"):
        docs = [dict(d) for d in kwargs["documents"]]
        for n, doc in enumerate(docs):
            if doc.get("id") is None:
                doc["id"] = f"{req.call_id}:{n}"
            doc.pop("score", None)
        vectors, spent = embed(plan, store.embedding_model, [str(d["content"]) for d in docs])
        usage.update(spent)
        write = store.add if op == "add" else store.update
        return store_value(write(collection, docs, vectors), usage)
    if op == "get":
        return store_value(store.get(collection, kwargs.get("ids"), kwargs.get("filters") or None,
                                     kwargs.get("limit")), usage)
    return store_value(store.delete(collection, kwargs.get("ids"), kwargs.get("filters") or None), usage)


__all__ = ["embed", "embed_async", "embedding_connection", "vector_store_call"]
