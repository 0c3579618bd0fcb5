"""Vector stores: documents with their vectors, searched by the nearness of a text. Every
operation an action asks of a store is a durable call (CallKind VECTOR_STORE): a query's
documents are journaled, so a replay returns the documents the run got, even after the
store changed, without a call to the store or to the embedding model; a write is made
once, however often a crash interrupts it.

A VECTOR_STORE resource is a connector object (the embedded store, a server's client)
that names the EMBEDDING_MODEL resource which embeds its texts and its default
collection; the engine only reads those two names. An action sees the store as a handle.
Example (in an action)::

    agent.add_resource("docs", ResourceType.VECTOR_STORE,
                       EmbeddedVectorStore(embedding_model="emb", collection="travel"))

    docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
    docs.add([Document("Hostels in Lisbon", metadata={"city": "Lisbon"})])
    hits = docs.query("a cheap bed in Lisbon", limit=3, filters={"city": "Lisbon"})
    hits[0].content, hits[0].score
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from eddies.events import CallKind, Document

from .calls import CallAwaitable, CallSite, CallSpec
from .resources import ToolSpec


def document_of(value: Any) -> Document:
    """A Document from a Document, a text, or its JSON form (``{"content", "metadata",
    "id", "score"}``)."""
    if isinstance(value, Document):
        return value
    if isinstance(value, str):
        return Document(value)
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return Document(value["content"], dict(value.get("metadata") or {}), value.get("id"),
                        value.get("score"))
    raise TypeError(f"a document is a Document, a str or a {{'content': ...}} mapping, got "
                    f"{value!r:.80}")


def document_dict(doc: Document) -> dict[str, Any]:
    """The JSON form of ``doc`` (as journaled)."""
    return {"content": doc.content, "metadata": dict(doc.metadata), "id": doc.id, "score": doc.score}


class VectorStore(Protocol):
    """What the engine reads of a VECTOR_STORE resource (connectors implement the rest:
    see ``eddies.connectors.stores``)."""

    #: The EMBEDDING_MODEL resource that embeds its documents and queries.
    embedding_model: str
    #: The collection used when an operation names none.
    collection: str


#: The operations of a VECTOR_STORE call (its arguments' ``op``).
OPERATIONS = ("query", "add", "get", "update", "delete")


class VectorStoreHandle:
    """A VECTOR_STORE resource seen from an action: each operation is a durable call.

    Example (in an ``async def`` action)::

        docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
        hits = await docs.query_async("a cheap bed", limit=5, filters={"city": {"$in": ["Lisbon"]}})
    """

    __slots__ = ("_site", "name", "store")

    def __init__(self, site: CallSite, name: str, store: VectorStore) -> None:
        self._site = site
        self.name = name
        self.store = store

    def query(self, text: str, *, limit: int = 5, filters: Mapping[str, Any] | None = None,
              collection: str | None = None) -> list[Document]:
        """The ``limit`` documents nearest to ``text`` that match ``filters`` (see
        :func:`eddies.connectors.stores.filters.matches`), nearest first."""
        spec = self._query(text, limit, filters, collection)
        return [document_of(d) for d in result(self._site.call_now(spec))]

    async def query_async(self, text: str, *, limit: int = 5,
                          filters: Mapping[str, Any] | None = None,
                          collection: str | None = None) -> list[Document]:
        """Awaitable form of :meth:`query`, for ``async def`` actions."""
        spec = self._query(text, limit, filters, collection)
        return [document_of(d) for d in result(await CallAwaitable(self._site, [spec], batch=False))]

    def add(self, documents: Sequence[Document | str | Mapping[str, Any]], *,
            collection: str | None = None) -> list[str]:
        """Add (or replace, by id) ``documents``; their ids. A document without an id is
        given one made from this call's id, so a repeated attempt writes it once."""
        docs = [document_dict(document_of(d)) for d in documents]
        return list(result(self._site.call_now(self._spec("add", collection, documents=docs))))

    def get(self, ids: Sequence[str] | None = None, *, filters: Mapping[str, Any] | None = None,
            limit: int | None = None, collection: str | None = None) -> list[Document]:
        """The documents of ``ids`` (those that exist), or those matching ``filters``."""
        spec = self._spec("get", collection, ids=None if ids is None else list(ids),
                          filters=dict(filters or {}), limit=limit)
        return [document_of(d) for d in result(self._site.call_now(spec))]

    def update(self, documents: Sequence[Document | Mapping[str, Any]], *,
               collection: str | None = None) -> int:
        """Replace the content and metadata of documents that exist (by id); how many."""
        docs = [document_of(d) for d in documents]
        if any(d.id is None for d in docs):
            raise ValueError(f"{self.name}.update: every document needs its id")
        spec = self._spec("update", collection, documents=[document_dict(d) for d in docs])
        return int(result(self._site.call_now(spec)))

    def delete(self, ids: Sequence[str] | None = None, *, filters: Mapping[str, Any] | None = None,
               collection: str | None = None) -> int:
        """Delete the documents of ``ids``, or those matching ``filters``; how many."""
        if ids is None and not filters:
            raise ValueError(f"{self.name}.delete: name the ids or filters of what to delete")
        spec = self._spec("delete", collection, ids=None if ids is None else list(ids),
                          filters=dict(filters or {}))
        return int(result(self._site.call_now(spec)))

    def _query(self, text: str, limit: int, filters: Mapping[str, Any] | None,
               collection: str | None) -> CallSpec:
        return query_spec(self.name, self.store, text, limit, filters, collection)

    def _spec(self, op: str, collection: str | None, **arguments: Any) -> CallSpec:
        return store_spec(self.name, self.store, op, collection, **arguments)


