"""Embedding models: an action's ``embed`` is a durable EMBEDDING call; its vectors are
journaled (a replay calls no model); the offline model and litellm's (over real HTTP to
the local OpenAI-compatible server) answer it; tokens and cost reach budgets and metrics."""

from __future__ import annotations

import math
from typing import Any

import pytest

from eddies import Agent, InputEvent, LocalRunner, OutputEvent, action
from eddies.connectors.declarative.located import DefinitionError
from eddies.connectors.declarative.yaml_agents import load_yaml_text
from eddies.connectors.inspect.replay import replay
from eddies.connectors.inspect.summary import detail_text
from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel, OfflineEmbeddingModel
from eddies.engine import ResourceType
from eddies.engine.embeddings import EmbeddingModelSetup
from eddies.engine.plan import PlanError
from eddies.events import CallKind, DurableCallRequest, DurableCallResult, decode_value
from eddies.events import OutputEvent as Output
from tests.openai_server import OpenAIServer, vector_of

DOCS = ["Cheap hotels and hostels in Lisbon for a budget trip",
        "The history of the French economy and its GDP",
        "How to bake sourdough bread at home"]


class Counting:
    """A connection that counts the texts it embedded (and lets another one embed them)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def embed(self, texts: list[str], **kw: Any) -> Any:
        self.texts += texts
        return self.inner.embed(texts, **kw)


class Nearest(Agent):
    """Answers with the document nearest to the input, by the embedding model's vectors."""

    @action(InputEvent)
    async def nearest(event: InputEvent, ctx: Any) -> None:
        emb = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
        query = emb.embed(event.input)
        docs = await emb.embed_async(DOCS)
        scores = [sum(a * b for a, b in zip(query, d, strict=True)) for d in docs]
        best = max(range(len(DOCS)), key=scores.__getitem__)
        ctx.send_event(OutputEvent(output={"doc": DOCS[best], "dims": len(query),
                                           "tokens": emb.usage.get("prompt_tokens")}))


def _agent(conn: Any, setup: EmbeddingModelSetup | None = None) -> Nearest:
    agent = Nearest("nearest")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, conn)
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, setup or EmbeddingModelSetup("emb_conn"))
    return agent


def test_an_actions_embeddings_are_durable_calls_and_a_replay_asks_no_model() -> None:
    conn = Counting(OfflineEmbeddingModel())
    runner = LocalRunner(_agent(conn))
    [out] = runner.run([("s1", "where to sleep cheaply in Lisbon?")])
    assert out["doc"] == DOCS[0] and out["dims"] == OfflineEmbeddingModel.DIMENSIONS
    assert out["tokens"] and out["tokens"] > 0
    assert conn.texts == ["where to sleep cheaply in Lisbon?", *DOCS]
    results = [e.payload for e in runner.history if isinstance(e.payload, DurableCallResult)]
    assert [r.kind for r in results] == [CallKind.EMBEDDING, CallKind.EMBEDDING]
    journaled = decode_value(results[1].value)
    assert len(journaled["embeddings"]) == len(DOCS)
    assert journaled["extra_args"]["usage"]["prompt_tokens"] > 0

    conn.texts.clear()
    report = replay(runner.plan, list(enumerate(runner.history)), "s1")
    assert report.ok and conn.texts == []  # the journaled vectors, no model asked


def test_fewer_dimensions_are_the_first_ones_at_unit_length() -> None:
    conn = OfflineEmbeddingModel()
    [out] = LocalRunner(_agent(conn, EmbeddingModelSetup("emb_conn", dimensions=64))).run(
        [("s1", "a cheap hostel in Lisbon")])
    assert out == {"doc": DOCS[0], "dims": 64, "tokens": out["tokens"]}
    [v], _ = conn.embed(["a cheap hostel in Lisbon"], dimensions=64)
    assert math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5)
    with pytest.raises(ValueError, match="256 dimensions; 300 asked"):
        conn.embed(["x"], dimensions=300)


def test_an_embedding_model_needs_an_embedding_connection() -> None:
    agent = Nearest("wrong")
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("nope"))
    with pytest.raises(PlanError, match="connection 'nope' is not an EMBEDDING_MODEL_CONNECTION"):
        LocalRunner(agent)
    agent = Nearest("wrong2")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, object())
    with pytest.raises(PlanError, match="needs an embed\\(\\) method"):
        LocalRunner(agent)
    with pytest.raises(ValueError, match="dimensions must be a positive int"):
        EmbeddingModelSetup("c", dimensions=0)


@pytest.fixture()
def server() -> Any:
    s = OpenAIServer().start()
    yield s
    s.stop()


def test_litellms_embeddings_over_http(server: OpenAIServer) -> None:
    conn = LiteLLMEmbeddingModel(api_base=server.base_url, api_key="test-key",
                                 input_cost_per_token=1e-6)
    runner = LocalRunner(_agent(conn, EmbeddingModelSetup("emb_conn", model="openai/test-emb")))
    [out] = runner.run([("s1", "hotel lisbon")])
    assert out["dims"] == 8 and out["tokens"] == sum(len(d.split()) for d in DOCS)
    assert [r["input"] for r in server.requests] == [["hotel lisbon"], DOCS]
    result = next(e.payload for e in runner.history if isinstance(e.payload, DurableCallResult))
    value = decode_value(result.value)
    assert value["embeddings"] == [vector_of("hotel lisbon")]
    assert value["extra_args"]["usage"]["cost_usd"] == pytest.approx(2e-6)


