"""Every built-in agent under randomized interleavings: several sessions with several
inputs each, fed while runs are under way; signals and approvals answered; the runner's
queued work (inputs, call results, signals) done in a random order
(``LocalRunner(agent, interleave=random.Random(seed))``); the machine's in-memory caches
evicted at random (the next result re-executes the action from its journal: a replay),
and now and then a crash and a recovery from the journal, the queued inputs and signals
re-sent with their event ids (as records a new owner reads again). Whatever the order, no
run may fail with a JournalMismatchError (an action that asked another call when it was
re-executed), no session may halt on a fault, no exception may escape, and every input
gets exactly one output; where an agent's answer depends on its input alone, it is the
answer of an uninterrupted, in-order run.

The agents: ReAct (the built-in chat action's loop, ``ReActAgent``'s), reflection, RAG,
memory sets (a sync action that remembers a fact and sleeps, ``async def`` ones that note
and recall, a compaction model, a retention, the set as a model's tool; users' memories
written from several sessions at once), skills, sub-agents, and approvals, timers and
signals.

``make test`` runs a fixed set of seeds per agent (``SEEDS``: under a minute in all). A
longer run takes seeds 0..N-1 of each agent::

    EDDIES_INTERLEAVING_SEEDS=2000 .venv/bin/pytest tests/unit/connectors/test_interleavings.py -x -q

A failure names its agent and seed (``...[memory-1234]``): that test id, with the same
``EDDIES_INTERLEAVING_SEEDS``, runs it again the same way.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pytest

from eddies import (
    Agent,
    ApprovalRequestEvent,
    ChatMessage,
    ChatModelSetup,
    EmbeddedVectorStore,
    EmbeddingModelSetup,
    Event,
    InputEvent,
    LocalRunner,
    MemorySetSetup,
    MessageRole,
    OfflineEmbeddingModel,
    OutputEvent,
    ReActAgent,
    ReActOptions,
    ResourceType,
    ScriptedChatModel,
    Skills,
    ToolCall,
    action,
)
from eddies.demo import planner_model, rag_agent, tagline_agent, travel_agent
from eddies.engine import approval
from eddies.events import AgentEvent
from tests.agents import (
    delegating_agent,
    react_agent,
    react_calculator,
    react_loop_agent,
    reflect_agent,
    shop_agent,
)
from tests.integration.agents import fanout

#: The seeds ``make test`` runs, per agent.
SEEDS = range(int(os.environ.get("EDDIES_INTERLEAVING_SEEDS", "40")))
#: The most steps a seed may take (a runaway is a failure, not a hang).
MAX_STEPS = 200_000
#: Per step of the driver: how likely it sends the next input or signal, evicts the
#: machine's caches of some sessions, or crashes the runner (at most CRASHES times).
SEND, EVICT, CRASH, CRASHES = 0.1, 0.05, 0.002, 2
SKILLS = Path(__file__).resolve().parents[2] / "skills"


# --- the agents ---------------------------------------------------------------------------

def _planner() -> ReActAgent:
    """The demo's trip planner (eddies.demo planner_agent), its travel helper without the MCP
    time server: a ReAct loop and a reflection loop as sub-agents, called in parallel."""
    travel = travel_agent(clock=False)
    travel.description = "Tells a traveller what to pack for the cities they name."
    tagline = tagline_agent()
    tagline.description = "Writes a short tagline, reviewed until a critic approves it."
    agent = ReActAgent("planner", model="llm", options=ReActOptions(max_iterations=3))
    agent.add_resource("travel", ResourceType.AGENT, travel)
    agent.add_resource("tagline", ResourceType.AGENT, tagline)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(planner_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["travel", "tagline"]))
    return agent


@dataclass(slots=True)
class InterleavedRecall(Event):
    """Recall the ``user``'s memories nearest to ``query`` (sent by Remembers.take)."""

    event_type: ClassVar[str] = "InterleavedRecall"
    user: str = ""
    query: str = ""


@dataclass(slots=True)
class InterleavedNote(Event):
    """Note ``text`` in the ``user``'s memories, then sleep ``sleep_s`` (async)."""

    event_type: ClassVar[str] = "InterleavedNote"
    user: str = ""
    text: str = ""
    sleep_s: float = 0


