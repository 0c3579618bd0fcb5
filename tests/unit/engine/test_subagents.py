"""Internal sub-agents: an AGENT resource runs in a child scope of the caller's session;
the caller gets a Result (never an exception); the child's events carry its scope and
reach none of the caller's actions, its OutputEvent answers the call (and is no output of
the session); memory: the child reads its caller's, its writes stay in its scope; cycles
and unmarked agents are refused when the plan is compiled; calls in parallel, with a
timeout that cancels the child; nesting; crash and recovery mid-call."""

from __future__ import annotations

from typing import Any

import pytest

from eddies import (
    Agent,
    ChatModelSetup,
    CustomEvent,
    InputEvent,
    LocalRunner,
    OutputEvent,
    ReActAgent,
    ResourceType,
    action,
)
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import AgentPlan, PlanError, SessionState
from eddies.events import SubagentCallEvent, SubagentResultEvent


class Reviewer(Agent):
    """Reviews what it is given; remembers how many reviews it did (in its own scope)."""

    subagent_compatible = True
    description = "Reviews a text."

    @action(InputEvent)
    def review(event: InputEvent, ctx: Any) -> None:
        seen = ctx.short_term_memory.get("reviews", 0) + 1
        ctx.short_term_memory.set("reviews", seen)
        ctx.send_event(CustomEvent(type_name="Note", attributes={"by": "reviewer"}))
        owner = ctx.short_term_memory.get("owner", "nobody")  # the caller's, read-only
        if event.input == "boom":
            raise ValueError("cannot review that")
        if event.input == "slow":
            ctx.sleep(60)
        ctx.send_event(OutputEvent(output=f"{event.input}: fine (review {seen} for {owner})"))


