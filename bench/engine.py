"""Per-input time of the engine in-process, with durability on, for three workloads.

Run: ``.venv/bin/python bench/engine.py`` (``make bench-engine``). Each workload drives a
LocalRunner: the session machine, the in-process executor, and the journal (every input
and call result logged as Avro bytes before it is applied, every call outcome recorded,
non-idempotent calls marked started). Also measures Avro encode+decode of a ~1 KB
ChatResponseEvent. Reference: Apache Flink Agents 0.3.1's local runner, measured on this
machine without durability: 33, 177 and 420 microseconds per input.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.events import TokenUsage, decode, encode

from eddies import (
    Agent,
    AgentEvent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    LocalRunner,
    MessageRole,
    OutputEvent,
    ResourceType,
    action,
)

FLINK_AGENTS_US = {"input->output": 33.0, "input->chat->output": 177.0, "react-1-tool": 420.0}


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


class Chat(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=event.input)]))

    @action(ChatResponseEvent)
    def done(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def chat_agent(tools: bool) -> Agent:
    agent = Chat()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
    if tools:
        agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["add"] if tools else []))
    return agent


WORKLOADS = {
    "input->output": (lambda: Echo(), lambda i: f"hello {i}"),
    "input->chat->output": (lambda: chat_agent(False), lambda i: f"hello {i}"),
    "react-1-tool": (lambda: chat_agent(True), lambda i: f'{{"a": {i}, "b": 2}}'),
}


def per_input_us(name: str, n: int, sessions: int) -> float:
    make_agent, make_input = WORKLOADS[name]
    runner = LocalRunner(make_agent())
    inputs = [(f"s{i % sessions}", make_input(i)) for i in range(n)]
    t0 = time.perf_counter()
    outputs = runner.run(inputs)
    elapsed = time.perf_counter() - t0
    assert len(outputs) == n, (name, len(outputs))
    return elapsed / n * 1e6


def avro_roundtrips_per_s(seconds: float = 1.0) -> tuple[float, int]:
    text = "The quick brown fox jumps over the lazy dog. " * 20  # ~900 bytes
    ev = AgentEvent(
        "0" * 24, "session-42", 7, 1, (), "ChatResponseEvent", "1" * 24, "eddies.chat_model",
        "bench", "1", 1_700_000_000_000,
        ChatResponseEvent("2" * 24, ChatMessage(MessageRole.ASSISTANT, text), TokenUsage(12, 180)),
    )
    size = len(encode(ev))
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            decode(encode(ev))
        n += 1000
    return n / (time.perf_counter() - t0), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"engine, in-process, durability on; {args.inputs} inputs over {args.sessions} sessions,"
          f" median of {args.repeats} runs")
    print(f"{'workload':24} {'us/input':>9} {'Flink Agents':>13} {'speed-up':>9}")
    for name in WORKLOADS:
        per_input_us(name, 200, 10)  # warm-up
        us = statistics.median(per_input_us(name, args.inputs, args.sessions) for _ in range(args.repeats))
        ref = FLINK_AGENTS_US[name]
        print(f"{name:24} {us:9.1f} {ref:13.0f} {ref / us:8.1f}x")
    rate, size = avro_roundtrips_per_s()
    print(f"Avro encode+decode of a {size}-byte ChatResponseEvent: {rate:,.0f}/s (target 50,000/s)")


if __name__ == "__main__":
    main()