class Remembers(Agent):
    """``{"user", "remember", "sleep_s"}``: a sync action adds the fact to the user's memory
    set, sleeps, then asks for a recall; ``{"user", "note", "sleep_s"}``: an ``async def``
    action adds it and sleeps, then answers with the user's items; ``{"user", "ask"}``: a
    recall. A recall (``async def``) answers with the texts nearest to its query."""

    @action(InputEvent)
    def take(event: InputEvent, ctx: Any) -> None:
        asked = event.input
        if "note" in asked:
            ctx.send_event(InterleavedNote(asked["user"], asked["note"], asked["sleep_s"]))
            return
        if "remember" in asked:
            facts = ctx.long_term_memory.get_memory_set("facts", key=asked["user"])
            facts.add(asked["remember"], metadatas={"session": ctx.session_id})
            ctx.sleep(asked["sleep_s"])
        ctx.send_event(InterleavedRecall(asked["user"], asked.get("ask") or asked["remember"]))

    @action(InterleavedNote)
    async def note(event: InterleavedNote, ctx: Any) -> None:
        facts = ctx.long_term_memory.get_memory_set("facts", key=event.user)
        ids = await facts.add_async(event.text)
        await ctx.sleep_async(event.sleep_s)
        kept = await facts.get_async(ids)
        ctx.send_event(OutputEvent(output=[d.content for d in kept]))

    @action(InterleavedRecall)
    async def recall(event: InterleavedRecall, ctx: Any) -> None:
        found = await ctx.long_term_memory.get_memory_set("facts", key=event.user).search_async(
            event.query, limit=3)
        ctx.send_event(OutputEvent(output=[d.content for d in found]))


def compaction(messages: list[ChatMessage], tools: list[Any]) -> str:
    """A compaction model: a new fact about the same thing (the same first three words)
    updates the memory; the same text is nothing new; anything else is added."""
    asked = json.loads(messages[-1].content)
    new = asked["new"]
    for memory in asked["memories"]:
        if memory["text"] == new:
            return json.dumps({"action": "none", "id": memory["id"]})
        if memory["text"].split()[:3] == new.split()[:3]:
            return json.dumps({"action": "update", "id": memory["id"], "text": new})
    return json.dumps({"action": "add"})


def _memory(agent: Agent, **setup: Any) -> Agent:
    """``agent`` with memory set ``facts`` (and ``setup``) on a new embedded store."""
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, EmbeddedVectorStore(embedding_model="emb"))
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs", **setup))
    return agent


def remembers() -> Agent:
    """:class:`Remembers`, its set kept 30 days and compacted by :func:`compaction`."""
    agent = Remembers("remembers")
    agent.add_resource("merger", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(compaction))
    agent.add_resource("compactor", ResourceType.CHAT_MODEL, ChatModelSetup("merger"))
    return _memory(agent, retention=timedelta(days=30), compaction_model="compactor", similarity=0.5)


def keeps_and_recalls(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """A model that remembers what it is told and recalls it, in one use of its memory
    tool, then answers with what the tool said."""
    if messages[-1].role is MessageRole.TOOL:
        return ChatMessage(MessageRole.ASSISTANT, f"memory: {messages[-1].content}")
    said = json.loads(messages[-1].content)["say"]
    return ChatMessage(MessageRole.ASSISTANT, "", [
        ToolCall("m", "facts", {"remember": [said], "recall": said})])


def memory_tool() -> Agent:
    """A ReActAgent whose model uses memory set ``facts`` (the input's user's, kept a
    day) as a tool."""
    agent = ReActAgent("concierge", model="llm")
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(keeps_and_recalls))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["facts"]))
    return _memory(agent, key="input:user", retention=timedelta(days=1))


def skill_user(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """A model that loads the trip-budget skill, reads its reference with bash, and
    answers with what it read."""
    seen = [m.content for m in messages if m.role is MessageRole.TOOL]
    if not seen:
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("1", "load_skill", {"name": "trip-budget"})])
    if len(seen) == 1:
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall("2", "bash", {"command": "cat skills/trip-budget/reference.md"}),
            ToolCall("3", "load_skill", {"name": "packing"})])
    asked = next(m.content for m in messages if m.role is MessageRole.USER)
    return ChatMessage(MessageRole.ASSISTANT, f"{asked} {json.loads(seen[1])['stdout']}")