class Root(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.short_term_memory.set("owner", "root")
        result = ctx.get_resource("reviewer", ResourceType.AGENT).call(ctx, event.input)
        ctx.send_event(OutputEvent(output={
            "ok": result.success, "said": result.result,
            "error": None if result.exception is None else type(result.exception).__name__,
            "reviews_seen_by_root": ctx.short_term_memory.get("reviews")}))

    @action("Note")
    def note(event: Any, ctx: Any) -> None:  # the child's Note must never come here
        ctx.send_event(OutputEvent(output="the root saw the child's note"))


def root() -> Root:
    agent = Root("root")
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    return agent


def test_a_root_agent_delegates_to_an_internal_reviewer() -> None:
    runner = LocalRunner(root())
    [out] = runner.run([("s1", "draft")])
    # The root's own write is not in yet: like any write, it counts once its action completes.
    assert out == {"ok": True, "said": "draft: fine (review 1 for nobody)", "error": None,
                   "reviews_seen_by_root": None}
    types = [(e.type, e.scope) for e in runner.history]
    child = ("reviewer@i1c0",)
    assert [o.payload for o in runner.outputs] == [runner.history[-1].payload]  # the child's is no output
    assert types == [("InputEvent", ()), ("SubagentCallEvent", ()), ("InputEvent", child),
                     ("Note", child), ("OutputEvent", child), ("SubagentResultEvent", ()),
                     ("OutputEvent", ())]
    call, result = (e.payload for e in runner.history if e.type.startswith("Subagent"))
    assert isinstance(call, SubagentCallEvent) and isinstance(result, SubagentResultEvent)
    assert (call.agent, call.input, result.call_id) == ("reviewer", "draft", call.call_id)
    assert [e.agent for e in runner.history if e.scope] == ["reviewer"] * 3


def test_a_failed_child_is_a_failed_result_and_the_caller_goes_on() -> None:
    [out] = LocalRunner(root()).run([("s1", "boom")])
    assert out["ok"] is False and out["error"] == "DurableCallError[ValueError]"


def test_a_child_memory_stays_in_its_scope_unless_the_caller_names_the_sub_session() -> None:
    runner = LocalRunner(root())
    first, second = runner.run([("s1", "a"), ("s1", "b")])
    assert first["said"] == "a: fine (review 1 for nobody)"
    assert second["said"] == "b: fine (review 1 for root)"  # reads the caller's; a new scope each call
    assert runner.states["s1"].memory == {"owner": '"root"'}

    class Regular(Agent):
        @action(InputEvent)
        def start(event: InputEvent, ctx: Any) -> None:
            reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
            result = reviewer.call(ctx, event.input, session_id="reviews-of-s1")
            ctx.send_event(OutputEvent(output=result.result))

    agent = Regular("regular")
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    runner = LocalRunner(agent)
    assert runner.run([("s1", "a"), ("s1", "b")]) == ["a: fine (review 1 for nobody)",
                                                      "b: fine (review 2 for nobody)"]
    assert runner.states["s1"].memory == {}
    assert runner.states["s1"].child_memory == {"reviews-of-s1": {"reviews": "2"}}


def test_a_cycle_and_an_unmarked_agent_are_refused_at_compile_time() -> None:
    a, b = Reviewer("a"), Reviewer("b")
    a.add_resource("b", ResourceType.AGENT, b)
    b.add_resource("a", ResourceType.AGENT, a)
    top = Root("top")
    top.add_resource("reviewer", ResourceType.AGENT, a)
    with pytest.raises(PlanError, match=r"resource 'a': sub-agents call each other in a cycle: a -> b -> a"):
        AgentPlan.compile(top)
    plain = Root("plain")
    plain.add_resource("reviewer", ResourceType.AGENT, Agent("helper"))
    with pytest.raises(PlanError, match=r"resource 'reviewer': agent 'helper' is not marked as a sub-agent"):
        AgentPlan.compile(plain)
    assert AgentPlan.compile(Root("ok", config={}).add_resource(  # type: ignore[union-attr]
        "reviewer", ResourceType.AGENT, Agent("helper", subagent_compatible=True))).subagents


class Fanout(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
        outcomes = await ctx.durable_execute_all_async([
            reviewer.as_async_callable(ctx, p, timeout=5) for p in ("one", "slow", "three")])
        ctx.send_event(OutputEvent(output=[
            o.value.result if o.value.success else type(o.value.exception).__name__ for o in outcomes]))


def test_three_in_parallel_with_one_timing_out_give_results_in_call_order() -> None:
    agent = Fanout("fanout")
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    runner = LocalRunner(agent)
    [out] = runner.run([("s1", "go")])
    assert out == ["one: fine (review 1 for nobody)", "SubagentTimeoutError",
                   "three: fine (review 1 for nobody)"]
    [timed_out] = [e.payload for e in runner.history if isinstance(e.payload, SubagentResultEvent)
                   and e.payload.error is not None]
    assert timed_out.error.type == "SubagentTimeoutError"
    assert "did not answer within 5000 ms" in timed_out.error.message
    # The slow child's own timer (due 60 s on) was abandoned: nothing it did came after.
    slow_scope = next(e.scope for e in runner.history if e.type == "InputEvent" and e.payload.input == "slow")
    last = max(i for i, e in enumerate(runner.history) if e.scope == slow_scope)
    assert runner.history[last].type == "DurableCallRequest"
    assert runner.states["s1"].run is None  # the run ended, nothing left waiting


class Middle(Agent):
    """Asks the reviewer, and passes on its answer: a sub-agent with a sub-agent."""

    subagent_compatible = True

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        result = ctx.get_resource("reviewer", ResourceType.AGENT).call(ctx, f"{event.input}+")
        ctx.short_term_memory.set("owner", "middle")
        ctx.send_event(OutputEvent(output=f"middle says: {result.result}"))


def test_a_sub_agent_two_levels_deep() -> None:
    middle = Middle("middle")
    middle.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    top = Root("top")
    top.add_resource("reviewer", ResourceType.AGENT, middle)
    runner = LocalRunner(top)
    first, second = runner.run([("s1", "x"), ("s1", "y")])
    assert first["said"] == "middle says: x+: fine (review 1 for nobody)"
    assert second["said"] == "middle says: y+: fine (review 1 for root)"
    scopes = {e.scope for e in runner.history}
    assert ("reviewer@i1c0", "reviewer@i2c0") in scopes


def react_reviewer() -> ReActAgent:
    """A ReAct agent as a sub-agent: its model calls (durable, through the executor) use
    its own resources, and its tool is the caller's (inherited)."""
    def reply(messages: Any, tools: Any = None, **_: Any) -> Any:
        from eddies.events import ChatMessage, MessageRole, ToolCall

        PERFORMED.append("model")
        if messages[-1].role is MessageRole.TOOL:
            return ChatMessage(MessageRole.ASSISTANT, f"counted {messages[-1].content}")
        asked = {"text": messages[-1].content}
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("t1", "count", asked)])

    child = ReActAgent("counter", model="llm")
    child.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(reply))
    child.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["count"]))
    return child


PERFORMED: list[str] = []


def count(text: str) -> int:
    """Count the letters."""
    PERFORMED.append("tool")
    return len(text)