def test_litellms_embeddings_on_the_call_loop_wait_together() -> None:
    """aembedding: 20 requests the server holds 1 s each are awaited at once, and each
    answers as embed does (same vectors, usage with tokens, latency and cost)."""
    import asyncio
    import time

    slow = OpenAIServer(delay=1.0).start()
    try:
        conn = LiteLLMEmbeddingModel(api_base=slow.base_url, api_key="k", input_cost_per_token=1e-6)

        async def twenty() -> list[Any]:
            return await asyncio.gather(*(conn.embed_async([f"text {n}"], model="openai/e", dimensions=None)
                                          for n in range(20)))

        started = time.monotonic()
        answers = asyncio.run(twenty())
        took = time.monotonic() - started
        sync_vectors, sync_usage = conn.embed(["text 3"], model="openai/e", dimensions=None)
    finally:
        slow.stop()
    assert took < 5.0, took  # one after another: 20 s
    assert [vectors for vectors, _ in answers] == [[vector_of(f"text {n}")] for n in range(20)]
    assert answers[3][0] == sync_vectors
    assert answers[3][1].keys() == sync_usage.keys() == {"prompt_tokens", "latency_ms", "cost_usd"}
    assert answers[3][1]["latency_ms"] >= 1000


def test_a_budget_counts_embedding_tokens(server: OpenAIServer) -> None:
    conn = LiteLLMEmbeddingModel(api_base=server.base_url, api_key="k")
    agent = _agent(conn, EmbeddingModelSetup("emb_conn", model="openai/test-emb"))
    agent.config["budget"] = {"run": {"max_total_tokens": 5}}
    runner = LocalRunner(agent)
    runner.submit("s1", "hotel lisbon")  # 2 tokens, then the documents': over
    runner.run_until_idle()
    [out] = [e.payload for e in runner.outputs]
    assert isinstance(out, Output) and out.error is not None
    spent = 2 + sum(len(d.split()) for d in DOCS)
    assert f"run.max_total_tokens=5 ({spent} tokens spent)" in out.error.message


YAML = """\
agents:
  - name: nearest
    actions:
      - {name: nearest, function: "tests.unit.connectors.test_embeddings:nearest",
         trigger_conditions: [input]}
    embedding_model_connections:
      - {name: emb_conn, clazz: offline}
    embedding_model_setups:
      - {name: emb, connection: emb_conn, dimensions: 128}
"""


def nearest(event: InputEvent, ctx: Any) -> None:
    """Nearest's action, as a module-level function a YAML file can name."""
    emb = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
    query, docs = emb.embed(event.input), emb.embed(DOCS)
    scores = [sum(a * b for a, b in zip(query, d, strict=True)) for d in docs]
    ctx.send_event(OutputEvent(output={"doc": DOCS[scores.index(max(scores))], "dims": len(query)}))


def test_embedding_models_in_yaml() -> None:
    agent = load_yaml_text(YAML)
    [out] = LocalRunner(agent).run([("s1", "a cheap bed in Lisbon")])
    assert out == {"doc": DOCS[0], "dims": 128}
    setup = LocalRunner(agent).plan.resource("emb", ResourceType.EMBEDDING_MODEL)
    assert setup == EmbeddingModelSetup("emb_conn", dimensions=128)


@pytest.mark.parametrize(("change", "message"), [
    (("connection: emb_conn", "connection: nope"),
     "<yaml>:9:33: connection 'nope' is not declared in embedding_model_connections"),
    (("dimensions: 128", "dimensions: 0"), "<yaml>:9:9: EmbeddingModelSetup: dimensions must be"),
    (("dimensions: 128", "size: 128"), "<yaml>:9:43: 'size' is not a key of an embedding model setup"),
    (("clazz: offline", "clazz: offline, colour: blue"), "<yaml>:7:9: offline: "),
])
def test_embedding_model_errors_in_yaml_name_the_place(change: tuple[str, str], message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        load_yaml_text(YAML.replace(*change))
    assert str(err.value).startswith(message), str(err.value)


def test_a_trace_shows_an_embedding_call_by_its_texts_and_the_vectors_shape() -> None:
    runner = LocalRunner(_agent(OfflineEmbeddingModel()))
    runner.run([("s1", "a cheap bed in Lisbon")])
    lines = [detail_text(e) for e in runner.history
             if isinstance(e.payload, DurableCallRequest | DurableCallResult)]
    assert lines == ['EMBEDDING emb 1 text: "a cheap bed in Lisbon"', "OK 1 vector of 256",
                     f'EMBEDDING emb 3 texts: "{DOCS[0]}"'[:67] + "...", "OK 3 vectors of 256"]
