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

With a ``compaction_model`` (a CHAT_MODEL resource), a set keeps one item per fact, as
Mem0 does: an item added while the key holds items as near as ``similarity`` (cosine) is
shown to the model with them, and the model answers whether it is new (added), the same
as one of them (nothing written), or an update of one (that item's text replaced: "lives
in Lisbon" after "lives in Porto"). The search, the model's answer and the write are
durable calls, so a replay takes the same decision; an answer that is not one of the
three adds the item (nothing is lost to a confused model).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from eddies.events import ChatMessage, Document, MessageRole

from .handles import ChatModelHandle
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
    #: The CHAT_MODEL that merges an item into the near ones it duplicates or updates
    #: (None: every item is added as it is).
    compaction_model: str | None = None
    #: How near (cosine similarity) an item must be to one the key holds to be compared.
    similarity: float = 0.75

    def __post_init__(self) -> None:
        if self.retention is not None and (
                not isinstance(self.retention, timedelta) or self.retention <= timedelta(0)):
            raise ValueError(f"MemorySetSetup: retention must be a positive timedelta, got "
                             f"{self.retention!r}")
        if not 0.0 < self.similarity <= 1.0:
            raise ValueError(f"MemorySetSetup: similarity is in (0, 1], got {self.similarity!r}")


class MemorySet:
    """One memory set of one key, seen from an action (see the module). Example:
    ``ctx.long_term_memory.get_memory_set("facts", key="u42").search("diet")``."""

    __slots__ = ("_llm", "_now", "_store", "collection", "key", "name", "setup")

    def __init__(self, store: VectorStoreHandle, name: str, setup: MemorySetSetup, key: str,
                 collection: str, now: int, llm: ChatModelHandle | None = None) -> None:
        self._store = store
        self._llm = llm
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
        if self._llm is None:
            return self._store.add(docs, collection=self.collection)
        return [self._compacted(doc) for doc in docs]

    def _compacted(self, doc: Document) -> str:
        """Add ``doc``, or fold it into a near item the model says it repeats or updates."""
        assert self._llm is not None
        near = [d for d in self.search(doc.content, limit=3) if (d.score or 0) >= self.setup.similarity]
        if not near:
            return self._store.add([doc], collection=self.collection)[0]
        shown = {d.id: d for d in near if d.id is not None}
        asked = {"memories": [{"id": i, "text": d.content} for i, d in shown.items()], "new": doc.content}
        reply = self._llm.chat([ChatMessage(MessageRole.SYSTEM, COMPACTION_PROMPT),
                                ChatMessage(MessageRole.USER, json.dumps(asked))])
        decision = _decision(reply.content)
        chosen = shown.get(str(decision.get("id")))
        if decision.get("action") == "none" and chosen is not None:
            return str(chosen.id)
        if decision.get("action") == "update" and chosen is not None:
            told = decision.get("text")
            text = told if isinstance(told, str) and told.strip() else doc.content
            self._store.update([Document(text, {**chosen.metadata, AT: self._now}, chosen.id)],
                               collection=self.collection)
            return str(chosen.id)
        return self._store.add([doc], collection=self.collection)[0]

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


#: What the compaction model is asked (its answer: one JSON object).
COMPACTION_PROMPT = (
    "You keep a user's memories, one fact each. You are shown memories that are near a new "
    "one. Answer with one JSON object: {\"action\": \"none\", \"id\": ID} if the new memory "
    "says nothing a memory shown does not; {\"action\": \"update\", \"id\": ID, \"text\": "
    "TEXT} if it changes or adds to memory ID (TEXT: the memory as it is now, one fact); "
    "{\"action\": \"add\"} if it is another fact.")


def _decision(text: str) -> dict[str, Any]:
    """The model's answer as an object ({} if it is none)."""
    start, end = text.find("{"), text.rfind("}")
    try:
        found = json.loads(text[start:end + 1]) if 0 <= start < end else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


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
        llm = (None if setup.compaction_model is None else
               ChatModelHandle(step, setup.compaction_model, step.plan.resources[setup.compaction_model][1]))
        return MemorySet(store, name, setup, key or step.state.session_id,
                         f"memory.{step.plan.agent_name}.{name}", step.state.clock, llm)


__all__ = ["AT", "COMPACTION_PROMPT", "KEY", "LongTermMemory", "MemorySet", "MemorySetSetup"]
