"""Agents that integration tests run in worker subprocesses (importable by name).

Side effects are counted in the file named by ``TEST_EFFECTS`` (one line per
execution: kind, what, process id), so a test can tell whether a non-idempotent call ran
twice across processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from eddies import Agent, Event, InputEvent, OutputEvent, action
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.demo import Calculator, calculator_agent
from eddies.engine import ChatModelSetup, FunctionTool, ResourceType
from eddies.events import ChatMessage, ChatRequestEvent, ChatResponseEvent


def record_effect(kind: str, what: str) -> None:
    """Append one execution to the effects file (if the test named one)."""
    path = os.environ.get("TEST_EFFECTS")
    if path:
        # One write of one short line in append mode: whole lines even across processes.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{kind} {what} {os.getpid()}\n".encode())
        finally:
            os.close(fd)


def effect_delay() -> float:
    return float(os.environ.get("TEST_EFFECT_DELAY", "0"))


def counted_add(a: int, b: int) -> int:
    """Add two integers (a non-idempotent tool: each execution is recorded)."""
    record_effect("tool", f"{a}+{b}")
    time.sleep(effect_delay())
    return a + b


def charge(account: str, amount: int) -> str:
    """A non-idempotent function: each execution is recorded."""
    record_effect("fn", f"{account}/{amount}")
    time.sleep(effect_delay())
    return f"charged {account} {amount}"


def http_calculator() -> Calculator:
    """The calculator on litellm, talking to the test's OpenAI-compatible server, with a
    counted ``add`` tool."""
    conn = LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test")
    return calculator_agent(conn, model_name="openai/test-model", tool=counted_add)


class WordedCalculator(Calculator):
    """The calculator, its answers worded differently (a changed agent version whose calls
    are the same: only its outputs differ)."""

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=f"Answer: {event.response.content}"))


def worded_http_calculator() -> Calculator:
    """``http_calculator`` with :class:`WordedCalculator`'s answers."""
    agent = WordedCalculator("calculator")
    agent.resources = list(http_calculator().resources)
    return agent


def approving_calculator() -> Calculator:
    """``http_calculator`` whose ``add`` needs a person's approval, within 30 s."""
    conn = LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test")
    tool = FunctionTool(counted_add, name="add", requires_approval=True, approval_timeout_ms=30_000)
    return calculator_agent(conn, model_name="openai/test-model", tool=tool)


def react_http() -> Agent:
    """A ReActAgent on litellm (the test's OpenAI-compatible server) with the counted
    ``add`` tool; a failed model call (not retried) halts the session (FAIL)."""
    from eddies import ReActAgent

    agent = ReActAgent("react-http", model="llm", config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    agent.add_resource("add", ResourceType.TOOL, counted_add)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", tools=["add"]))
    return agent


class Effects(Agent):
    """input {"a", "b"} -> charge (a function) -> the model -> counted_add (a tool) ->
    the model -> output: two slow non-idempotent side effects per run."""

    @action(InputEvent)
    async def ask(event: InputEvent, ctx: Any) -> None:
        args = json.loads(event.input)
        await ctx.durable_execute_async(charge, f"s{args['a']}", args["b"])
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=event.input)]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def effects_agent() -> Effects:
    """:class:`Effects` on the offline scripted model."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = Effects("effects")
    agent.add_resource("add", ResourceType.TOOL, counted_add)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel())
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["add"]))
    return agent


def measure(text: str) -> int:
    """The length of ``text`` (a durable function: its result travels as a signed record)."""
    return len(text)


def inflate(n: int) -> str:
    """A string of ``n`` characters (a durable function whose result can be too large)."""
    return "z" * n


class Echo(Agent):
    """Answers "N characters" after a durable call. An input ``{"remember": TEXT}`` also
    keeps TEXT in short-term memory (one entry per turn); ``{"repeat": K, "text": TEXT}``
    answers TEXT repeated K times; ``{"inflate": N}`` answers with a call's result of N
    characters."""

    @action(InputEvent)
    def echo(event: InputEvent, ctx: Any) -> None:
        data = event.input
        if isinstance(data, dict) and "inflate" in data:
            ctx.send_event(OutputEvent(output=len(ctx.durable_execute(inflate, data["inflate"]))))
            return
        n = ctx.durable_execute(measure, data if isinstance(data, str) else json.dumps(data))
        if isinstance(data, dict) and "remember" in data:
            turns = ctx.short_term_memory.get("turns", 0) + 1
            ctx.short_term_memory.set("turns", turns)
            ctx.short_term_memory.set(f"turn-{turns}", data["remember"])
        if isinstance(data, dict) and "repeat" in data:
            ctx.send_event(OutputEvent(output=data["text"] * data["repeat"]))
            return
        ctx.send_event(OutputEvent(output=f"{n} characters"))


def echo_agent() -> Echo:
    """:class:`Echo`."""
    return Echo("echo")


class Waiter(Agent):
    """input {"sleep_s": x} -> a durable timer -> output {"slept": x, "at": logical ms};
    input {"signal": name, "timeout_s": t} -> waits for the signal -> output its value, or
    "timeout"."""

    @action(InputEvent)
    def wait(event: InputEvent, ctx: Any) -> None:
        asked = json.loads(event.input) if isinstance(event.input, str) else event.input
        if "sleep_s" in asked:
            ctx.sleep(asked["sleep_s"])
            ctx.send_event(OutputEvent(output={"slept": asked["sleep_s"], "at": ctx.now()}))
            return
        try:
            value = ctx.wait_for_signal(asked["signal"], timeout=asked.get("timeout_s"))
        except TimeoutError:
            value = "timeout"
        ctx.send_event(OutputEvent(output=value))


def slow_first_time(key: str) -> str:
    """A function slow on its first execution per key in a test (counted in the effects
    file): the executor's timeout abandons it, the retry is quick."""
    path = os.environ.get("TEST_EFFECTS", "")
    seen = os.path.exists(path) and f"slow {key} " in Path(path).read_text()
    record_effect("slow", key)
    if not seen:
        time.sleep(3)
    return f"done {key}"


