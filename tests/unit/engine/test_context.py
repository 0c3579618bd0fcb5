"""What actions see: memories, resources, ids, limits."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    CustomEvent,
    InputEvent,
    LocalRunner,
    OutputEvent,
    ResourceType,
    action,
)
from eddies.connectors.local import RunFailedError
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.events import ChatRequestEvent, ErrorInfo, Event
from tests.agents import add


class Counter(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        n = ctx.short_term_memory.get("n", 0) + 1
        ctx.short_term_memory.set("n", n)
        assert ctx.sensory_memory.get("scratch") is None  # cleared at the end of every run
        ctx.sensory_memory.set("scratch", n)
        ctx.send_event(CustomEvent("counted", {"n": n}))

    @action("counted")
    def finish(event: CustomEvent, ctx: Any) -> None:
        assert ctx.sensory_memory.get("scratch") == event.attributes["n"]
        ctx.send_event(OutputEvent(output=[ctx.session_id, ctx.run_number, event.attributes["n"]]))


def test_short_term_memory_persists_and_sensory_memory_is_per_run() -> None:
    runner = LocalRunner(Counter())
    assert runner.run([("s1", 0), ("s1", 0), ("s2", 0)]) == [["s1", 1, 1], ["s1", 2, 2], ["s2", 1, 1]]


def charge(x: int) -> int:
    return x


class WritesBeforeSuspending(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        # Runs twice (suspends at the call, then replays); the write must count once.
        ctx.short_term_memory.set("writes", ctx.short_term_memory.get("writes", 0) + 1)
        ctx.metrics.inc("starts")
        ctx.durable_execute(charge, 1)
        ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("writes")))


def test_effects_of_a_suspended_execution_are_discarded() -> None:
    seen: list[tuple[str, str, str, float]] = []
    runner = LocalRunner(WritesBeforeSuspending())
    runner.machine._metrics = lambda *m: seen.append(m)
    assert runner.run([("s1", 0), ("s1", 0)]) == [1, 2]
    assert seen == [("counter", "start.starts", "s1", 1)] * 2


class Children(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=[ctx.next_session_id(), ctx.next_session_id()]))


def test_child_session_ids_are_deterministic() -> None:
    first = LocalRunner(Children()).run([("s1", 0), ("s1", 0)])
    assert first == LocalRunner(Children()).run([("s1", 0), ("s1", 0)])
    assert first[0] == ["s1.r1.i1.s1", "s1.r1.i1.s2"]
    assert first[1][0] == "s1.r2.i1.s1"


class Loop(Agent):
    @action(InputEvent, "again")
    def start(event: Any, ctx: Any) -> None:
        ctx.send_event(CustomEvent("again", {}))


def test_a_looping_agent_hits_max_events_per_run() -> None:
    with pytest.raises(RunFailedError, match="max_events_per_run=50"):
        LocalRunner(Loop("loop", config={"max_events_per_run": 50})).run([("s1", 0)])


class Bad(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        raise KeyError("missing thing")


def test_an_action_exception_fails_the_run_and_the_session_goes_on() -> None:
    runner = LocalRunner(Bad())
    with pytest.raises(RunFailedError, match="KeyError"):
        runner.run([("s1", 0)])
    assert runner.states["s1"].idle
    with pytest.raises(RunFailedError):
        runner.run([("s1", 0)])
    assert [o.run for o in runner.outputs] == [1, 2]


class UsesHandles(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        total = ctx.get_resource("add", ResourceType.TOOL).call(a=event.input, b=1)
        reply = ctx.get_resource("llm", ResourceType.CHAT_MODEL).chat(
            [ChatMessage(content=f"total {total}")])
        ctx.send_event(OutputEvent(output=[total, reply.content, ctx.get_resource("p")]))


def test_resource_handles_make_durable_calls() -> None:
    model = ScriptedChatModel()
    agent = (UsesHandles()
             .add_resource("add", ResourceType.TOOL, add)
             .add_resource("p", ResourceType.PROMPT, "be brief")
             .add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model)
             .add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn")))
    runner = LocalRunner(agent)
    assert runner.run([("s1", 41)]) == [[42, "echo: total 42", "be brief"]]
    assert model.calls == 1
    with pytest.raises(KeyError, match="not a chat_model"):
        runner.machine.plan.resource("p", ResourceType.CHAT_MODEL)


class Typed(Event):
    pass


def test_memory_rejects_values_that_are_not_json() -> None:
    class Stores(Agent):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            ctx.short_term_memory.set("x", object())

    with pytest.raises(RunFailedError, match=r"short_term_memory\['x'\]"):
        LocalRunner(Stores()).run([("s1", 0)])


def test_an_event_that_cannot_be_written_fails_the_action_that_sends_it() -> None:
    class SendsBytes(Agent):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            ctx.send_event(OutputEvent(output=b"raw"))

    with pytest.raises(RunFailedError, match="EncodingError.*OutputEvent.output"):
        LocalRunner(SendsBytes()).run([("s1", 0)])


@pytest.mark.parametrize(
    ("event", "where"),
    [
        (ChatRequestEvent(model="llm", messages=[{"role": "user"}]),
         r"ChatRequestEvent\.messages\[0\]: expected ChatMessage, got dict"),  # type: ignore[list-item]
        (ChatRequestEvent(model="llm", messages=[ChatMessage(extra_args={"x": object()})]),
         "ChatMessage.extra_args"),
        (ChatRequestEvent(model=123), r"ChatRequestEvent\.model: expected string, got int"),  # type: ignore[arg-type]
        (OutputEvent("x", ErrorInfo(1, "m")), r"OutputEvent\.error\.type: expected string"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_builtin_event_fails_the_action_that_sends_it(event: Any, where: str) -> None:
    class SendsIt(Agent):
        @action(InputEvent)
        def start(_event: InputEvent, ctx: Any) -> None:
            ctx.send_event(event)

    with pytest.raises(RunFailedError, match=f"EncodingError.*{where}"):
        LocalRunner(SendsIt()).run([("s1", 0)])


class _OddModel:
    """A chat model connection whose replies do not fit ChatMessage's schema."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply

    def chat(self, messages: Any, **_: Any) -> dict[str, Any]:
        return self.reply


@pytest.mark.parametrize(
    ("reply", "where"),
    [
        ({"role": "assistant", "content": 42}, r"content: expected text, got int"),
        ({"role": "assistant", "content": None,
          "tool_calls": [{"id": 7, "name": "add", "arguments": {}}]},
         r"tool_calls\[0\]: id and name must be text, got int and str"),
        ({"role": "assistant", "content": "", "tool_call_id": 3}, r"tool_call_id: expected text"),
    ],
)
def test_a_model_reply_that_does_not_fit_the_schema_fails_the_chat_action(
        reply: dict[str, Any], where: str) -> None:
    from eddies.demo import calculator_agent
    from eddies.engine import Journal

    runner = LocalRunner(calculator_agent(_OddModel(reply)), journal=Journal(serialize=True))
    with pytest.raises(RunFailedError, match=f"TypeError: chat model reply: {where}"):
        runner.run([("s1", '{"a": 1, "b": 2}')])


def test_null_content_beside_tool_calls_reads_as_empty_text() -> None:
    from eddies.engine.calls import message_from_value

    msg = message_from_value({"role": "assistant", "content": None,
                              "tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 1}}]})
    assert msg.content == "" and msg.tool_calls[0].id == "c1"
