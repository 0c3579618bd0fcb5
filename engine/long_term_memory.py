"""Long-term memory: what an agent remembers across sessions, by a key the action
chooses (a user's id, a customer's, the session's by default), searched by meaning.

A MEMORY_SET resource (``MemorySetSetup``) names the VECTOR_STORE that keeps its items
and, optionally, how long they are kept. An action reaches a set through
``ctx.long_term_memory.get_memory_set(name, key=...)``; every read and write is a durable
call on the store (a replay returns what was read then; a write that a crash interrupted
and that is made again writes its items once: they get ids from the call's). Items of
one agent's set live in the store's collection ``memory.AGENT.SET``, each with its
``key`` and the logical time it was written (``at``) in its metadata; reads see only
their key's items, and only those younger than the set's ``retention``. Example (in an
action)::

    agent.add_resource("facts", ResourceType.MEMORY_SET,
                       MemorySetSetup("docs", retention=timedelta(days=90)))

    facts = ctx.long_term_memory.get_memory_set("facts", key=event.input["user"])
    facts.add(["prefers window seats", "vegetarian"])
    facts.search("what does she eat?", limit=3)    # [Document("vegetarian", ...), ...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from eddies.events import Document

from .resources import ResourceType
from .vector_stores import VectorStoreHandle, document_of

if TYPE_CHECKING:
    from .step import Step

#: The metadata keys a memory item carries: whose it is, and when it was written.
KEY, AT = "key", "at"


@dataclass(frozen=True)
class MemorySetSetup:
    """A MEMORY_SET resource: the VECTOR_STORE that keeps its items, and how long an item
    is kept (None: for ever). Example: ``MemorySetSetup("docs", retention=timedelta(days=30))``."""

    vector_store: str
    retention: timedelta | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.retention is not None and (
                not isinstance(self.retention, timedelta) or self.retention <= timedelta(0)):
            raise ValueError(f"MemorySetSetup: retention must be a positive timedelta, got "
                             f"{self.retention!r}")


class MemorySet:
    """One memory set of one key, seen from an action (see the module). Example:
    ``ctx.long_term_memory.get_memory_set("facts", key="u42").search("diet")``."""

    __slots__ = ("_now", "_store", "collection", "key", "name", "setup")

    def __init__(self, store: VectorStoreHandle, name: str, setup: MemorySetSetup, key: str,
                 collection: str, now: int) -> None:
        self._store = store
        self._now = now
        self.name = name
        self.setup = setup
        self.key = key
        self.collection = collection

    def add(self, items: Sequence[str | Document | Mapping[str, Any]]) -> list[str]:
        """Remember ``items`` (texts, or Documents with metadata of their own); their ids."""
        docs = []
        for item in items:
            doc = document_of(item)
            meta = {**doc.metadata, KEY: self.key, AT: self._now}
            docs.append(Document(doc.content, meta, doc.id))
        self._forget_expired()
        return self._store.add(docs, collection=self.collection)

    def search(self, query: str, *, limit: int = 5, filters: Mapping[str, Any] | None = None
               ) -> list[Document]:
        """The ``limit`` items of this key nearest to ``query`` (and matching ``filters``)."""
        return self._store.query(query, limit=limit, filters=self._own(filters),
                                 collection=self.collection)

    def get(self, ids: Sequence[str] | None = None, *, limit: int | None = None) -> list[Document]:
        """Items of this key by id, or all of them (at most ``limit``)."""
        return self._store.get(ids, filters=self._own(None), limit=limit, collection=self.collection)

    def delete(self, ids: Sequence[str] | None = None) -> int:
        """Forget the items of ``ids``, or every item of this key; how many."""
        return self._store.delete(ids, filters={KEY: self.key}, collection=self.collection)

    def _own(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        """This key's items, younger than the retention, and ``filters``."""
        own: list[dict[str, Any]] = [{KEY: self.key}]
        if self.setup.retention is not None:
            own.append({AT: {"$gte": self._now - _ms(self.setup.retention)}})
        if filters:
            own.append(dict(filters))
        return {"$and": own}

    def _forget_expired(self) -> None:
        if self.setup.retention is not None:
            self._store.delete(filters={KEY: self.key, AT: {"$lt": self._now - _ms(self.setup.retention)}},
                               collection=self.collection)


def _ms(delta: timedelta) -> int:
    return round(delta.total_seconds() * 1000)


class LongTermMemory:
    """``ctx.long_term_memory``: the agent's memory sets. Example:
    ``ctx.long_term_memory.get_memory_set("facts", key=user_id)``."""

    __slots__ = ("_step",)

    def __init__(self, step: Step) -> None:
        self._step = step

    def get_memory_set(self, name: str, *, key: str | None = None) -> MemorySet:
        """Memory set ``name`` (a MEMORY_SET resource) of ``key`` (default: the session)."""
        step = self._step
        entry = step.plan.resources.get(name)
        if entry is None or entry[0] is not ResourceType.MEMORY_SET:
            raise KeyError(f"resource {name!r} is not a MEMORY_SET of this agent")
        setup: MemorySetSetup = entry[1]
        if key is not None and (not isinstance(key, str) or not key):
            raise ValueError(f"memory set {name!r}: the key is a non-empty str, got {key!r}")
        store = VectorStoreHandle(step, setup.vector_store,
                                  step.plan.resources[setup.vector_store][1])
        return MemorySet(store, name, setup, key or step.state.session_id,
                         f"memory.{step.plan.agent_name}.{name}", step.state.clock)


__all__ = ["AT", "KEY", "LongTermMemory", "MemorySet", "MemorySetSetup"]
