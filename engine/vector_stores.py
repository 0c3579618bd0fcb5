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

Where a list of ids or documents goes, one alone does too (``docs.delete("doc3")``,
``docs.add(Document(...))``): a text is one id or one document, never its characters. A
query, get, update or delete of a collection the store does not have fails with
:class:`CollectionNotFoundError` naming it (a misspelt collection is an error, not an
empty answer); an add to a new collection makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, TypeAlias

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


#: What an operation takes as documents: one (a Document, a text, its JSON form) or a list.
Documents: TypeAlias = Document | str | Mapping[str, Any] | Iterable[Document | str | Mapping[str, Any]]
#: What an operation takes as ids: one id or a list of them.
Ids: TypeAlias = str | Iterable[str]


def documents_of(documents: Documents, where: str = "documents") -> list[Document]:
    """``documents`` as a list: one document (a Document, a text, its JSON form) is a list
    of one, never a list of its characters or keys. Example:
    ``documents_of("Hostels in Lisbon") == [Document("Hostels in Lisbon")]``."""
    if isinstance(documents, Document | str | Mapping):
        return [document_of(documents)]
    if not isinstance(documents, Iterable):
        raise TypeError(f"{where}: expected a document or a list of them, got {documents!r:.80}")
    return [document_of(d) for d in documents]


def ids_of(ids: Ids | None, where: str = "ids") -> list[str] | None:
    """``ids`` as a list (None stays None): one id (a str) is a list of one, never a list
    of its characters; a set is sorted, so that the call journaled is the same in every
    process. Example: ``ids_of("doc3") == ["doc3"]``."""
    if ids is None:
        return None
    if isinstance(ids, str):
        return [ids]
    if not isinstance(ids, Iterable) or isinstance(ids, Mapping | bytes):
        raise TypeError(f"{where}: expected an id (a str) or a list of them, got {ids!r:.80}")
    found = list(ids)
    wrong = [i for i in found if not isinstance(i, str)]
    if wrong:
        raise TypeError(f"{where}: an id is a str, got {wrong[0]!r:.60}")
    return sorted(found) if isinstance(ids, AbstractSet) else found


def filters_of(filters: Mapping[str, Any] | None, where: str = "filters") -> dict[str, Any]:
    """``filters`` as a dict ({} for None); a ValueError, as the stores' own check says
    it, for filters that are not a mapping (a text, say), before any call is made."""
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {filters!r:.60}")
    return dict(filters)