def test_a_react_agent_as_a_sub_agent_and_a_crash_in_the_middle_of_its_call() -> None:
    PERFORMED.clear()
    top = Root("top")
    top.add_resource("count", ResourceType.TOOL, count)
    top.add_resource("reviewer", ResourceType.AGENT, react_reviewer())
    runner = LocalRunner(top, snapshot_every=1)
    runner.submit("s1", "hello")
    for _ in range(6):  # into the child's loop
        runner.step()
    assert runner.states["s1"].run is not None and runner.states["s1"].run.frames
    saved = runner.states["s1"]
    assert SessionState.from_bytes(saved.to_bytes()) == saved  # frames are plain data
    runner.crash()
    runner.recover()
    runner.run_until_idle()
    [out] = [o.payload.output for o in runner.outputs]
    assert out["said"] == "counted 5" and out["ok"] is True
    assert PERFORMED == ["model", "tool", "model"]  # each of the child's calls once


def chooser(messages: Any, tools: Any = None, **_: Any) -> Any:
    """The root's model asks a named sub-agent and general-purpose at once, then answers
    with what they said; as general-purpose (its own system prompt), it answers directly."""
    from eddies.engine.react import GENERAL_PURPOSE_PROMPT
    from eddies.events import ChatMessage, MessageRole, ToolCall

    if messages[0].content == GENERAL_PURPOSE_PROMPT:
        offered = sorted(t.name for t in tools or [])
        return ChatMessage(MessageRole.ASSISTANT, f"gp did {messages[-1].content!r} with {offered}")
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if results:
        return ChatMessage(MessageRole.ASSISTANT, " | ".join(results))
    return ChatMessage(MessageRole.ASSISTANT, "", [
        ToolCall("a", "reviewer", {"prompt": "the plan"}),
        ToolCall("b", "general-purpose", {"prompt": "sum it up"}),
        ToolCall("c", "reviewer", {"wrong": 1})])


def test_the_model_calls_a_named_sub_agent_and_general_purpose_as_tools() -> None:
    agent = ReActAgent("boss", model="llm", prompt="You delegate.")
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(chooser))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", tools=["reviewer", "general-purpose", "count"]))
    agent.add_resource("count", ResourceType.TOOL, count)
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    runner = LocalRunner(agent)
    specs = {s.name: s for s in runner.plan.tool_specs("llm")}
    assert specs["reviewer"].description == "Reviews a text."
    assert specs["general-purpose"].parameters["required"] == ["prompt"]
    [out] = runner.run([("s1", "go")])
    reviewed, gp, bad = out.split(" | ")
    assert reviewed == '"the plan: fine (review 1 for nobody)"'
    assert gp == '"gp did \'sum it up\' with [\'count\']"'  # its caller's tools, no sub-agents
    assert bad == "error: ToolArgumentError: tool 'reviewer': prompt: expected text"
    assert {e.scope[0].split("@")[0] for e in runner.history if e.scope} == {"reviewer", "general-purpose"}


STARTED: list[str] = []


def step(name: str) -> str:
    """A durable function that notes when it runs."""
    STARTED.append(name)
    return name.upper()


