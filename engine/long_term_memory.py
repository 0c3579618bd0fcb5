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
    facts.add("flies from Porto", metadatas={"topic": "travel"})   # one item is one item
    facts.search("what does she eat?", limit=3)    # [Document("vegetarian", ...), ...]
    facts.get(filters={"topic": "travel"})
    ctx.long_term_memory.delete_memory_set("facts", key=event.input["user"])

A set that was never written to (or whose collection was dropped) holds nothing: its
reads find nothing and its deletes delete nothing, where a vector store's own operations
on a missing collection fail.

A chat model setup that names the set among its ``tools`` offers it to its model as one
tool that remembers facts and recalls the nearest ones (:func:`memory_tool_spec`); whose
they are is the setup's ``key`` (the session, a field of the input, the config or
short-term memory), never the model's choice.

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
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from eddies.events import ChatMessage, Document, InputEvent, MessageRole

from .calls import CallAwaitable, CallSite, CallSpec, chat_spec, message_from_value
from .resources import ResourceType, ToolSpec
from .tool_args import ToolArgumentError, problem
from .vector_stores import (
    MISSING_OK,
    MOST_RESULTS_FOR_A_MODEL,
    Documents,
    Ids,
    document_dict,
    document_of,
    documents_of,
    filters_of,
    ids_of,
    query_spec,
    result,
    store_spec,
)

if TYPE_CHECKING:
    from .step import Step

T = TypeVar("T")
#: A memory operation as the durable calls it makes, one after another: it yields each
#: call's spec and is sent its answer (run by :func:`run_now` or :func:`run_later`).
Flow = Generator[CallSpec, Any, T]

#: The metadata keys a memory item carries: whose it is, and when it was written.
KEY, AT = "key", "at"
#: Where a set's key comes from when no action names it (a model's use, or ``key=None``).
KEY_SOURCES = ("session", "input:", "config:", "short_term_memory:")


@dataclass(frozen=True)
class MemorySetSetup:
    """A MEMORY_SET resource: the VECTOR_STORE that keeps its items, and how long an item
    is kept (None: for ever). Example: ``MemorySetSetup("docs", retention=timedelta(days=30),
    key="input:user")``."""

    vector_store: str
    retention: timedelta | None = None
    description: str = ""
    #: The CHAT_MODEL that merges an item into the near ones it duplicates or updates
    #: (None: every item is added as it is).
    compaction_model: str | None = None
    #: How near (cosine similarity) an item must be to one the key holds to be compared.
    similarity: float = 0.75
    #: Whose items a model that uses the set as a tool (or an action that names no key)
    #: reads and writes: ``session`` (the session's id), ``input:FIELD`` (that field of
    #: the input, an object), ``config:KEY`` or ``short_term_memory:KEY``. Never the
    #: model's choice: a model cannot read another user's memories.
    key: str = "session"

    def __post_init__(self) -> None:
        if self.retention is not None and (
                not isinstance(self.retention, timedelta) or self.retention <= timedelta(0)):
            raise ValueError(f"MemorySetSetup: retention must be a positive timedelta, got "
                             f"{self.retention!r}")
        if not 0.0 < self.similarity <= 1.0:
            raise ValueError(f"MemorySetSetup: similarity is in (0, 1], got {self.similarity!r}")
        source, _, name = self.key.partition(":")
        if self.key != "session" and not (f"{source}:" in KEY_SOURCES and name):
            raise ValueError(f"MemorySetSetup: key is 'session', 'input:FIELD', 'config:KEY' or "
                             f"'short_term_memory:KEY', got {self.key!r}")