def skills_agent() -> ReActAgent:
    """A ReActAgent with the skills of tests/skills and a bash that may run cat."""
    agent = ReActAgent("budget", model="llm")
    agent.add_resource("skills", ResourceType.SKILLS, Skills([SKILLS], allowed_commands=["cat"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(skill_user))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["skills"]))
    return agent


def react_shop() -> ReActAgent:
    """shop_agent's tools and model on ReActAgent's loop: a refund waits for approval
    beside a lookup that needs none."""
    agent = ReActAgent("shop-react", model="llm")
    for resource in shop_agent().resources:
        if resource.name != "llm":
            agent.add_resource(resource.name, resource.type, resource.obj)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["lookup", "refund"]))
    return agent


# --- the inputs ---------------------------------------------------------------------------

Inputs = dict[str, list[Any]]


def _sessions(rng: random.Random, make: Callable[[random.Random, int], Any],
              sessions: int = 3, most: int = 3) -> Inputs:
    """``sessions`` sessions of 1..``most`` inputs each (input i of ``make(rng, i)``)."""
    count = 0
    out: Inputs = {}
    for s in range(sessions):
        out[f"s{s}"] = []
        for _ in range(rng.randint(1, most)):
            out[f"s{s}"].append(make(rng, count))
            count += 1
    return out


def _pick(*choices: Any) -> Callable[[random.Random, int], Any]:
    return lambda rng, _: rng.choice(choices)


FRUITS = ["watermelon", "bananas", "figs"]


def _memory_input(rng: random.Random, n: int) -> Any:
    user = rng.choice(["alice", "bob"])
    kind = rng.choice(["remember", "note", "ask"])
    if kind == "ask":
        return {"user": user, "ask": "fruit"}
    fact = rng.choice([f"My favorite fruit is {rng.choice(FRUITS)}.", f"I like swimming {n}.",
                       "I am a vegetarian."])
    return {"user": user, kind: fact, "sleep_s": rng.choice([0.5, 2, 30])}


def _shop_input(rng: random.Random, n: int) -> Any:
    return rng.choice([
        "refund o-1", "look up and refund o-1",
        {"sleep_s": rng.choice([1, 45])},
        {"signal": f"go-{n}", "timeout_s": 3600},
        {"signal": f"never-{n}", "timeout_s": 5},  # no one sends it
    ])


