"""Per-input time of Apache Flink Agents 0.3.1's local runner on bench/engine.py's workloads.

The reference that ``bench/engine.py --reference`` measures in the same run as Eddies. Runs
in its own virtualenv (``make bench-flink-agents`` creates ``.venv-flink-agents`` with
flink-agents 0.3.1 and the PyFlink it imports); it imports nothing from Eddies.

Run: ``.venv-flink-agents/bin/python bench/flink_agents.py``. Each run is what a Flink
Agents user writes to run an agent in-process: ``AgentsExecutionEnvironment
.get_execution_environment()`` (no Flink environment: the local runner),
``from_list(inputs).apply(agent).to_list()``, then ``execute()``, which is timed. The
workloads mirror bench/engine.py's, on Flink Agents' own events and built-in actions:

- ``input->output``: an action on InputEvent sends an OutputEvent with the input.
- ``input->chat->output``: the action sends a ChatRequestEvent; the built-in chat action
  calls the chat model setup, which calls an offline connection that echoes
  (``echo: <prompt>``); an action on the ChatResponseEvent sends the reply's content.
- ``react-1-tool``: the same with an ``add(a: int, b: int) -> int`` tool on the setup; the
  fake model first calls ``add`` with the input's a and b (the input is ``{"a": i, "b":
  2}``), the built-in tool action runs it, the built-in chat action asks again with the
  result, and the model answers ``The result is N.``.

The local runner keeps no journal and has no durable execution (its ``durable_execute``
just calls the function). Flink Agents logs every event sent and every action run at
INFO, and a warning per model and tool call that the local runner is not durable; that
logging is switched off here (``logging.disable``) unless ``--logging`` is given, so the
reference is the framework's work, not its log lines. The last line of stdout is JSON:
per-input microseconds by workload.
"""

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Python puts this file's directory first on sys.path, where this file's name shadows the package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from flink_agents.api.agents.agent import Agent
from flink_agents.api.chat_message import ChatMessage, MessageRole
from flink_agents.api.chat_models.chat_model import BaseChatModelConnection, BaseChatModelSetup
from flink_agents.api.core_options import AgentExecutionOptions
from flink_agents.api.decorators import action
from flink_agents.api.events.chat_event import ChatRequestEvent, ChatResponseEvent
from flink_agents.api.events.event import Event, InputEvent, OutputEvent
from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.api.resource import ResourceDescriptor, ResourceType
from flink_agents.api.runner_context import RunnerContext
from flink_agents.api.tools.tool import Tool, ToolType


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first operand.
        b: The second operand.
    """
    return a + b


class ScriptedConnection(BaseChatModelConnection):
    """An offline, deterministic chat model: Eddies' ``tool_then_answer``.

    After a tool result it answers with it; offered tools, it calls the first one once with
    the arguments found in the last user message if that is a JSON object; else it echoes.
    """

    def chat(self, messages: Sequence[ChatMessage], tools: list[Tool] | None = None,
             **kwargs: Any) -> ChatMessage:
        last = messages[-1]
        if last.role is MessageRole.TOOL:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"The result is {last.content}.")
        user = next((m for m in reversed(messages) if m.role is MessageRole.USER), last)
        if tools:
            try:
                args = json.loads(user.content)
            except json.JSONDecodeError:
                args = {}
            if not isinstance(args, dict):
                args = {}
            call = {"id": f"call-{len(messages)}", "type": ToolType.FUNCTION,
                    "function": {"name": tools[0].name, "arguments": args}}
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"echo: {user.content}")


class ScriptedSetup(BaseChatModelSetup):
    """The chat model setup: the base class resolves the connection and the tools."""

    @property
    def model_kwargs(self) -> dict[str, Any]:
        return {}


# The actions read event attributes with ``get_attr``, as Eddies' actions read the event's
# fields: the examples' ``InputEvent.from_event(event).input`` builds (validates, hashes) a
# second copy of the event, about 20 us more per input here.
class Echo(Agent):
    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def start(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.get_attr("input")))


class Calculator(Agent):
    """Asks the model; answers with the model's final message (Eddies' demo Calculator)."""

    @action(InputEvent.EVENT_TYPE)
    @staticmethod
    def ask(event: Event, ctx: RunnerContext) -> None:
        prompt = event.get_attr("input")
        if not isinstance(prompt, str):
            prompt = json.dumps(prompt)
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=prompt)]))

    @action(ChatResponseEvent.EVENT_TYPE)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.get_attr("response").content))


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def calculator_agent(tools: bool = True) -> Calculator:
    agent = Calculator()
    if tools:
        agent.add_resource("add", ResourceType.TOOL, Tool.from_callable(add))
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(clazz=_qualified(ScriptedConnection)))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ResourceDescriptor(
        clazz=_qualified(ScriptedSetup), connection="offline", model="scripted",
        tools=["add"] if tools else []))
    return agent


WORKLOADS: dict[str, tuple[Callable[[], Agent], Callable[[int], str], Callable[[int], str]]] = {
    # agent, input i, the output expected for input i
    "input->output": (Echo, lambda i: f"hello {i}", lambda i: f"hello {i}"),
    "input->chat->output": (lambda: calculator_agent(tools=False), lambda i: f"hello {i}",
                            lambda i: f"echo: hello {i}"),
    "react-1-tool": (calculator_agent, lambda i: f'{{"a": {i}, "b": 2}}',
                     lambda i: f"The result is {i + 2}."),
}


def per_input_us(name: str, n: int, sessions: int, sync: bool = False) -> float:
    make_agent, make_input, expected = WORKLOADS[name]
    env = AgentsExecutionEnvironment.get_execution_environment()
    if sync:  # model and tool calls made inline instead of as async durable calls
        config = env.get_config()
        config.set(AgentExecutionOptions.CHAT_ASYNC, False)
        config.set(AgentExecutionOptions.TOOL_CALL_ASYNC, False)
    inputs = [{"key": f"s{i % sessions}", "value": make_input(i)} for i in range(n)]
    outputs = env.from_list(inputs).apply(make_agent()).to_list()
    t0 = time.perf_counter()
    env.execute()
    elapsed = time.perf_counter() - t0
    assert len(outputs) == n, (name, len(outputs))
    # The local runner runs each input to completion before the next, so outputs are in order.
    for i in (0, n // 2, n - 1):
        assert outputs[i] == {f"s{i % sessions}": expected(i)}, (name, i, outputs[i])
    return elapsed / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, of: " + ", ".join(WORKLOADS))
    parser.add_argument("--logging", action="store_true",
                        help="keep Flink Agents' per-event INFO logging and per-call warnings "
                             "(to stderr), as the local runner ships")
    parser.add_argument("--sync-calls", action="store_true",
                        help="chat.async and tool-call.async off (both on by default): the "
                             "built-in actions call the model and tools inline")
    args = parser.parse_args()
    if not args.logging:
        logging.disable(logging.WARNING)
    from importlib.metadata import version

    print(f"Flink Agents {version('flink-agents')} local runner (apache-flink {version('apache-flink')},"
          f" Python {sys.version.split()[0]}); {args.inputs} inputs over {args.sessions} keys,"
          f" median of {args.repeats} runs; logging {'on' if args.logging else 'off'};"
          f" calls {'inline' if args.sync_calls else 'async (the default)'}")
    names = [w for w in args.workloads.split(",") if w]
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    result = {}
    for name in names:
        per_input_us(name, 200, 10, args.sync_calls)  # warm-up
        us = statistics.median(per_input_us(name, args.inputs, args.sessions, args.sync_calls)
                               for _ in range(args.repeats))
        result[name] = round(us, 1)
        print(f"{name:24} {us:9.1f} us/input", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
