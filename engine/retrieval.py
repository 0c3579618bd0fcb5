"""The built-in retrieval action (as Flink Agents' context retrieval): a
``ContextRetrievalRequestEvent`` is answered by a ``ContextRetrievalResponseEvent`` with
the documents of the named VECTOR_STORE nearest to its query, found by a durable call (a
replay returns the same documents, whatever the store holds by then). So a user's action
sends the request and handles the response::

    ctx.send_event(ContextRetrievalRequestEvent("a cheap bed in Lisbon", "docs", max_results=5))

    @action(ContextRetrievalResponseEvent)
    def answer(event, ctx): ...   # event.documents, nearest first
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eddies.events import ContextRetrievalRequestEvent, ContextRetrievalResponseEvent

from .agent import ActionSpec
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import RunnerContext

RETRIEVAL_ACTION = "eddies.context_retrieval"


def context_retrieval_action(event: ContextRetrievalRequestEvent, ctx: RunnerContext) -> None:
    """Find the request's documents and answer with them."""
    store = ctx.get_resource(event.vector_store, ResourceType.VECTOR_STORE)
    found = store.query(event.query, limit=event.max_results, filters=event.filters,
                        collection=event.collection)
    ctx.send_event(ContextRetrievalResponseEvent(ctx.event_id, event.query, found))


def builtin_actions() -> list[ActionSpec]:
    """The retrieval action every plan gets (unless ``Agent(builtin_actions=False)``)."""
    return [ActionSpec(RETRIEVAL_ACTION, context_retrieval_action, (ContextRetrievalRequestEvent,))]


__all__ = ["RETRIEVAL_ACTION", "builtin_actions", "context_retrieval_action"]