# --- the cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """An agent, how its sessions' inputs are drawn, the errors a run of it may end with,
    and whether its answer depends on its input alone (then it must be the answer of an
    uninterrupted run of that input)."""

    agent: Callable[[], Agent]
    inputs: Callable[[random.Random], Inputs]
    errors: frozenset[str] = frozenset()
    by_input: bool = True


CASES: dict[str, Case] = {
    "react-chat": Case(react_agent, lambda rng: _sessions(rng, _pick("kafka", "flink"), most=2)),
    "react": Case(react_calculator, lambda rng: _sessions(rng, lambda r, n: r.choice([
        json.dumps({"a": n, "b": 2}), "loop until told", json.dumps({"a": 1, "b": n})])),
        errors=frozenset({"MaxIterationsError"})),
    "react-loop": Case(react_loop_agent, lambda rng: _sessions(rng, _pick("a", "b"), sessions=2, most=2)),
    "reflection": Case(reflect_agent, lambda rng: _sessions(rng, _pick(
        "write a poem", "unsure: a haiku", "never a limerick"))),
    "tagline": Case(tagline_agent, lambda rng: _sessions(rng, _pick(
        "Write a tagline for a bakery that opens at 5 am.",
        "Write a tagline for a library that never closes."))),
    "rag": Case(rag_agent, lambda rng: _sessions(rng, _pick(
        "Where can I sleep cheaply in Lisbon?", "What should I eat in Tokyo?", "Is Oslo expensive?"))),
    "subagents": Case(_planner, lambda rng: _sessions(rng, _pick(
        "Plan my trip to Tokyo.", "Plan my trip to Oslo.", "Plan a trip to the moon."), most=2)),
    "delegating": Case(delegating_agent, lambda rng: _sessions(rng, _pick("a draft", "the plan"))),
    "memory": Case(remembers, lambda rng: _sessions(rng, _memory_input, sessions=4, most=4),
                   by_input=False),
    "memory-tool": Case(memory_tool, lambda rng: _sessions(rng, lambda r, n: {
        "user": r.choice(["alice", "bob"]), "say": f"{r.choice(['I like', 'I hate'])} {r.choice(FRUITS)}"},
        sessions=3, most=3), by_input=False),
    "skills": Case(skills_agent, lambda rng: _sessions(rng, _pick("budget?", "taxes?"), most=2)),
    "subagent-timeouts": Case(fanout, lambda rng: _sessions(rng, _pick("go"), most=2)),
    "approvals": Case(shop_agent, lambda rng: _sessions(rng, _shop_input, most=4), by_input=False),
    "approvals-react": Case(react_shop, lambda rng: _sessions(rng, _pick(
        "refund o-1", "look up and refund o-1"), most=3), by_input=False),
}


# --- the driver ---------------------------------------------------------------------------

@dataclass
class Sent:
    """An input or a signal for ``session`` (kept to send it again after a crash)."""

    session: str
    event_id: str
    value: Any
    signal: str | None = None  # its name, for a signal
    timestamp: int = 0


@dataclass
class Drive:
    """What a seed did: the runner, what it sent, the approvals it gave."""

    runner: LocalRunner
    sent: list[Sent] = field(default_factory=list)
    approved: dict[str, bool] = field(default_factory=dict)  # by signal
    crashes: int = 0
    evictions: int = 0


def drive(case: Case, seed: int) -> Drive:
    """Run ``case`` under seed ``seed`` (see the module)."""
    rng = random.Random(seed)
    inputs = case.inputs(rng)
    runner = LocalRunner(case.agent(), interleave=random.Random(seed))
    # What to send, in a random order that keeps each session's inputs in theirs; a
    # signal an input waits for goes anywhere (before it: the session keeps it).
    plan: list[Sent] = []
    for sid, values in inputs.items():
        for n, value in enumerate(values, 1):
            at = max((i for i, p in enumerate(plan) if p.session == sid and p.signal is None), default=-1)
            plan.insert(rng.randint(at + 1, len(plan)), Sent(sid, f"{sid}:in{n}", value))
            if isinstance(value, dict) and str(value.get("signal")).startswith("go-"):
                plan.insert(rng.randint(0, len(plan)), Sent(
                    sid, f"{sid}:{value['signal']}", f"value of {value['signal']}", value["signal"]))
    done = Drive(runner)
    seen = clock = 0

    def send(item: Sent) -> None:
        if item.signal is None:
            runner.submit(item.session, item.value, event_id=item.event_id, timestamp=item.timestamp)
        else:
            runner.signal(item.session, item.signal, item.value, event_id=item.event_id,
                          timestamp=item.timestamp)

    for _ in range(MAX_STEPS):
        for ev in runner.history[seen:]:
            clock = max(clock, ev.timestamp)
            ask = ev.payload
            if isinstance(ask, ApprovalRequestEvent) and ask.signal not in done.approved:
                yes = done.approved[ask.signal] = rng.random() < 0.7
                answer = approval.answer(yes, "a test")
                plan.insert(rng.randint(0, len(plan)), Sent(
                    ev.session_id, f"{ev.session_id}:{ask.signal}", answer, ask.signal))
        seen = len(runner.history)
        roll = rng.random()
        if plan and (roll < SEND or not runner.has_work()):
            item = plan.pop(0)
            clock += 1
            item.timestamp = clock
            send(item)
            done.sent.append(item)
        elif roll < SEND + EVICT:
            sessions = sorted(runner.states)
            runner.machine.evict(*rng.sample(sessions, rng.randint(0, len(sessions))))
            done.evictions += 1
        elif roll < SEND + EVICT + CRASH and done.crashes < CRASHES:
            runner.crash()
            runner.recover()
            for item in done.sent:  # what was queued is lost: read again, same ids
                send(item)
            done.crashes += 1
        elif not runner.step() and not plan:
            return done
    raise AssertionError(f"still busy after {MAX_STEPS} steps")


def _value(event: AgentEvent) -> OutputEvent:
    payload = event.payload
    assert isinstance(payload, OutputEvent)
    return payload


def runs_of_inputs(runner: LocalRunner) -> dict[tuple[str, int], str]:
    """The input (its event id) that started each run, by (session, run)."""
    return {(ev.session_id, ev.run): ev.event_id for ev in runner.history
            if isinstance(ev.payload, InputEvent) and not ev.scope and ev.seq}


def outputs_by_input(runner: LocalRunner) -> dict[str, list[OutputEvent]]:
    """The outputs of each input (by its event id), from the runs the inputs started."""
    started = runs_of_inputs(runner)
    out: dict[str, list[OutputEvent]] = {eid: [] for eid in started.values()}
    for ev in runner.outputs:
        out.setdefault(started.get((ev.session_id, ev.run), f"{ev.session_id} run {ev.run}"),
                       []).append(_value(ev))
    return out


@cache
def answer_alone(name: str, value: str) -> Any:
    """What ``name``'s agent answers to the input ``value`` (JSON), alone and in order."""
    runner = LocalRunner(CASES[name].agent())
    runner.submit("alone", json.loads(value))
    runner.run_until_idle()
    [out] = runner.outputs
    payload = _value(out)
    return payload.output if payload.error is None else payload.error.type


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", list(CASES))
def test_any_interleaving_gives_each_input_one_output_and_no_journal_mismatch(name: str, seed: int) -> None:
    case = CASES[name]
    done = drive(case, seed)
    runner = done.runner
    faults = {sid: state.fault for sid, state in runner.states.items() if state.fault is not None}
    assert not faults, f"sessions halted on a fault: {faults}"
    errors = Counter(o.error.type for o in map(_value, runner.outputs) if o.error is not None)
    assert not errors.keys() - case.errors, f"runs failed: {errors}; {_errors(done)}"
    sent = {s.event_id: s for s in done.sent if s.signal is None}
    got = outputs_by_input(runner)
    assert sorted(got) == sorted(sent), "outputs of inputs never sent, or inputs without a run"
    several = {eid: outs for eid, outs in got.items() if len(outs) != 1}
    assert not several, f"inputs without exactly one output: {several}"
    for eid, [out] in got.items():
        value = sent[eid].value
        answer = out.output if out.error is None else out.error.type
        if case.by_input:
            assert answer == answer_alone(name, json.dumps(value)), (eid, value)
        elif name.startswith("approvals"):
            _check_shop(done, eid, value, answer)
        else:  # memories: only the user's own (another session may have updated one)
            user = value["user"]
            told = {t for s in done.sent if isinstance(s.value, dict) and s.value.get("user") == user
                    for t in (s.value.get("remember"), s.value.get("note"), s.value.get("say"))}
            assert set(_texts(answer)) <= told, (eid, answer, told)


def _texts(answer: Any) -> list[str]:
    """The memories in an answer: a list of them, or the memory tool's (in the model's)."""
    if isinstance(answer, list):
        return answer
    return [m["content"] for m in json.loads(answer.removeprefix("memory: "))["recalled"]]


def _errors(done: Drive) -> list[str]:
    return [f"{o.session_id} run {o.run}: {_value(o).error}" for o in done.runner.outputs
            if _value(o).error is not None][:3]


def _check_shop(done: Drive, eid: str, value: Any, answer: Any) -> None:
    """A signal's value, a sleep's length, a refund only if approved."""
    if isinstance(value, dict) and "signal" in value:
        sent = value["signal"].startswith("go-")
        assert answer == (f"value of {value['signal']}" if sent else "timeout"), (eid, answer)
    elif isinstance(value, dict):
        assert answer["slept"] == value["sleep_s"], (eid, answer)
    else:
        [(sid, run)] = [k for k, e in runs_of_inputs(done.runner).items() if e == eid]
        [yes] = [yes for signal, yes in done.approved.items()
                 if signal.startswith(f"{approval.PREFIX}{sid}:r{run}:")]
        assert ("refunded 5 on o-1" in answer) is yes, (eid, answer)