class Deadlines(Agent):
    """input {"slow": key} -> slow_first_time(key) under a 1 s call timeout, retried;
    input {"sleep_s": x} -> sleeps x s under a 6 s run deadline."""

    def __init__(self) -> None:
        super().__init__(config={
            "timeout_ms": {"FUNCTION": 1_000},
            "retry": {"FUNCTION": {"max_attempts": 3, "base_delay_ms": 100}},
            "request_timeout_ms": 6_000,
        })

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        asked = json.loads(event.input) if isinstance(event.input, str) else event.input
        if "slow" in asked:
            ctx.send_event(OutputEvent(output=ctx.durable_execute(slow_first_time, asked["slow"])))
        else:
            ctx.sleep(asked["sleep_s"])
            ctx.send_event(OutputEvent(output="woke up"))


def budgeted_calculator() -> Calculator:
    """The HTTP calculator with a run budget of 20 tokens: the test server reports 15 per
    call, so a run's second model call (after its tool) goes over it."""
    agent = http_calculator()
    agent.config["budget"] = {"run": {"max_total_tokens": 20}}
    return agent


def reflection_http() -> Agent:
    """A ReflectionAgent whose drafter ("openai/writer") and critic ("openai/editor") are
    models of the test's OpenAI-compatible server, reached through litellm; at most two
    drafts, a pass needs confidence 0.8."""
    from eddies import ReflectionAgent, ReflectionOptions

    agent = ReflectionAgent("reflect-http", drafter="writer", critic="editor",
                            options=ReflectionOptions(max_iterations=2, confidence_value=0.8),
                            config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("writer", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/writer", prompt="You write taglines."))
    agent.add_resource("editor", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/editor", prompt="You review taglines."))
    return agent


def mcp_ledger_http() -> Agent:
    """A ReActAgent whose model (the test's OpenAI-compatible server) calls the ``record``
    tool of the MCP ledger server at TEST_MCP_URL."""
    from eddies import McpServer, McpTool, ReActAgent

    agent = ReActAgent("mcp-ledger", model="llm")
    agent.add_resource("ledger", ResourceType.MCP_SERVER, McpServer(url=os.environ["TEST_MCP_URL"]))
    agent.add_resource("book", ResourceType.TOOL, McpTool("ledger", allowed_tools=["record"]))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       LiteLLMChatModel(api_base=os.environ["TEST_OPENAI_BASE"], api_key="test"))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("conn", model="openai/test-model", tools=["book"]))
    return agent


class Steps(Agent):
    """A sub-agent of two slow steps (each execution recorded), the second idempotent: it is
    where a test kills the worker, and it is run again after."""

    subagent_compatible = True

    @action(InputEvent)
    async def work(event: InputEvent, ctx: Any) -> None:
        first = await ctx.durable_execute_async(charge, f"{event.input}-first", 1)
        second = await ctx.durable_execute_async(charge, f"{event.input}-second", 2, idempotent=True)
        ctx.send_event(OutputEvent(output=[first, second]))


class Delegates(Agent):
    """input -> the ``steps`` sub-agent -> its answer (a run that waits on a child scope)."""

    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        steps = ctx.get_resource("steps", ResourceType.AGENT)
        result = await steps.as_async_callable(ctx, event.input)
        ctx.send_event(OutputEvent(output=result.result if result.success else str(result.exception)))


def delegates() -> Delegates:
    agent = Delegates("delegates")
    agent.add_resource("steps", ResourceType.AGENT, Steps("steps"))
    return agent


class Asker(Agent):
    """input -> the A2A sub-agent ``helper`` (at TEST_A2A_URL) -> its answer."""

    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        result = ctx.get_resource("helper", ResourceType.AGENT).call(ctx, event.input)
        ctx.send_event(OutputEvent(output=result.result if result.success else str(result.exception)))


def a2a_asker() -> Asker:
    from eddies import A2ASubagentSetup

    agent = Asker("asker")
    # A short timeout: a restarted worker waits that long (plus a little) for the outcome
    # of a call a process it cannot tell dead had started, before it reconciles it.
    helper = A2ASubagentSetup(os.environ["TEST_A2A_URL"], timeout_s=5)
    agent.add_resource("helper", ResourceType.AGENT, helper)
    return agent


class Checker(Agent):
    """The innermost sub-agent: checks what it is given."""

    subagent_compatible = True

    @action(InputEvent)
    def check(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=f"checked {event.input}"))