class Bounded(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        from eddies import DurableCall

        outcomes = await ctx.durable_execute_all_async(
            [DurableCall(step, (n,)) for n in ("a", "b", "c", "d", "e")], max_parallel=2)
        ctx.send_event(OutputEvent(output=[o.value for o in outcomes]))


def in_flight(history: list[Any]) -> int:
    """The most calls of the run that were ever asked and not yet answered at once."""
    from eddies.events import DurableCallRequest, DurableCallResult

    open_calls: set[str] = set()
    most = 0
    for e in history:
        if isinstance(e.payload, DurableCallRequest) and e.payload.kind.value == "FUNCTION":
            open_calls.add(e.payload.call_id)
        elif isinstance(e.payload, DurableCallResult):
            open_calls.discard(e.payload.call_id)
        most = max(most, len(open_calls))
    return most


def test_a_bounded_batch_keeps_at_most_max_parallel_in_flight_and_survives_a_crash() -> None:
    STARTED.clear()
    runner = LocalRunner(Bounded("bounded"))
    assert runner.run([("s1", "go")]) == [["A", "B", "C", "D", "E"]]
    assert in_flight(runner.history) == 2 and STARTED == ["a", "b", "c", "d", "e"]
    STARTED.clear()
    crashed = LocalRunner(Bounded("bounded"), snapshot_every=1)
    crashed.submit("s1", "go")
    for _ in range(7):
        crashed.step()
    crashed.crash()
    crashed.recover()
    crashed.run_until_idle()
    assert [o.payload.output for o in crashed.outputs] == [["A", "B", "C", "D", "E"]]
    assert sorted(STARTED) == ["a", "b", "c", "d", "e"]  # none twice


class Unbounded(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        await ctx.durable_execute_all_async([], max_parallel=0)


def test_a_batch_bound_that_is_no_positive_integer_fails_the_run() -> None:
    from eddies.connectors.local.runner import RunFailedError

    with pytest.raises(RunFailedError, match="max_parallel must be a positive integer, got 0"):
        LocalRunner(Unbounded("u")).run([("s1", "go")])


class Race(Agent):
    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
        won, outcome = await ctx.durable_execute_first_async(
            [reviewer.as_async_callable(ctx, "slow"), reviewer.as_async_callable(ctx, "quick")])
        ctx.send_event(OutputEvent(output=[won, outcome.value.result]))


def test_the_first_to_finish_wins_and_the_others_are_cancelled() -> None:
    agent = Race("race")
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    runner = LocalRunner(agent)
    assert runner.run([("s1", "go")]) == [[1, "quick: fine (review 1 for nobody)"]]
    answers = [e.payload for e in runner.history if isinstance(e.payload, SubagentResultEvent)]
    assert [(a.error.type if a.error else "ok") for a in answers] == ["ok", "DurableCallAbandonedError"]
    slow = next(e.scope for e in runner.history if e.type == "InputEvent" and e.payload.input == "slow")
    assert not [e for e in runner.history if e.scope == slow and e.type == "DurableCallResult"]
    assert runner.states["s1"].run is None


def test_a_cancelled_child_names_its_held_timer_for_the_runner_to_drop() -> None:
    agent = Fanout("fanout")
    agent.add_resource("reviewer", ResourceType.AGENT, Reviewer("reviewer"))
    runner = LocalRunner(agent)
    runner.submit("s1", "go")
    dropped: set[tuple[str, int]] = set()
    while runner.step():
        dropped.update(runner.machine.dropped)  # (as it is after the step's apply, if any)
    [(cid, attempt)] = dropped
    [sleep] = [e.payload for e in runner.history if e.type == "DurableCallRequest"
               and e.payload.target == "sleep"]
    assert (cid, attempt) == (sleep.call_id, 1) and "/reviewer@" in cid


class Jotter(Agent):
    """Writes its sensory memory, and reads it back in a second action of its run."""

    subagent_compatible = True

    @action(InputEvent)
    def jot(event: InputEvent, ctx: Any) -> None:
        ctx.sensory_memory.set("note", f"child saw {event.input}")
        ctx.send_event(CustomEvent(type_name="Jotted"))

    @action("Jotted")
    def answer(event: Any, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.sensory_memory.get("note")))


class Reader(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        ctx.sensory_memory.set("note", "the parent's own")
        ctx.send_event(CustomEvent(type_name="Ask"))

    @action("Ask")
    def ask(event: Any, ctx: Any) -> None:
        said = ctx.get_resource("jotter", ResourceType.AGENT).call(ctx, "x").result
        ctx.send_event(OutputEvent(output=[said, ctx.sensory_memory.get("note")]))


def test_sensory_memory_is_per_scope() -> None:
    agent = Reader("reader")
    agent.add_resource("jotter", ResourceType.AGENT, Jotter("jotter"))
    assert LocalRunner(agent).run([("s1", "go")]) == [["child saw x", "the parent's own"]]


def broken_model(messages: Any, tools: Any = None, **_: Any) -> Any:
    raise ConnectionRefusedError("the model is down")


def test_a_failing_react_sub_agent_under_fail_is_a_failed_result_not_a_halt() -> None:
    child = ReActAgent("counter", model="llm", config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    child.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(broken_model))
    child.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    top = Root("top")
    top.add_resource("reviewer", ResourceType.AGENT, child)
    runner = LocalRunner(top)
    [out] = runner.run([("s1", "hello")])
    assert out["ok"] is False and out["error"] == "DurableCallError"
    assert runner.states["s1"].run is None  # nothing waits to be resumed
    assert not [e for e in runner.history if e.type == "OutputEvent" and not e.scope
                and e.payload.error is not None]


def test_a_session_id_with_a_slash_or_a_colon_is_no_scope() -> None:
    """Call ids join the session id and a sub-agent's scope with '/': a session id that
    holds '/' (or ':') itself still has its calls answered, in its scopes or not."""
    from tests.agents import react_agent

    for session in ("user/42", "a:b/c@d"):
        runner = LocalRunner(root())
        [out] = runner.run([(session, "draft")])
        assert out["said"] == "draft: fine (review 1 for nobody)"
        assert len(LocalRunner(react_agent()).run([(session, "q")])) == 1
        runner.machine.evict(session)
        assert runner.machine.cached == 0
