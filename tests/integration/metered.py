"""The agent of the metrics test (run in a worker subprocess, importable by name): model
calls through litellm at the test's OpenAI-compatible server (priced, so they have a
cost), a tool, a timer, a signal wait, a failing run and ``ctx.metrics`` in an action."""

from __future__ import annotations

import json
import os
from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.demo import add
from eddies.engine import ChatModelSetup, ResourceType
from eddies.events import ChatMessage, ChatRequestEvent, ChatResponseEvent

#: What the test server's usage (10 prompt, 5 completion tokens a reply) costs per call.
INPUT_COST, OUTPUT_COST = 1e-6, 2e-6


class Metered(Agent):
    """input {"chat": {"a", "b"}} -> the model -> add -> the model -> output (and
    ``ctx.metrics``); {"sleep_s": x} -> a timer; {"signal": name} -> waits for it (no
    deadline); {"fail": text} -> the action raises ValueError(text)."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        asked = json.loads(event.input) if isinstance(event.input, str) else event.input
        if "chat" in asked:
            ctx.send_event(ChatRequestEvent(model="llm", messages=[
                ChatMessage(content=json.dumps(asked["chat"]))]))
        elif "sleep_s" in asked:
            ctx.sleep(asked["sleep_s"])
            ctx.send_event(OutputEvent(output="slept"))
        elif "signal" in asked:
            ctx.send_event(OutputEvent(output=ctx.wait_for_signal(asked["signal"])))
        else:
            raise ValueError(asked["fail"])

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.metrics.inc("answers")
        ctx.metrics.observe("answer_chars", len(event.response.content))
        ctx.send_event(OutputEvent(output=event.response.content))


def metered_agent() -> Metered:
    """:class:`Metered` on litellm at ``TEST_OPENAI_BASE``, with prices for its model."""
    agent = Metered("metered")
    conn = LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test",
                            input_cost_per_token=INPUT_COST, output_cost_per_token=OUTPUT_COST)
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", tools=["add"]))
    return agent