class Middle(Agent):
    """A sub-agent with a sub-agent; on "slow" it first sleeps a minute (logical time)."""

    subagent_compatible = True

    @action(InputEvent)
    async def work(event: InputEvent, ctx: Any) -> None:
        if event.input == "slow":
            await ctx.sleep_async(60)
        checked = await ctx.get_resource("checker", ResourceType.AGENT).as_async_callable(ctx, event.input)
        ctx.send_event(OutputEvent(output=checked.result))


class Fanout(Agent):
    """Three sub-agent calls in parallel, each with a 3 s timeout."""

    @action(InputEvent)
    async def start(event: InputEvent, ctx: Any) -> None:
        sub = ctx.get_resource("middle", ResourceType.AGENT)
        outcomes = await ctx.durable_execute_all_async(
            [sub.as_async_callable(ctx, p, timeout=3) for p in ("a", "slow", "c")])
        ctx.send_event(OutputEvent(output=[
            o.value.result if o.value.success else o.value.exception.error_type for o in outcomes]))


def fanout() -> Fanout:
    middle = Middle("middle")
    middle.add_resource("checker", ResourceType.AGENT, Checker("checker"))
    agent = Fanout("fanout")
    agent.add_resource("middle", ResourceType.AGENT, middle)
    return agent


class Librarian(Agent):
    """Adds its input's ``add`` documents to the store and answers with the texts of the
    two documents nearest to its ``ask`` (an embedding model's and a vector store's
    durable calls through the worker)."""

    @action(InputEvent)
    def answer(event: InputEvent, ctx: Any) -> None:
        docs = ctx.get_resource("docs", ResourceType.VECTOR_STORE)
        ask = json.loads(event.input)
        if "add" in ask:
            ctx.send_event(OutputEvent(output=docs.add(ask["add"])))
            return
        hits = docs.query(ask["ask"], limit=2, filters=ask.get("filters"))
        ctx.send_event(OutputEvent(output=[h.content for h in hits]))


def test_store(collection: str) -> Any:
    """The store the test chose: Postgres at TEST_STORE_DSN (tables TEST_STORE_PREFIX...),
    else the embedded store kept in the directory TEST_STORE_PATH."""
    from eddies import EmbeddedVectorStore, PgVectorStore

    if os.environ.get("TEST_STORE_DSN"):
        return PgVectorStore(embedding_model="emb", collection=collection,
                             dsn=os.environ["TEST_STORE_DSN"],
                             table_prefix=os.environ["TEST_STORE_PREFIX"])
    return EmbeddedVectorStore(embedding_model="emb", collection=collection,
                               path=os.environ["TEST_STORE_PATH"])


