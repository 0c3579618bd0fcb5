"""Agents on a model provider at a test's OpenAI-compatible server (``TEST_OPENAI_BASE``):
one model call per input, with a timeout, with a fallback, with provider limits; one
embedding per input; a document kept and found per input. Worker
subprocesses import them by name (``tests.integration.provider_agents:one_call_agent``)."""

from __future__ import annotations

import json
import os
from typing import Any

from eddies import Agent, Document, InputEvent, OutputEvent, action
from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.stores.embedded import EmbeddedVectorStore
from eddies.engine import ChatModelSetup, ResourceType
from eddies.engine.embeddings import EmbeddingModelSetup
from tests.agents import OneCall


def one_call_agent(config: dict[str, Any] | None = None) -> OneCall:
    """:class:`OneCall` on litellm, at the test's OpenAI-compatible server."""
    agent = OneCall(config=config or {})
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="openai/test-model"))
    return agent


def impatient_one_call_agent() -> OneCall:
    """:class:`OneCall` whose model calls time out after 300 ms, and are not retried."""
    return one_call_agent({"timeout_ms": {"CHAT_MODEL": 300}, "retry": {"CHAT_MODEL": {"max_attempts": 1}}})


def fallback_agent() -> OneCall:
    """:class:`OneCall` whose model ``llm`` (at TEST_OPENAI_BASE) falls back on ``backup``
    (at TEST_FALLBACK_BASE), after one retry."""
    agent = OneCall(config={"retry": {"CHAT_MODEL": {"max_attempts": 2, "base_delay_ms": 10}}})
    agent.add_resource("main", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("spare", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_FALLBACK_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("main", model="openai/primary", fallbacks=["backup"]))
    agent.add_resource("backup", ResourceType.CHAT_MODEL, ChatModelSetup("spare", model="openai/backup"))
    return agent


def limited_agent() -> OneCall:
    """:class:`OneCall` whose connection has the provider limits of ``TEST_LIMITS`` (JSON),
    and, with ``TEST_FALLBACK_BASE``, a fallback model ``backup`` there, without limits."""
    agent = OneCall(config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    limits = json.loads(os.environ["TEST_LIMITS"])
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test",
                                        limits=limits))
    fallbacks = []
    if os.environ.get("TEST_FALLBACK_BASE"):
        agent.add_resource("spare", ResourceType.CHAT_MODEL_CONNECTION,
                           LiteLLMChatModel(api_base=os.environ["TEST_FALLBACK_BASE"], api_key="test"))
        agent.add_resource("backup", ResourceType.CHAT_MODEL, ChatModelSetup("spare", model="openai/backup"))
        fallbacks = ["backup"]
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", fallbacks=fallbacks))
    return agent


class Embedder(Agent):
    """One embedding per input; the answer is the vector's first component and length."""

    @action(InputEvent)
    def embed(event: InputEvent, ctx: Any) -> None:
        vector = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL).embed(str(event.input))
        ctx.send_event(OutputEvent(output=f"{vector[0]:.6f}/{len(vector)}"))


def embedding_agent() -> Embedder:
    """:class:`Embedder` on litellm's embeddings, at the test's OpenAI-compatible server."""
    agent = Embedder("embedder")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       LiteLLMEmbeddingModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn", model="openai/e"))
    return agent


class Keeper(Agent):
    """Keeps each input in vector store ``docs``, then finds the document nearest to it:
    the answer is its content (each text is embedded at the provider)."""

    @action(InputEvent)
    def keep(event: InputEvent, ctx: Any) -> None:
        docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
        docs.add(Document(str(event.input)))
        [nearest] = docs.query(str(event.input), limit=1)
        ctx.send_event(OutputEvent(output=nearest.content))


def keeping_agent() -> Keeper:
    """:class:`Keeper`, its store embedded by :func:`embedding_agent`'s model."""
    agent = Keeper("keeper")
    agent.resources = list(embedding_agent().resources)
    agent.add_resource("docs", ResourceType.VECTOR_STORE, EmbeddedVectorStore(embedding_model="emb"))
    return agent


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def streaming_react_agent(name: str = "streamer", remember_turns: int = 0) -> Any:
    """A ReActAgent with the ``add`` tool whose model (litellm, at the test's server)
    streams its answers to the app's stream (``remember_turns``: see ReActOptions)."""
    from eddies.engine import FunctionTool, ReActAgent, ReActOptions

    agent = ReActAgent(name, model="llm", prompt="You add numbers.",
                       options=ReActOptions(remember_turns=remember_turns))
    agent.add_resource("add", ResourceType.TOOL, FunctionTool(add, idempotent=True))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", tools=["add"], stream=True))
    return agent


def streaming_chat_agent() -> Any:
    """:func:`streaming_react_agent` that keeps the session's last 5 turns (a chat)."""
    return streaming_react_agent("adder", remember_turns=5)


def customer_record(order: str) -> dict[str, str]:
    """Look an order up: the customer's record, personal data and all."""
    return {"order": order, "customer": "Ann Lee", "email": "ann.lee@example.com",
            "card": "5555 5555 5555 4444", "status": "charged twice"}


def support_agent() -> Any:
    """A customer-support ReActAgent on litellm at the test's server, with a tool that
    returns a customer's record, behind the personal-data guardrail (masking)."""
    from eddies.connectors.guardrails.pii import PiiRedaction
    from eddies.engine import FunctionTool, ReActAgent

    agent = ReActAgent("support", model="llm", prompt="You help customers with their orders.")
    agent.add_resource("customer_record", ResourceType.TOOL, FunctionTool(customer_record, idempotent=True))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", tools=["customer_record"]))
    return agent.add_hook(PiiRedaction())


def judged_support_agent() -> Any:
    """:func:`support_agent` whose answers a guard model (``judge``, model ``judge-model``
    on the same server) reviews before they go out."""
    from eddies.connectors.guardrails.judge import ModelJudge

    agent = support_agent()
    agent.add_resource("judge", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="openai/judge-model"))
    return agent.add_hook(ModelJudge("judge", "Never promise a refund."))
