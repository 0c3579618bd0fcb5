"""Per-input time of the engine in-process, with durability on, for six workloads.

Run: ``.venv/bin/python bench/engine.py`` (``make bench``). Each workload drives a
LocalRunner: the session machine, the in-process executor and the journal (every input
and call result logged before it is applied, every call outcome recorded, non-idempotent
calls marked started, a state snapshot every 64 events per session). Two journal
variants: in-memory objects (the LocalRunner default) and Avro bytes (what a topic
holds: every logged event and outcome encoded on write). Also measures Avro
encode+decode of a ~1 KB ChatResponseEvent.

Reference: Apache Flink Agents 0.3.1's local runner (no durability) on the first three
workloads. With ``--reference``, or by default when ``.venv-flink-agents`` exists (``make
bench-flink-agents`` creates it), it is measured in this run: bench/flink_agents.py in that
virtualenv, same --inputs/--sessions/--repeats, each workload just before Eddies' own, so
the speed-ups compare one machine state. Otherwise (or with ``--no-reference``) the
numbers from bench/RESULTS.md: 33, 177 and 420 us per input, measured on another day (wall
time here drifts 2-3x between days). None exists for the other three workloads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddies import (
    Agent,
    AgentEvent,
    ChatMessage,
    ChatModelSetup,
    ChatResponseEvent,
    InputEvent,
    LocalRunner,
    MessageRole,
    OutputEvent,
    ReActAgent,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    action,
)
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.demo import add, calculator_agent
from eddies.engine import Journal
from eddies.events import TokenUsage, ToolCall, decode, encode

FLINK_AGENTS_US = {"input->output": 33.0, "input->chat->output": 177.0, "react-1-tool": 420.0}
ROOT = Path(__file__).resolve().parents[1]
FLINK_AGENTS_PYTHON = ROOT / ".venv-flink-agents" / "bin" / "python"


class Echo(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input))


def three_rounds(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """A model that adds three times (one tool call per round), then answers."""
    results = [m for m in messages if m.role is MessageRole.TOOL]
    if len(results) < 3:
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall(f"call-{len(results)}", tools[0].name, {"a": len(results), "b": 1})])
    return ChatMessage(MessageRole.ASSISTANT, f"sums: {', '.join(m.content for m in results)}")


#: name -> (the agent, the input of number i)
WORKLOADS: dict[str, tuple[Callable[[], Agent], Callable[[int], str]]] = {
    "input->output": (lambda: Echo(), lambda i: f"hello {i}"),
    "input->chat->output": (lambda: calculator_agent(tools=False), lambda i: f"hello {i}"),
    "react-1-tool": (lambda: calculator_agent(), lambda i: f'{{"a": {i}, "b": 2}}'),
    # Four model calls and three tool calls per input, the conversation growing each round.
    "react-3-tools": (lambda: calculator_agent(ScriptedChatModel(three_rounds)), lambda i: f"go {i}"),
    # The same on ReActAgent's loop (its deadline a timer request per input, too).
    "ReActAgent-3-tools": (lambda: react_agent(), lambda i: f"go {i}"),
    # Two drafts, each reviewed: four model calls and four loop events per input.
    "reflection-2-drafts": (lambda: reflection_agent(), lambda i: f"tagline {i}"),
}


def second_draft(messages: list[ChatMessage], tools: list[Any]) -> str:
    """A drafter whose refinement (asked with the feedback) is its second draft."""
    return "draft 2" if "feedback" in messages[-1].content else "draft 1"


def passes_the_second(messages: list[ChatMessage], tools: list[Any]) -> str:
    """A critic that passes a second draft."""
    return "APPROVED confidence: 0.9" if "draft 2" in messages[-1].content else "REVISE: shorter."


def reflection_agent() -> ReflectionAgent:
    agent = ReflectionAgent("bench", drafter="writer", critic="editor",
                            options=ReflectionOptions(confidence_value=0.8))
    agent.add_resource("w", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(second_draft))
    agent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(passes_the_second))
    agent.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("w"))
    agent.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("c"))
    return agent


def react_agent() -> ReActAgent:
    agent = ReActAgent("bench", model="llm")
    agent.add_resource("add", ResourceType.TOOL, add)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(three_rounds))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    return agent


def per_input_us(name: str, n: int, sessions: int, serialize: bool = False) -> float:
    make_agent, make_input = WORKLOADS[name]
    runner = LocalRunner(make_agent(), journal=Journal(serialize=serialize))
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


def measured_reference(name: str, inputs: int, sessions: int, repeats: int) -> float:
    """Flink Agents' per-input us for ``name``, run now by bench/flink_agents.py in its venv."""
    proc = subprocess.run(
        [str(FLINK_AGENTS_PYTHON), str(Path(__file__).with_name("flink_agents.py")),
         "--inputs", str(inputs), "--sessions", str(sessions), "--repeats", str(repeats),
         "--workloads", name],
        stdout=subprocess.PIPE, text=True, check=True,
    )
    lines = proc.stdout.strip().splitlines()
    return float(json.loads(lines[-1])[name])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    ref_mode = parser.add_mutually_exclusive_group()
    ref_mode.add_argument("--reference", action="store_true", default=None,
                          help="measure Flink Agents in this run (needs .venv-flink-agents: "
                               "make bench-flink-agents); the default when that venv exists")
    ref_mode.add_argument("--no-reference", dest="reference", action="store_false",
                          help="use the fixed Flink Agents numbers from bench/RESULTS.md")
    args = parser.parse_args()
    measure_ref = FLINK_AGENTS_PYTHON.exists() if args.reference is None else args.reference
    if measure_ref and not FLINK_AGENTS_PYTHON.exists():
        parser.error(f"{FLINK_AGENTS_PYTHON.relative_to(ROOT)} is missing: make bench-flink-agents")
    source = ("Flink Agents 0.3.1 measured in this run" if measure_ref
              else "Flink Agents reference from bench/RESULTS.md")
    print(f"engine, in-process, durability on; {args.inputs} inputs over {args.sessions} sessions,"
          f" median of {args.repeats} runs; speed-up against {source}")
    print(f"{'':24} {'journal: objects':>20} {'journal: Avro bytes':>22} {'Flink Agents':>13}")
    print(f"{'workload':24} {'us/input':>9} {'speed-up':>10} {'us/input':>11} {'speed-up':>10} "
          f"{'us/input':>13}")
    for name in WORKLOADS:
        ref = FLINK_AGENTS_US.get(name)
        if ref and measure_ref:
            sys.stdout.flush()
            ref = measured_reference(name, args.inputs, args.sessions, args.repeats)
        per_input_us(name, 200, 10)  # warm-up
        row = [f"{name:24}"]
        for serialize in (False, True):
            us = statistics.median(
                per_input_us(name, args.inputs, args.sessions, serialize) for _ in range(args.repeats)
            )
            ratio = f"{ref / us:9.1f}x" if ref else f"{'-':>10}"
            row.append(f"{us:9.1f} {ratio}" + (" " if serialize else ""))
        print(" ".join(row), f"{ref:12.{1 if measure_ref else 0}f}" if ref else f"{'-':>12}")
    rate, size = avro_roundtrips_per_s()
    print(f"Avro encode+decode of a {size}-byte ChatResponseEvent: {rate:,.0f}/s (target 50,000/s)")


if __name__ == "__main__":
    main()