class MemorySet:
    """One memory set of one key, seen from an action (see the module). Example:
    ``ctx.long_term_memory.get_memory_set("facts", key="u42").search("diet")``."""

    __slots__ = ("_site", "collection", "key", "name", "setup")

    def __init__(self, site: CallSite, name: str, setup: MemorySetSetup, key: str) -> None:
        self._site = site
        self.name = name
        self.setup = setup
        self.key = key
        self.collection = f"memory.{site.plan.agent_name}.{name}"

    def add(self, items: Documents,
            metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None) -> list[str]:
        """Remember ``items`` (one, or a list: texts, or Documents with metadata of their
        own), with ``metadatas`` (one mapping for every item, or one per item); their ids.
        Example: ``facts.add("vegetarian", metadatas={"topic": "diet"})``."""
        return run_now(self._site, self.adding(items, metadatas))

    async def add_async(self, items: Documents,
                        metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
                        ) -> list[str]:
        """Awaitable form of :meth:`add`, for ``async def`` actions."""
        return await run_later(self._site, self.adding(items, metadatas))

    def search(self, query: str, limit: int = 5, filters: Mapping[str, Any] | None = None
               ) -> list[Document]:
        """The ``limit`` items of this key nearest to ``query`` (and matching ``filters``).
        Example: ``facts.search("diet", 3, filters={"topic": "diet"})``."""
        return run_now(self._site, self.searching(query, limit, filters))

    async def search_async(self, query: str, limit: int = 5,
                           filters: Mapping[str, Any] | None = None) -> list[Document]:
        """Awaitable form of :meth:`search`."""
        return await run_later(self._site, self.searching(query, limit, filters))

    def get(self, ids: Ids | None = None, filters: Mapping[str, Any] | None = None,
            limit: int | None = None) -> list[Document]:
        """Items of this key by id (one id, or a list), or those matching ``filters`` (all
        without), at most ``limit``. Example: ``facts.get(filters={"topic": "diet"})``."""
        return run_now(self._site, self.getting(ids, filters, limit))

    async def get_async(self, ids: Ids | None = None, filters: Mapping[str, Any] | None = None,
                        limit: int | None = None) -> list[Document]:
        """Awaitable form of :meth:`get`."""
        return await run_later(self._site, self.getting(ids, filters, limit))

    def delete(self, ids: Ids | None = None) -> int:
        """Forget the items of ``ids`` (one id, or a list), or every item of this key; how
        many. Example: ``facts.delete(ids[0])``."""
        return run_now(self._site, self.deleting(ids))

    async def delete_async(self, ids: Ids | None = None) -> int:
        """Awaitable form of :meth:`delete`."""
        return await run_later(self._site, self.deleting(ids))

    # --- the operations as flows (the same for an action and for a model's tool) -------
    def adding(self, items: Documents,
               metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
               ) -> Flow[list[str]]:
        """:meth:`add`, as a flow."""
        now = self._site.now()
        given = documents_of(items, f"memory set {self.name!r}: items")
        extra = _metadatas(self.name, metadatas, len(given))
        docs = [Document(doc.content, {**doc.metadata, **more, KEY: self.key, AT: now}, doc.id)
                for doc, more in zip(given, extra, strict=True)]
        if self.setup.retention is not None:
            yield self._spec("delete", ids=None, missing_ok=True,
                             filters={KEY: self.key, AT: {"$lt": now - _ms(self.setup.retention)}})
        if self.setup.compaction_model is None:
            return list(result((yield self._spec("add", documents=[document_dict(d) for d in docs]))))
        ids = []
        for doc in docs:
            ids.append((yield from self._compacted(doc, now)))
        return ids

    def searching(self, query: str, limit: int = 5, filters: Mapping[str, Any] | None = None
                  ) -> Flow[list[Document]]:
        """:meth:`search`, as a flow."""
        name = self.setup.vector_store
        spec = query_spec(name, self._site.plan.resources[name][1], query, limit, self._own(filters),
                          self.collection, missing_ok=True)
        return [document_of(d) for d in result((yield spec))]

    def getting(self, ids: Ids | None = None, filters: Mapping[str, Any] | None = None,
                limit: int | None = None) -> Flow[list[Document]]:
        """:meth:`get`, as a flow."""
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ValueError(f"memory set {self.name!r}: limit must be None or a positive int, "
                             f"got {limit!r}")
        chosen = ids_of(ids, f"memory set {self.name!r}: ids")
        found = result((yield self._spec("get", ids=chosen, filters=self._own(filters), limit=limit,
                                         missing_ok=True)))
        return [document_of(d) for d in found]

    def deleting(self, ids: Ids | None = None) -> Flow[int]:
        """:meth:`delete`, as a flow."""
        chosen = ids_of(ids, f"memory set {self.name!r}: ids")
        return int(result((yield self._spec("delete", ids=chosen, filters={KEY: self.key},
                                            missing_ok=True))))

    def _compacted(self, doc: Document, now: int) -> Flow[str]:
        """Add ``doc``, or fold it into a near item the model says it repeats or updates."""
        found = yield from self.searching(doc.content, 3)
        near = [d for d in found if (d.score or 0) >= self.setup.similarity]
        if not near:
            return str(result((yield self._spec("add", documents=[document_dict(doc)])))[0])
        shown = {d.id: d for d in near if d.id is not None}
        asked = {"memories": [{"id": i, "text": d.content} for i, d in shown.items()], "new": doc.content}
        model = str(self.setup.compaction_model)
        reply = message_from_value((yield chat_spec(model, self._site.plan.resources[model][1], [
            ChatMessage(MessageRole.SYSTEM, COMPACTION_PROMPT),
            ChatMessage(MessageRole.USER, json.dumps(asked))], {})))
        decision = object_in(reply.content)
        chosen = shown.get(str(decision.get("id")))
        if decision.get("action") == "none" and chosen is not None:
            return str(chosen.id)
        if decision.get("action") == "update" and chosen is not None:
            told = decision.get("text")
            text = told if isinstance(told, str) and told.strip() else doc.content
            kept = Document(text, {**chosen.metadata, AT: now}, chosen.id)
            yield self._spec("update", documents=[document_dict(kept)])
            return str(chosen.id)
        return str(result((yield self._spec("add", documents=[document_dict(doc)])))[0])

    def _spec(self, op: str, missing_ok: bool = False, **arguments: Any) -> CallSpec:
        name = self.setup.vector_store
        # A set no one wrote to yet has no collection: it holds nothing, it is no error.
        extra = {MISSING_OK: True} if missing_ok else {}
        return store_spec(name, self._site.plan.resources[name][1], op, self.collection,
                          **arguments, **extra)

    def _own(self, filters: Mapping[str, Any] | None) -> dict[str, Any]:
        """This key's items, younger than the retention, and ``filters``."""
        own: list[dict[str, Any]] = [{KEY: self.key}]
        if self.setup.retention is not None:
            own.append({AT: {"$gte": self._site.now() - _ms(self.setup.retention)}})
        wanted = filters_of(filters, f"memory set {self.name!r}: filters")
        if wanted:
            own.append(wanted)
        return {"$and": own}