def librarian() -> Librarian:
    """The Librarian on the offline embedding model and the test's store (test_store)."""
    from eddies import EmbeddingModelSetup, OfflineEmbeddingModel

    agent = Librarian("librarian")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, test_store("travel"))
    return agent


class DyingStore:
    """The test's store (test_store), whose process is SIGKILLed right after its first
    write (once: the file TEST_DIE_MARK records it), before the call's outcome can be
    journaled."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embedding_model, self.collection = inner.embedding_model, inner.collection

    def add(self, collection: str, documents: Any, vectors: Any) -> list[str]:
        import signal as signals

        ids: list[str] = self.inner.add(collection, documents, vectors)
        mark = Path(os.environ["TEST_DIE_MARK"])
        if not mark.exists():
            mark.write_text(str(os.getpid()))
            os.kill(os.getpid(), signals.SIGKILL)
        return ids

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Rememberer(Agent):
    """{"user", "remember": [...]}: the user's memory set remembers them (their ids out)."""

    @action(InputEvent)
    def remember(event: InputEvent, ctx: Any) -> None:
        asked = json.loads(event.input)
        facts = ctx.long_term_memory.get_memory_set("facts", key=asked["user"])
        ctx.send_event(OutputEvent(output=facts.add(asked["remember"])))


def rememberer() -> Rememberer:
    """The Rememberer on a DyingStore."""
    from eddies import EmbeddingModelSetup, MemorySetSetup, OfflineEmbeddingModel

    agent = Rememberer("rememberer")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("docs", ResourceType.VECTOR_STORE, DyingStore(test_store("default")))
    agent.add_resource("facts", ResourceType.MEMORY_SET, MemorySetSetup("docs"))
    return agent


@dataclasses.dataclass(slots=True)
class MemoryRecorded(Event):
    """What :class:`LongTermMemoryAgent`'s first action did, for its second (Flink Agents'
    ``MyEvent`` holding a ``Record``)."""

    record: dict[str, Any] = dataclasses.field(default_factory=dict)


class LongTermMemoryAgent(Agent):
    """Flink Agents' long-term memory end-to-end agent (its
    python/flink_agents/e2e_tests/e2e_tests_integration/long_term_memory_test.py). An input
    ``{"name", "fact"}``: an ``async def`` action adds the fact to memory set ``test_ltm``
    of the session (the user: Flink Agents' key), counts the user's inputs in short-term
    memory and sends the record on, with the logical time before and after the add; a
    second one reads every item of the set and answers with the record, its items on the
    user's second input."""

    @action(InputEvent)
    async def add_items(event: InputEvent, ctx: Any) -> None:
        data = event.input
        before = ctx.now()
        memory_set = ctx.long_term_memory.get_memory_set("test_ltm")
        ids = await memory_set.add_async(data["fact"])
        after = ctx.now()
        count = ctx.short_term_memory.get("count") or 1
        ctx.short_term_memory.set("count", count + 1)
        ctx.send_event(MemoryRecorded({"name": data["name"], "count": count, "ids": ids,
                                       "timestamp_before_add": before, "timestamp_after_add": after}))

    @action(MemoryRecorded)
    async def retrieve_items(event: MemoryRecorded, ctx: Any) -> None:
        record = {**event.record, "timestamp_second_action": ctx.now(), "items": None}
        items = await ctx.long_term_memory.get_memory_set("test_ltm").get_async()
        if record["count"] == 2:
            record["items"] = [{"id": d.id, "value": d.content, "metadata": d.metadata} for d in items]
        ctx.send_event(OutputEvent(output=record))


def mem0_like(messages: list[ChatMessage], tools: list[Any]) -> str:
    """The compaction model standing in for Mem0's: a new fact on the subject of a memory
    shown (the words before " is ": "My favorite fruit is bananas." after "... is
    watermelon.") updates it; another fact is added."""
    asked = json.loads(messages[-1].content)
    subject = asked["new"].partition(" is ")[0]
    for memory in asked["memories"]:
        if " is " in asked["new"] and memory["text"].partition(" is ")[0] == subject:
            return json.dumps({"action": "update", "id": memory["id"], "text": asked["new"]})
    return json.dumps({"action": "add"})


