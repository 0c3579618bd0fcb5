"""The campaign's agent, ``chaos.agents:mixed_agent`` (workers import it: PYTHONPATH=tools).

One agent, ``mixed_agent``, whose InputEvent action dispatches on the input's "kind":

- "effects": a non-idempotent durable *function* (charge) then the built-in chat loop
  (ChatRequestEvent) whose scripted model calls the non-idempotent tool ``add`` once, then
  answers "The result is A+B." (the tests' effects_agent pattern).
- "react": the built-in ReAct loop (engine.react.answer) on a scripted model that runs
  ``rounds`` tool rounds: round 1 calls ``book`` and ``ship`` in parallel, later rounds call
  ``book`` (and ``notify`` in the last), then answers with every tool result joined.
- "sub": an internal ReActAgent sub-agent (child scope) running the same multi-round loop.
- "slow" (the ``+slow`` rounds): one litellm chat call (``acompletion``: a task on the
  executor's event loop) to the round's slow provider (``chaos.provider``; its address in
  CHAOS_PROVIDER_BASE), which echoes the input: "The result is INPUT.". Idempotent, with
  no side effect of its own: the provider's log of requests is its evidence.

Every execution of a side effect appends "EXEC kind key pid time" to the file named by
CHAOS_EFFECTS before its (slow) work and "DONE kind key pid time" after it. Tools get
their durable call id injected (``call:id``): their key IS the call id. The durable
function's key is SESSION#N (one call per input), mapped to its call id later from
APP.events.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from eddies import Agent, InputEvent, OutputEvent, action
from eddies.engine import ChatModelSetup, FunctionTool, ReActAgent, ReActOptions, ResourceType
from eddies.engine.react import answer as react_answer
from eddies.events import ChatMessage, ChatRequestEvent, ChatResponseEvent, MessageRole, ToolCall

#: The slow provider's ``api_base`` (``http://127.0.0.1:PORT/v1``), given to the workers of
#: a ``+slow`` round; without it the agent has no such model.
PROVIDER_ENV = "CHAOS_PROVIDER_BASE"
#: The model the slow kind asks for (litellm's OpenAI-compatible provider).
PROVIDER_MODEL = "openai/chaos"
#: The worker process's name in the campaign (its log's stem), which its provider requests
#: carry (in CALLER_HEADER, as "NAME@TIME": TIME when the call was made, in epoch seconds)
#: so the provider's log tells which process asked, and when it did: a provider that holds
#: hundreds of requests reads a new one up to seconds after it was sent.
PROC_ENV = "CHAOS_PROC"
CALLER_HEADER = "X-Caller"


def _line(tag: str, kind: str, key: str) -> None:
    path = os.environ.get("CHAOS_EFFECTS")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tag} {kind} {key} {os.getpid()} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)


def _work() -> None:
    lo = float(os.environ.get("CHAOS_DELAY_MIN", "0.2"))
    hi = float(os.environ.get("CHAOS_DELAY_MAX", "1.0"))
    time.sleep(random.uniform(lo, hi))


def effect(kind: str, key: str) -> None:
    """One execution of a non-idempotent side effect: recorded, then slow."""
    _line("EXEC", kind, key)
    _work()
    _line("DONE", kind, key)


# --- non-idempotent side effects ------------------------------------------------------------

def charge(key: str, amount: int) -> str:
    """A non-idempotent durable function (key: SESSION#N)."""
    effect("fn", key)
    return f"charged {key} {amount}"


def add(a: int, b: int, call_id: str = "") -> int:
    """Add two integers."""
    effect("add", call_id)
    return a + b


def book(ref: str, call_id: str = "") -> str:
    """Book the thing named ref."""
    effect("book", call_id)
    return f"booked {ref}"


def ship(ref: str, call_id: str = "") -> str:
    """Ship the thing named ref."""
    effect("ship", call_id)
    return f"shipped {ref}"


def notify(ref: str, call_id: str = "") -> str:
    """Tell someone about ref."""
    effect("notify", call_id)
    return f"notified {ref}"


def _tool(fn: Any) -> FunctionTool:
    return FunctionTool(fn, inject={"call_id": "call:id"})


# --- the scripted multi-round ReAct model -----------------------------------------------------

def rounds_model(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """Round r (1-based) of ``rounds``: r=1 book+ship in parallel; 1<r<rounds book;
    r=rounds book+notify; after the last round: the answer, every tool result joined."""
    user = next(m for m in messages if m.role is MessageRole.USER)
    req = json.loads(user.content)
    ref, total = req["ref"], int(req["rounds"])
    done = sum(1 for m in messages if m.role is MessageRole.ASSISTANT and m.tool_calls)
    if done >= total:
        results = [m.content for m in messages if m.role is MessageRole.TOOL]
        return ChatMessage(MessageRole.ASSISTANT, "ANSWER " + " | ".join(results))
    r = done + 1
    calls = [ToolCall(f"t{r}-book", "book", {"ref": f"{ref}/r{r}"})]
    if r == 1:
        calls.append(ToolCall(f"t{r}-ship", "ship", {"ref": f"{ref}/r{r}"}))
    if r == total and total > 1:
        calls.append(ToolCall(f"t{r}-notify", "notify", {"ref": f"{ref}/r{r}"}))
    return ChatMessage(MessageRole.ASSISTANT, "", calls)


def expected_react(ref: str, rounds: int) -> str:
    """The answer a react/sub input gets when every tool call succeeded."""
    parts = []
    for r in range(1, rounds + 1):
        parts.append(json.dumps(f"booked {ref}/r{r}"))
        if r == 1:
            parts.append(json.dumps(f"shipped {ref}/r{r}"))
        if r == rounds and rounds > 1:
            parts.append(json.dumps(f"notified {ref}/r{r}"))
    return "ANSWER " + " | ".join(parts)


def expected_output(body: dict[str, Any]) -> str:
    """The answer to the input ``body`` (a feeder's JSON) when every call succeeded."""
    if body["kind"] == "effects":
        return f"The result is {body['a'] + body['b']}."
    if body["kind"] == "slow":  # the provider echoes the last message: the input itself
        return f"The result is {json.dumps(body)}."
    return expected_react(body["ref"], body["rounds"])


#: The durable function whose calls' effect lines are keyed by input (SESSION#N), not by call id.
KEYED_BY_INPUT = "charge"

OPTIONS = ReActOptions(max_iterations=10)


class Mixed(Agent):
    """Dispatches on the input's kind (see the module docstring)."""

    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        req = json.loads(event.input)
        kind = req["kind"]
        if kind == "effects":
            await ctx.durable_execute_async(charge, req["key"], req["a"])
            ctx.send_event(ChatRequestEvent(model="llm", messages=[
                ChatMessage(content=json.dumps({"a": req["a"], "b": req["b"]}))]))
        elif kind == "react":
            llm = ctx.get_resource("rllm", ResourceType.CHAT_MODEL)
            value = await react_answer(llm, [ChatMessage(MessageRole.USER, event.input)], OPTIONS)
            ctx.send_event(OutputEvent(output=value))
        elif kind == "slow":
            ctx.send_event(ChatRequestEvent(model="slow", messages=[ChatMessage(content=event.input)]))
        elif kind == "sub":
            helper = ctx.get_resource("helper", ResourceType.AGENT)
            result = await helper.as_async_callable(ctx, event.input)
            ctx.send_event(OutputEvent(output=result.result if result.success
                                       else f"SUBFAIL {result.exception}"))
        else:
            ctx.send_event(OutputEvent(output=f"unknown kind {kind}"))

    @action(ChatResponseEvent)
    def reply(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def _helper() -> ReActAgent:
    from eddies.connectors.models.scripted import ScriptedChatModel

    sub = ReActAgent("helper", model="hllm", options=OPTIONS)
    for fn in (book, ship, notify):
        sub.add_resource(fn.__name__, ResourceType.TOOL, _tool(fn))
    sub.add_resource("hoffline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(rounds_model))
    sub.add_resource("hllm", ResourceType.CHAT_MODEL,
                     ChatModelSetup("hoffline", tools=["book", "ship", "notify"]))
    return sub


def _named_model() -> type[Any]:
    """litellm's model connection, its requests named (see PROC_ENV)."""
    from eddies.connectors.models.litellm import LiteLLMChatModel

    class NamedModel(LiteLLMChatModel):
        async def chat_async(self, messages: list[ChatMessage], **arguments: Any) -> ChatMessage:
            caller = f"{os.environ.get(PROC_ENV, '')}@{time.time():.4f}"
            return await super().chat_async(messages, **arguments, extra_headers={CALLER_HEADER: caller})

    return NamedModel


def mixed_agent() -> Mixed:
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = Mixed("mixed")
    agent.add_resource("add", ResourceType.TOOL, _tool(add))
    for fn in (book, ship, notify):
        agent.add_resource(fn.__name__, ResourceType.TOOL, _tool(fn))
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    agent.add_resource("roffline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(rounds_model))
    agent.add_resource("rllm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("roffline", tools=["book", "ship", "notify"]))
    agent.add_resource("helper", ResourceType.AGENT, _helper())
    base = os.environ.get(PROVIDER_ENV)
    if base:  # only then: a worker would warm litellm (seconds of CPU) at every restart
        agent.add_resource("provider", ResourceType.CHAT_MODEL_CONNECTION,
                           _named_model()(api_base=base, api_key="chaos"))
        agent.add_resource("slow", ResourceType.CHAT_MODEL,
                           ChatModelSetup("provider", model=PROVIDER_MODEL))
    return agent