def store_spec(name: str, store: VectorStore, op: str, collection: str | None,
               **arguments: Any) -> CallSpec:
    """The durable call of operation ``op`` on VECTOR_STORE ``name``."""
    # Reads and writes by id change nothing when done twice; an add without ids gets ids
    # from the call's own (the executor's), the same on every attempt.
    return CallSpec(CallKind.VECTOR_STORE, name, (),
                    {"op": op, "collection": collection or store.collection, **arguments},
                    idempotent=True)


def query_spec(name: str, store: VectorStore, text: str, limit: int,
               filters: Mapping[str, Any] | None = None, collection: str | None = None) -> CallSpec:
    """The durable call of a query of VECTOR_STORE ``name`` (a TypeError or ValueError
    names a wrong argument)."""
    if not isinstance(text, str):
        raise TypeError(f"{name}.query: the text must be a str, got {type(text).__name__}")
    if type(limit) is not int or limit <= 0:
        raise ValueError(f"{name}.query: limit must be a positive int, got {limit!r}")
    return store_spec(name, store, "query", collection, text=text, limit=limit,
                      filters=dict(filters or {}))


#: How many documents a model may ask a store for in one search.
MOST_RESULTS_FOR_A_MODEL = 20


def search_tool_spec(name: str, store: VectorStore) -> ToolSpec:
    """How a model is offered VECTOR_STORE ``name`` (named in its setup's ``tools``): a
    search taking a ``query`` and, optionally, how many results."""
    description = getattr(store, "description", None) or (
        f"Search the {name} documents: the passages nearest to a query, nearest first, with "
        "their metadata.")
    return ToolSpec(name, description, {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."},
                       "max_results": {"type": "integer", "minimum": 1,
                                       "maximum": MOST_RESULTS_FOR_A_MODEL,
                                       "description": "How many passages (default 5)."}},
        "required": ["query"], "additionalProperties": False})


def store_value(result: Any, usage: Mapping[str, Any]) -> dict[str, Any]:
    """A VECTOR_STORE call's outcome as journaled: what the operation returned, and the
    usage of the embedding its texts took, where budgets and metrics find a model reply's
    (``extra_args["usage"]``)."""
    return {"result": result, "extra_args": {"usage": dict(usage)}}


def result(value: Any) -> Any:
    """What a VECTOR_STORE call's outcome (:func:`store_value`) says the operation returned."""
    return value["result"]


__all__ = ["MOST_RESULTS_FOR_A_MODEL", "OPERATIONS", "Document", "VectorStore", "VectorStoreHandle",
           "document_dict", "document_of", "query_spec", "result", "search_tool_spec", "store_spec",
           "store_value"]
