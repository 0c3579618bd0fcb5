"""The agents of ``bench/providers.py``, on litellm against its slow local provider.

A worker process imports them by name (``--agent bench.provider_agents:one_call_agent``);
the provider's ``api_base`` comes from ``BENCH_PROVIDER_BASE``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.demo import Calculator, calculator_agent
from eddies.engine import ChatModelSetup, ReActAgent, ReActOptions, ResourceType

#: The environment variable holding the provider's ``api_base`` (``http://HOST:PORT/v1``).
BASE_ENV = "BENCH_PROVIDER_BASE"
#: The model the agents ask for (litellm's OpenAI-compatible provider).
MODEL = "openai/test"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _connection() -> LiteLLMChatModel:
    # BENCH_PROVIDER_LIMITS: the connection's provider limits, as JSON (bench/provider_limits.py).
    limits = json.loads(os.environ.get("BENCH_PROVIDER_LIMITS", "null"))
    return LiteLLMChatModel(api_base=os.environ[BASE_ENV], api_key="test", limits=limits)


def one_call_agent() -> Calculator:
    """input -> one litellm chat call -> output (the calculator offered no tools)."""
    return calculator_agent(_connection(), tools=False, model_name=MODEL)


def react_agent() -> ReActAgent:
    """A ReAct loop offered ``add`` and ``multiply``: the provider asks for both at once
    (run in parallel), then answers (two model calls and two tool calls per input). A
    model call that fails ends its input with a failed output (CONTINUE), which the bench
    counts, instead of halting the session."""
    agent = ReActAgent("providers-react", model="llm",
                       options=ReActOptions(handle_exception="CONTINUE"))
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("multiply", ResourceType.TOOL, multiply)
    agent.add_resource("provider", ResourceType.CHAT_MODEL_CONNECTION, _connection())
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("provider", model=MODEL, tools=["add", "multiply"]))
    return agent


def streaming_one_call_agent() -> Any:
    """input -> one streamed litellm chat call -> its text as the output
    (``bench/streaming.py``; ``BENCH_STREAM=0``: the same call, not streamed)."""
    from eddies import Agent, InputEvent, OutputEvent, action
    from eddies.engine import RunnerContext
    from eddies.events import ChatMessage

    class OneStreamedCall(Agent):
        @action(InputEvent)
        async def ask(event: InputEvent, ctx: RunnerContext) -> None:
            llm = ctx.get_resource("llm", ResourceType.CHAT_MODEL)
            reply = await llm.chat_async([ChatMessage(content=str(event.input))])
            ctx.send_event(OutputEvent(output=reply.content))

    agent = OneStreamedCall("streamer")
    agent.add_resource("provider", ResourceType.CHAT_MODEL_CONNECTION, _connection())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup(
        "provider", model=MODEL, stream=os.environ.get("BENCH_STREAM", "1") != "0"))
    return agent