def _metadatas(name: str, metadatas: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
               count: int) -> list[Mapping[str, Any]]:
    """The metadata each of ``count`` items gets: one mapping for all, or one each."""
    if metadatas is None:
        return [{}] * count
    if isinstance(metadatas, Mapping):
        return [metadatas] * count
    if isinstance(metadatas, str) or not isinstance(metadatas, Sequence) or not all(
            isinstance(m, Mapping) for m in metadatas):
        raise TypeError(f"memory set {name!r}: metadatas is a mapping or a list of them, got "
                        f"{metadatas!r:.60}")
    if len(metadatas) != count:
        raise ValueError(f"memory set {name!r}: {len(metadatas)} metadatas for {count} items")
    return list(metadatas)


def run_now(site: CallSite, flow: Flow[T]) -> T:
    """``flow`` run in a sync action: each call made now (Suspend until it has an outcome)."""
    try:
        spec = next(flow)
        while True:
            spec = flow.send(site.call_now(spec))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_later(site: CallSite, flow: Flow[T]) -> T:
    """``flow`` run in an ``async def`` action, each call awaited in turn."""
    try:
        spec = next(flow)
        while True:
            spec = flow.send(await CallAwaitable(site, [spec], batch=False))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def memory_tool_spec(name: str, setup: MemorySetSetup) -> ToolSpec:
    """How a model is offered MEMORY_SET ``name`` (named in its setup's ``tools``): one tool
    that remembers facts, recalls the nearest ones, or both."""
    description = setup.description or (
        f"The {name} memory: what you learnt about the user in earlier conversations. "
        "'remember' keeps facts (short, one fact each) for later conversations; 'recall' "
        "returns the remembered facts nearest to a question, nearest first.")
    return ToolSpec(name, description, {
        "type": "object",
        "properties": {
            "remember": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                         "maxItems": MOST_RESULTS_FOR_A_MODEL, "description": "Facts to keep."},
            "recall": {"type": "string", "description": "What to look for."},
            "max_results": {"type": "integer", "minimum": 1, "maximum": MOST_RESULTS_FOR_A_MODEL,
                            "description": "How many facts to recall (default 5)."}},
        "additionalProperties": False})