def long_term_memory_agent(store: Any = None) -> LongTermMemoryAgent:
    """:class:`LongTermMemoryAgent` on the offline embedding model (Flink Agents': Ollama's
    nomic-embed-text), ``store`` (default: the test's, test_store; Flink Agents': Chroma)
    and :func:`mem0_like` as its compaction model (Mem0's LLM)."""
    from eddies import EmbeddingModelSetup, MemorySetSetup, OfflineEmbeddingModel
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = LongTermMemoryAgent("ltm")
    agent.add_resource("emb_conn", ResourceType.EMBEDDING_MODEL_CONNECTION, OfflineEmbeddingModel())
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("emb_conn"))
    agent.add_resource("ltm_store", ResourceType.VECTOR_STORE,
                       test_store("context") if store is None else store)
    agent.add_resource("mem0_conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(mem0_like))
    agent.add_resource("mem0_llm", ResourceType.CHAT_MODEL, ChatModelSetup("mem0_conn"))
    # The two fruits' texts are 0.58 near (cosine) in the offline embeddings; other facts
    # under 0.2.
    agent.add_resource("test_ltm", ResourceType.MEMORY_SET, MemorySetSetup(
        "ltm_store", compaction_model="mem0_llm", similarity=0.5))
    return agent


def offline_calculator() -> Calculator:
    """The calculator on the offline scripted model, with the counted ``add`` tool."""
    return calculator_agent(tool=counted_add)


def _doubling(messages: list[Any], tools: list[Any]) -> Any:
    """The scripted model's policy, but it doubles ``a`` before it asks for ``add``."""
    from eddies.connectors.models.scripted import tool_then_answer

    reply = tool_then_answer(messages, tools)
    calls = [dataclasses.replace(c, arguments={**c.arguments, "a": c.arguments.get("a", 0) * 2})
             for c in reply.tool_calls]
    return dataclasses.replace(reply, tool_calls=calls)


def doubling_calculator() -> Calculator:
    """The offline calculator whose model asks ``add`` for twice ``a``: other tool calls."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    return calculator_agent(ScriptedChatModel(_doubling), tool=counted_add)


def echo(value: Any) -> Any:
    """Returns its argument (a durable call that does nothing else)."""
    return value


class Unsteady(Agent):
    """A sloppy action for sessions named ``bad*``: its first call's argument is the time,
    different each time the action runs, so the result of its second call makes it ask
    another call than the journal recorded (a JournalMismatchError). Other sessions are
    deterministic: each answers ``[0, input]``."""

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        first = time.time_ns() if ctx.session_id.startswith("bad") else 0
        a = ctx.durable_execute(echo, first)
        b = ctx.durable_execute(echo, event.input)
        ctx.send_event(OutputEvent(output=[a, b]))


def _install_defect(prefix: str) -> None:
    """A defect in the engine, for the sessions whose id starts with ``prefix``: accepting
    a call result raises after changing the session's state."""
    from eddies.engine.outcomes import CallOutcomes

    accept = CallOutcomes.accept_result

    def broken(self: CallOutcomes, state: Any, ev: Any, result: Any, out: Any) -> None:
        if state.session_id.startswith(prefix):
            state.seq += 5
            raise KeyError(f"an injected defect for {state.session_id}")
        accept(self, state, ev, result, out)

    CallOutcomes.accept_result = broken  # type: ignore[method-assign]


def unsteady_agent() -> Unsteady:
    """:class:`Unsteady`; with ``TEST_ENGINE_DEFECT`` set, the engine fails for the
    sessions whose id starts with it."""
    prefix = os.environ.get("TEST_ENGINE_DEFECT")
    if prefix:
        _install_defect(prefix)
    return Unsteady()


def dawdle(key: str) -> str:
    """Slow (``TEST_EFFECT_DELAY`` s) on its first execution per key in a test, quick
    after (each execution counted in the effects file): a call interrupted on its first
    execution is quick when redone."""
    path = os.environ.get("TEST_EFFECTS", "")
    seen = os.path.exists(path) and f"dawdle {key} " in Path(path).read_text()
    record_effect("dawdle", key)
    if not seen:
        time.sleep(effect_delay())
    return f"done {key}"


class Dawdler(Agent):
    """input KEY -> dawdle(KEY), an idempotent durable function -> output "done KEY"."""

    @action(InputEvent)
    def go(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(dawdle, event.input, idempotent=True)))


def dawdler() -> Dawdler:
    """:class:`Dawdler`."""
    return Dawdler("dawdler")
