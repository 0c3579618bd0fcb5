"""Embedding models: texts made into vectors, each request a durable call (CallKind
EMBEDDING) whose vectors are journaled, so a replay gets the same vectors without asking
the model again.

As for chat models, a *connection* (``EMBEDDING_MODEL_CONNECTION``: a connector object
with an ``embed`` method, e.g. litellm's or the offline one) is set apart from a *setup*
(``EMBEDDING_MODEL``: which connection, which model, how many dimensions), and an action
sees the setup as a handle. Example (in an action)::

    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))

    emb = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
    vector = emb.embed("a cheap hotel in Lisbon")            # list[float]
    vectors = await emb.embed_async(["one text", "another"])  # list[list[float]]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from eddies.events import CallKind

from .budgets import reported_usage
from .calls import CallAwaitable, CallSite, CallSpec


class EmbeddingModelConnection(Protocol):
    """What an EMBEDDING_MODEL_CONNECTION does (connectors implement it): the vectors of
    ``texts``, in order, and the usage (``prompt_tokens``, ``cost_usd``, ``latency_ms``;
    any may be missing)."""

    def embed(self, texts: list[str], *, model: str | None, dimensions: int | None,
              **arguments: Any) -> tuple[list[list[float]], dict[str, Any]]: ...


@dataclass(frozen=True)
class EmbeddingModelSetup:
    """An EMBEDDING_MODEL resource: which connection, which model (None: the
    connection's own), how many dimensions (None: the model's), and further arguments
    for the connection. Embedding calls change nothing outside the provider, so they are
    ``idempotent``: one whose outcome a crash lost is asked again. Example:
    ``EmbeddingModelSetup("conn", model="openai/text-embedding-3-small", dimensions=256)``.
    """

    connection: str
    model: str | None = None
    dimensions: int | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool = True
    #: How long an executor lets one call run (None: the agent's config for EMBEDDING).
    timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if self.dimensions is not None and (type(self.dimensions) is not int or self.dimensions <= 0):
            raise ValueError(f"EmbeddingModelSetup: dimensions must be a positive int, got "
                             f"{self.dimensions!r}")


class EmbeddingModelHandle:
    """An EMBEDDING_MODEL resource seen from an action: each ``embed`` is a durable call.

    Example (in an ``async def`` action)::

        emb = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
        vectors = await emb.embed_async(["a", "b"])
        emb.usage   # {"prompt_tokens": ..., "cost_usd": ...} of the last call, as reported
    """

    __slots__ = ("_site", "name", "setup", "usage")

    def __init__(self, site: CallSite, name: str, setup: EmbeddingModelSetup) -> None:
        self._site = site
        self.name = name
        self.setup = setup
        #: What the connection reported of the last call (tokens, cost, latency).
        self.usage: dict[str, Any] = {}

    def embed(self, texts: str | list[str]) -> Any:
        """The vector of a text (a list of floats), or the vectors of a list of texts."""
        spec = self._spec(texts)
        return self._vectors(texts, self._site.call_now(spec))

    async def embed_async(self, texts: str | list[str]) -> Any:
        """Awaitable form of :meth:`embed`, for ``async def`` actions."""
        spec = self._spec(texts)
        return self._vectors(texts, await CallAwaitable(self._site, [spec], batch=False))

    def _spec(self, texts: str | list[str]) -> CallSpec:
        many = [texts] if isinstance(texts, str) else list(texts)
        if not all(isinstance(t, str) for t in many):
            raise TypeError(f"embed({self.name!r}): texts must be a str or a list of str")
        return CallSpec(CallKind.EMBEDDING, self.name, (), {"texts": many},
                        idempotent=self.setup.idempotent)

    def _vectors(self, texts: str | list[str], value: Any) -> Any:
        self.usage = dict(reported_usage(value) or {})
        vectors = value["embeddings"]
        return vectors[0] if isinstance(texts, str) else vectors


def embedding_value(vectors: list[list[float]], usage: Mapping[str, Any]) -> dict[str, Any]:
    """An EMBEDDING call's outcome as journaled: the vectors, and the usage where budgets
    and metrics find a model reply's (``extra_args["usage"]``)."""
    return {"embeddings": vectors, "extra_args": {"usage": dict(usage)}}


__all__ = ["EmbeddingModelConnection", "EmbeddingModelHandle", "EmbeddingModelSetup", "embedding_value"]