def memory_tool(site: CallSite, name: str, setup: MemorySetSetup, arguments: Any) -> Flow[dict[str, Any]]:
    """What a model's call of memory tool ``name`` does, as a flow: ``{"remembered": n}``
    and/or ``{"recalled": [{"content", "score"}, ...]}``. ToolArgumentError (raised before any
    call) says what is wrong with ``arguments`` or the key."""
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError("arguments must be an object")
    wrong = problem(memory_tool_spec(name, setup).parameters, dict(arguments))
    if wrong is None and "remember" not in arguments and "recall" not in arguments:
        wrong = "give 'remember', 'recall' or both"
    if wrong is not None:
        raise ToolArgumentError(wrong)
    memory = MemorySet(site, name, setup, key_of(site, setup))
    return _used(memory, arguments)


def _used(memory: MemorySet, arguments: Mapping[str, Any]) -> Flow[dict[str, Any]]:
    out: dict[str, Any] = {}
    if "remember" in arguments:
        out["remembered"] = len((yield from memory.adding(arguments["remember"])))
    if "recall" in arguments:
        found = yield from memory.searching(arguments["recall"], arguments.get("max_results", 5))
        out["recalled"] = [{"content": d.content, "score": d.score} for d in found]
    return out


def key_of(site: CallSite, setup: MemorySetSetup) -> str:
    """The key ``setup.key`` names for the running action; ToolArgumentError if it has none."""
    source, _, field = setup.key.partition(":")
    if source == "session":
        return site.session_id
    if source == "input":
        given = site.trigger.input if isinstance(site.trigger, InputEvent) else None
        value = given.get(field) if isinstance(given, Mapping) else None
    else:
        value = (site.config if source == "config" else site.short_term_memory).get(field)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ToolArgumentError(f"the memory's key {setup.key!r} is not a text or number here "
                                f"(got {value!r:.60})")
    return str(value)


#: What the compaction model is asked (its answer: one JSON object).
COMPACTION_PROMPT = (
    "You keep a user's memories, one fact each. You are shown memories that are near a new "
    "one. Answer with one JSON object: {\"action\": \"none\", \"id\": ID} if the new memory "
    "says nothing a memory shown does not; {\"action\": \"update\", \"id\": ID, \"text\": "
    "TEXT} if it changes or adds to memory ID (TEXT: the memory as it is now, one fact); "
    "{\"action\": \"add\"} if it is another fact.")


def object_in(text: str) -> dict[str, Any]:
    """The JSON object a model's reply holds, from its first ``{`` to its last ``}`` (text
    around it allowed), or {} if it holds none."""
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
        """Memory set ``name`` (a MEMORY_SET resource) of ``key`` (default: the one its
        setup's ``key`` names, the session's unless it says otherwise)."""
        step = self._step
        entry = step.plan.resources.get(name)
        if entry is None or entry[0] is not ResourceType.MEMORY_SET:
            raise KeyError(f"resource {name!r} is not a MEMORY_SET of this agent")
        setup: MemorySetSetup = entry[1]
        if key is not None and (not isinstance(key, str) or not key):
            raise ValueError(f"memory set {name!r}: the key is a non-empty str, got {key!r}")
        try:
            return MemorySet(step, name, setup, key or key_of(step, setup))
        except ToolArgumentError as err:
            raise KeyError(f"memory set {name!r}: {err}") from None

    def delete_memory_set(self, name: str, *, key: str | None = None) -> bool:
        """Forget every item of memory set ``name`` of ``key`` (as :meth:`get_memory_set`
        names it; other keys' items stay); whether it held any. Example:
        ``ctx.long_term_memory.delete_memory_set("facts", key=user_id)``."""
        return self.get_memory_set(name, key=key).delete() > 0

    async def delete_memory_set_async(self, name: str, *, key: str | None = None) -> bool:
        """Awaitable form of :meth:`delete_memory_set`, for ``async def`` actions."""
        return await self.get_memory_set(name, key=key).delete_async() > 0


__all__ = ["AT", "COMPACTION_PROMPT", "KEY", "KEY_SOURCES", "Flow", "LongTermMemory", "MemorySet",
           "MemorySetSetup", "key_of", "memory_tool", "memory_tool_spec", "object_in", "run_later", "run_now"]