class CollectionNotFoundError(LookupError):
    """An operation named a collection its vector store does not have. A store raises it
    for a query, get, update or delete of such a collection (an add makes it); an action
    sees it as a DurableCallError whose ``error_type`` is ``"CollectionNotFoundError"``.
    Example::

        try:
            docs.query("a cheap bed", collection="travl")
        except DurableCallError as err:
            assert err.error_type == "CollectionNotFoundError"   # names 'travl'
    """

    #: At most this many of the store's collections are named in the message.
    SHOWN = 10

    def __init__(self, collection: str, known: Iterable[str] | None = None,
                 store: str | None = None) -> None:
        self.collection = collection
        self.known = None if known is None else sorted(known)
        self.store = store
        where = f"vector store {store!r}" if store else "this vector store"
        if self.known is None:
            has = ""
        elif not self.known:
            has = " (it has no collections)"
        else:
            shown = ", ".join(repr(k) for k in self.known[:self.SHOWN])
            has = f" (its collections: {shown}{', ...' if len(self.known) > self.SHOWN else ''})"
        super().__init__(f"collection {collection!r} does not exist in {where}{has}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Made again from its parts, not its message (which __init__ would take for a name).
        return type(self), (self.collection, self.known, self.store)


class VectorStore(Protocol):
    """What the engine reads of a VECTOR_STORE resource (connectors implement the rest:
    see ``eddies.connectors.stores``). The executor calls its ``query``, ``add``, ``get``,
    ``update`` and ``delete`` with the collection first; a store raises
    :class:`CollectionNotFoundError` for a collection it does not have (but in ``add``,
    which makes it), and takes one id given as a str as that id."""

    #: The EMBEDDING_MODEL resource that embeds its documents and queries.
    embedding_model: str
    #: The collection used when an operation names none.
    collection: str


#: The operations of a VECTOR_STORE call (its arguments' ``op``).
OPERATIONS = ("query", "add", "get", "update", "delete")
#: The argument of a VECTOR_STORE call that makes a missing collection an empty one:
#: a query or get finds nothing there, an update or delete changes nothing.
MISSING_OK = "missing_ok"


class VectorStoreHandle:
    """A VECTOR_STORE resource seen from an action: each operation is a durable call, in
    a sync form and an awaitable one (``..._async``, for ``async def`` actions).

    Example (in an ``async def`` action)::

        docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
        hits = await docs.query_async("a cheap bed", limit=5, filters={"city": {"$in": ["Lisbon"]}})
        await docs.delete_async("doc3")     # one id, or a list of them
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
        return _documents(self._site.call_now(self._query(text, limit, filters, collection)))

    async def query_async(self, text: str, *, limit: int = 5,
                          filters: Mapping[str, Any] | None = None,
                          collection: str | None = None) -> list[Document]:
        """Awaitable form of :meth:`query`, for ``async def`` actions."""
        return _documents(await self._later(self._query(text, limit, filters, collection)))

    def add(self, documents: Documents, *, collection: str | None = None) -> list[str]:
        """Add (or replace, by id) ``documents`` (one, or a list); their ids. A document
        without an id is given one made from this call's id, so a repeated attempt writes
        it once. Example: ``docs.add(Document("Hostels in Lisbon", {"city": "Lisbon"}))``."""
        return list(result(self._site.call_now(self._add(documents, collection))))

    async def add_async(self, documents: Documents, *, collection: str | None = None) -> list[str]:
        """Awaitable form of :meth:`add`."""
        return list(result(await self._later(self._add(documents, collection))))

    def get(self, ids: Ids | None = None, *, filters: Mapping[str, Any] | None = None,
            limit: int | None = None, collection: str | None = None) -> list[Document]:
        """The documents of ``ids`` (one id, or a list; those that exist), or those
        matching ``filters``. Example: ``docs.get("doc3")``."""
        return _documents(self._site.call_now(self._get(ids, filters, limit, collection)))

    async def get_async(self, ids: Ids | None = None, *, filters: Mapping[str, Any] | None = None,
                        limit: int | None = None, collection: str | None = None) -> list[Document]:
        """Awaitable form of :meth:`get`."""
        return _documents(await self._later(self._get(ids, filters, limit, collection)))

    def update(self, documents: Documents, *, collection: str | None = None) -> int:
        """Replace the content and metadata of documents that exist (by id; one document,
        or a list); how many. Example: ``docs.update(Document("Rye bread", id="bread"))``."""
        return int(result(self._site.call_now(self._update(documents, collection))))

    async def update_async(self, documents: Documents, *, collection: str | None = None) -> int:
        """Awaitable form of :meth:`update`."""
        return int(result(await self._later(self._update(documents, collection))))

    def delete(self, ids: Ids | None = None, *, filters: Mapping[str, Any] | None = None,
               collection: str | None = None) -> int:
        """Delete the documents of ``ids`` (one id, or a list), or those matching
        ``filters``; how many. Example: ``docs.delete("doc3")``."""
        return int(result(self._site.call_now(self._delete(ids, filters, collection))))

    async def delete_async(self, ids: Ids | None = None, *, filters: Mapping[str, Any] | None = None,
                           collection: str | None = None) -> int:
        """Awaitable form of :meth:`delete`."""
        return int(result(await self._later(self._delete(ids, filters, collection))))

    # --- the calls' specs (a wrong argument raises here, before any call) ---------------
    def _query(self, text: str, limit: int, filters: Mapping[str, Any] | None,
               collection: str | None) -> CallSpec:
        return query_spec(self.name, self.store, text, limit, filters, collection)

    def _add(self, documents: Documents, collection: str | None) -> CallSpec:
        docs = documents_of(documents, f"{self.name}.add")
        return self._spec("add", collection, documents=[document_dict(d) for d in docs])

    def _get(self, ids: Ids | None, filters: Mapping[str, Any] | None, limit: int | None,
             collection: str | None) -> CallSpec:
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ValueError(f"{self.name}.get: limit must be None or a positive int, got {limit!r}")
        return self._spec("get", collection, ids=ids_of(ids, f"{self.name}.get: ids"),
                          filters=filters_of(filters, f"{self.name}.get: filters"), limit=limit)

    def _update(self, documents: Documents, collection: str | None) -> CallSpec:
        docs = documents_of(documents, f"{self.name}.update")
        if any(d.id is None for d in docs):
            raise ValueError(f"{self.name}.update: every document needs its id")
        return self._spec("update", collection, documents=[document_dict(d) for d in docs])

    def _delete(self, ids: Ids | None, filters: Mapping[str, Any] | None,
                collection: str | None) -> CallSpec:
        chosen = ids_of(ids, f"{self.name}.delete: ids")
        where = filters_of(filters, f"{self.name}.delete: filters")
        if chosen is None and not where:
            raise ValueError(f"{self.name}.delete: name the ids or filters of what to delete")
        return self._spec("delete", collection, ids=chosen, filters=where)

    def _spec(self, op: str, collection: str | None, **arguments: Any) -> CallSpec:
        return store_spec(self.name, self.store, op, collection, **arguments)

    def _later(self, spec: CallSpec) -> CallAwaitable:
        return CallAwaitable(self._site, [spec], batch=False)


def _documents(value: Any) -> list[Document]:
    """The documents a query's or get's outcome holds."""
    return [document_of(d) for d in result(value)]


def store_spec(name: str, store: VectorStore, op: str, collection: str | None,
               **arguments: Any) -> CallSpec:
    """The durable call of operation ``op`` on VECTOR_STORE ``name``."""
    # Reads and writes by id change nothing when done twice; an add without ids gets ids
    # from the call's own (the executor's), the same on every attempt.
    return CallSpec(CallKind.VECTOR_STORE, name, (),
                    {"op": op, "collection": collection or store.collection, **arguments},
                    idempotent=True)


def query_spec(name: str, store: VectorStore, text: str, limit: int,
               filters: Mapping[str, Any] | None = None, collection: str | None = None,
               missing_ok: bool = False) -> CallSpec:
    """The durable call of a query of VECTOR_STORE ``name`` (a TypeError or ValueError
    names a wrong argument). With ``missing_ok``, a collection the store does not have
    answers no documents instead of CollectionNotFoundError (a memory set not written yet)."""
    if not isinstance(text, str):
        raise TypeError(f"{name}.query: the text must be a str, got {type(text).__name__}")
    if type(limit) is not int or limit <= 0:
        raise ValueError(f"{name}.query: limit must be a positive int, got {limit!r}")
    # Only when set: the arguments, and so the digests, of other queries stay as they were.
    extra = {MISSING_OK: True} if missing_ok else {}
    return store_spec(name, store, "query", collection, text=text, limit=limit,
                      filters=filters_of(filters, f"{name}.query: filters"), **extra)


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


__all__ = ["MISSING_OK", "MOST_RESULTS_FOR_A_MODEL", "OPERATIONS", "CollectionNotFoundError", "Document",
           "Documents", "Ids", "VectorStore", "VectorStoreHandle", "document_dict", "document_of",
           "documents_of", "filters_of", "ids_of", "query_spec", "result", "search_tool_spec", "store_spec",
           "store_value"]
