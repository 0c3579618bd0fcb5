"""EMBEDDING_MODEL_CONNECTIONs: any provider through litellm, and an offline model.

``LiteLLMEmbeddingModel`` calls ``litellm.embedding`` (any provider it supports, or an
OpenAI-compatible server: ``model="openai/NAME", api_base="http://host/v1"``).
``OfflineEmbeddingModel`` needs no server and no download: WordLlama's static token
embeddings (MIT; 256 dimensions, ~16 MB of weights shipped inside its wheel, ~20 us a
text on one core), for the demo, tests and air-gapped development; its vectors place
related texts near each other, not as well as a provider's model. Both are optional
extras (``eddies[litellm]``, ``eddies[embeddings]``), imported on first use. Example::

    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from eddies.connectors.models.litellm import load_litellm, warm_litellm
from eddies.connectors.remote.secrets import remember

#: Decimals kept of an offline vector's components: the journal holds every vector as
#: text, and float32 weights carry no more than this.
OFFLINE_DECIMALS = 7


class LiteLLMEmbeddingModel:
    """Calls ``litellm.embedding``; ``model`` of the EMBEDDING_MODEL setup picks the model.
    ``input_cost_per_token`` prices a model litellm's price table does not know."""

    def __init__(self, *, api_base: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, input_cost_per_token: float | None = None,
                 **params: Any) -> None:
        self.api_base = api_base
        # Masked wherever this process writes it (a provider's error may quote it).
        self.api_key = api_key if api_key is None else remember(api_key)
        self.timeout = timeout
        self.price = None if input_cost_per_token is None else float(input_cost_per_token)
        self.params = params

    def warm(self) -> None:
        """Import litellm and what its first call imports now, not in the first call (see
        :mod:`eddies.connectors.execution.warming`)."""
        warm_litellm()

    def embed(self, texts: list[str], *, model: str | None, dimensions: int | None,
              **arguments: Any) -> tuple[list[list[float]], dict[str, Any]]:
        """One embedding request for all of ``texts``; litellm's exceptions propagate (the
        call's outcome is an error)."""
        litellm = load_litellm()
        request = self._request(texts, model, dimensions, arguments)
        started = time.perf_counter()
        return self._vectors(litellm, litellm.embedding(**request), texts, started)

    async def embed_async(self, texts: list[str], *, model: str | None, dimensions: int | None,
                          **arguments: Any) -> tuple[list[list[float]], dict[str, Any]]:
        """:meth:`embed` as a coroutine (``litellm.aembedding``): an executor awaits it on
        its call loop, holding no thread while the provider works."""
        litellm = load_litellm()
        request = self._request(texts, model, dimensions, arguments)
        started = time.perf_counter()
        return self._vectors(litellm, await litellm.aembedding(**request), texts, started)

    def _request(self, texts: list[str], model: str | None, dimensions: int | None,
                 arguments: dict[str, Any]) -> dict[str, Any]:
        if not model:
            raise ValueError("LiteLLMEmbeddingModel: the EMBEDDING_MODEL setup names no model")
        kwargs: dict[str, Any] = {**self.params, **arguments}
        if dimensions is not None:
            kwargs["dimensions"] = dimensions
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return {"model": model, "input": texts, "timeout": self.timeout, **kwargs}

    def _vectors(self, litellm: Any, response: Any, texts: list[str],
                 started: float) -> tuple[list[list[float]], dict[str, Any]]:
        latency_ms = round((time.perf_counter() - started) * 1000)
        rows = sorted(response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
        vectors = [list(map(float, d["embedding"] if isinstance(d, dict) else d.embedding))
                   for d in rows]
        if len(vectors) != len(texts):
            raise ValueError(f"the embedding model answered {len(vectors)} vectors for "
                             f"{len(texts)} texts")
        tokens = int(getattr(getattr(response, "usage", None), "prompt_tokens", 0) or 0)
        usage: dict[str, Any] = {"prompt_tokens": tokens, "latency_ms": latency_ms,
                                 "cost_usd": self._cost(litellm, response, tokens)}
        return vectors, usage

    def _cost(self, litellm: Any, response: Any, tokens: int) -> float | None:
        if self.price is not None:
            return tokens * self.price
        try:
            return float(litellm.completion_cost(completion_response=response,
                                                 call_type="embedding"))
        except Exception:  # litellm raises for a model it has no price for
            return None


class OfflineEmbeddingModel:
    """WordLlama's shipped model (256 dimensions; a setup's ``dimensions`` may take
    fewer: the first ones, normalised again, as the model was trained for). Loaded once
    per process, on first use, from the package's own files (never downloaded)."""

    DIMENSIONS = 256
    _lock = threading.Lock()
    _model: Any = None

    def embed(self, texts: list[str], *, model: str | None = None, dimensions: int | None = None,
              **arguments: Any) -> tuple[list[list[float]], dict[str, Any]]:
        """The vectors of ``texts`` (unit length) and their token count."""
        if arguments:
            raise TypeError(f"OfflineEmbeddingModel takes no arguments, got {sorted(arguments)}")
        dims = self.DIMENSIONS if dimensions is None else dimensions
        if not 0 < dims <= self.DIMENSIONS:
            raise ValueError(f"OfflineEmbeddingModel has {self.DIMENSIONS} dimensions; "
                             f"{dims} asked")
        wl = self._load()
        started = time.perf_counter()
        matrix = wl.embed(texts, norm=False)[:, :dims]
        vectors = [_unit(row) for row in matrix.tolist()]
        tokens = sum(len(e.ids) for e in wl.tokenizer.encode_batch(texts))
        usage = {"prompt_tokens": tokens, "cost_usd": 0.0,
                 "latency_ms": round((time.perf_counter() - started) * 1000)}
        return vectors, usage

    @classmethod
    def _load(cls) -> Any:
        with cls._lock:
            if cls._model is None:
                try:
                    import wordllama  # type: ignore[import-untyped]
                except ImportError as err:
                    raise ImportError("the offline embedding model needs the wordllama package "
                                      "(pip install 'eddies[embeddings]')") from err
                from pathlib import Path

                # Its files are in the package; looked up there as a cache directory (its own
                # lookup of the tokenizer looks in a folder of another name, then downloads).
                cls._model = wordllama.WordLlama.load(
                    cache_dir=Path(wordllama.__file__).parent, disable_download=True)
            return cls._model


def _unit(row: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in row)) or 1.0
    return [round(x / norm, OFFLINE_DECIMALS) for x in row]


__all__ = ["LiteLLMEmbeddingModel", "OfflineEmbeddingModel"]
