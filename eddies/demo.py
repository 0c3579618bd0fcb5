"""The bundled examples, each on an offline scripted model (no network, no key).

- The calculator (:func:`calculator_agent`): a plain agent sends each prompt to the
  model; the model calls the ``add`` tool once and answers with its result.
- A travel helper (:func:`travel_agent`), a built-in ReAct loop: the model asks for the
  ``weather`` of each city named in the prompt and its local time (``get_current_time``
  of the MCP time server, over stdio), in parallel, then answers from the results.
- A tagline writer (:func:`tagline_agent`), a built-in reflection loop: a drafter writes,
  a critic reviews; the first draft is sent back (``REVISE: ...``), the second, written
  from the critic's feedback, is approved.
- A trip planner (:func:`planner_agent`) that calls the last two as sub-agents.
- A travel guide (:func:`rag_agent`), the built-in RAG agent: the passages of a shipped
  corpus nearest to the question, from the embedded vector store and the offline
  embedding model, then an answer that cites them.
- A support desk (:func:`support_agent`) behind the personal-data guardrail: a customer's
  e-mail and card number, in the question or in the customer record a tool returns, reach
  neither the model nor the session's history, and the answer names them masked.

Every model and tool call is a durable call, so a session's history is the trace that
``eddies demo`` prints, and a replay recomputes it without calling anything.
"""

from __future__ import annotations

import json
import re
from typing import Any

from eddies.engine import (
    Agent,
    ChatModelSetup,
    EmbeddingModelSetup,
    FunctionTool,
    McpServer,
    McpTool,
    ReActAgent,
    ReActOptions,
    ReflectionAgent,
    ReflectionOptions,
    ResourceType,
    ToolSpec,
    action,
)
from eddies.engine.rag import RagAgent, RagOptions
from eddies.engine.vector_stores import document_dict, document_of
from eddies.events import (
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Document,
    InputEvent,
    MessageRole,
    OutputEvent,
    ToolCall,
)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Calculator(Agent):
    """Asks the model; answers with the model's final message."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: Any) -> None:
        prompt = event.input if isinstance(event.input, str) else json.dumps(event.input)
        ctx.send_event(ChatRequestEvent(model="llm", messages=[ChatMessage(content=prompt)]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def calculator_agent(
    model: Any = None, *, tools: bool = True, tool: Any = add, model_name: str = ""
) -> Calculator:
    """The calculator on connection ``model`` (default: the offline scripted model) asking
    for ``model_name``, with the ``add`` tool (``tool`` replaces its function) unless
    ``tools`` is False."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = Calculator("calculator")
    if tools:
        agent.add_resource("add", ResourceType.TOOL, tool)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, model or ScriptedChatModel())
    setup = ChatModelSetup("offline", model=model_name, tools=["add"] if tools else [])
    agent.add_resource("llm", ResourceType.CHAT_MODEL, setup)
    return agent


PROMPTS = [
    ("alice", '{"a": 2, "b": 3}'),
    ("bob", '{"a": 40, "b": 2}'),
    ("alice", '{"a": 7, "b": 8}'),
]

# --- the travel helper: a ReAct loop ------------------------------------------------------

_WEATHER = {
    "Oslo": {"sky": "rain", "high_c": 9},
    "Lisbon": {"sky": "sun", "high_c": 24},
    "Tokyo": {"sky": "clouds", "high_c": 18},
    "Reykjavik": {"sky": "snow", "high_c": -2},
}
_ZONES = {"Oslo": "Europe/Oslo", "Lisbon": "Europe/Lisbon", "Tokyo": "Asia/Tokyo",
          "Reykjavik": "Atlantic/Reykjavik"}
_PACK = {"rain": "a raincoat", "sun": "sunglasses", "clouds": "a light jacket", "snow": "warm boots"}


def weather(city: str) -> dict[str, Any]:
    """Today's weather in ``city`` (fake data: Oslo, Lisbon, Tokyo or Reykjavik)."""
    found = _WEATHER.get(city.strip().title())
    if found is None:
        raise LookupError(f"no weather for {city!r}")
    return {"city": city.strip().title(), **found}


def travel_model(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage | str:
    """The travel helper's scripted model: first it asks for the weather of each city the
    question names (one tool call each, in parallel), then it answers from the results."""
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if not results:
        question = next((m.content for m in reversed(messages) if m.role is MessageRole.USER), "")
        cities = sorted((c for c in _WEATHER if c.lower() in question.lower()),
                        key=lambda c: question.lower().index(c.lower()))
        if not cities or not any(t.name == "weather" for t in tools):
            return f"I know the weather of {', '.join(_WEATHER)} only: name one of them."
        calls = [ToolCall(f"call-{i}-{c.lower()}", "weather", {"city": c}) for i, c in enumerate(cities, 1)]
        if any(t.name == "get_current_time" for t in tools):  # the MCP time server's tool
            calls += [ToolCall(f"time-{i}-{c.lower()}", "get_current_time", {"timezone": _ZONES[c]})
                      for i, c in enumerate(cities, 1)]
        return ChatMessage(MessageRole.ASSISTANT, "", calls)
    clocks: dict[str, str] = {}
    parts = []
    for text in results:
        try:
            w = json.loads(text)
            if "datetime" in w:  # "2026-12-01T12:34:56+01:00": the city's local time
                clocks[w["timezone"]] = w["datetime"][11:16]
                continue
            parts.append(f"{w['city']}: {w['sky']}, up to {w['high_c']} C, so pack {_PACK[w['sky']]}")
        except (ValueError, KeyError, TypeError):
            parts.append(f"no forecast ({text[:60]})")
    for zone, hhmm in clocks.items():
        city = next(c for c, z in _ZONES.items() if z == zone)
        parts = [f"{city} (now {hhmm}){p[len(city):]}" if p.startswith(city + ":") else p for p in parts]
    if any(m.role is MessageRole.SYSTEM and BRIEFLY in m.content for m in messages):
        parts = [f"{p.partition(': ')[0]}: {p.partition('so pack ')[2]}" if "so pack " in p else p
                 for p in parts]
    return "; ".join(parts) + "."


TRAVEL_PROMPTS = [("carol", "I fly to Oslo, then Lisbon. What should I pack?")]
#: More travellers, whose recorded sessions the demo's evaluation runs again.
MORE_TRAVEL_PROMPTS = [("dan", "Tokyo next week: what should I bring?"),
                       ("eve", "Reykjavik, then Lisbon. Packing tips?")]
TRAVEL_PROMPT = "You help travellers pack. Check the weather first."
#: The changed prompt the demo evaluates: the scripted model then leaves out the weather.
BRIEFLY = "Answer briefly: only what to pack."


def travel_judge(messages: list[ChatMessage], tools: list[ToolSpec]) -> str:
    """The demo's scripted judge: an answer passes when it gives every city the traveller
    names something to pack."""
    asked = json.loads(messages[-1].content)
    cities = [c for c in _WEATHER if c.lower() in str(asked["input"]).lower()]
    answer = str(asked["answer"])
    missing = [c for c in cities if not any(item in answer for item in _PACK.values()) or c not in answer]
    return json.dumps({"pass": not missing, "score": 1 - len(missing) / max(1, len(cities)),
                       "reason": f"no advice for {', '.join(missing)}" if missing else "every city"})


def brief_travel_agent() -> ReActAgent:
    """The travel helper with a changed prompt (it asks for brief answers): the candidate
    the demo evaluates against the travel helper's recorded sessions."""
    return travel_agent(prompt=f"{TRAVEL_PROMPT} {BRIEFLY}")


def travel_agent(model: Any = None, clock: bool | None = None, prompt: str = TRAVEL_PROMPT) -> ReActAgent:
    """The travel helper: a ReActAgent with the ``weather`` tool on connection ``model``
    (default: :func:`travel_model` on the offline scripted model) and, with ``clock``, the
    ``get_current_time`` tool of the reference MCP time server (``mcp-server-time``, run
    over stdio); by default when the ``mcp`` extra and that server are installed."""
    import importlib.util
    import sys

    from eddies.connectors.models.scripted import ScriptedChatModel

    if clock is None:
        clock = all(importlib.util.find_spec(m) is not None for m in ("mcp", "mcp_server_time"))
    agent = ReActAgent("travel", model="llm", prompt=prompt, options=ReActOptions(max_iterations=5))
    agent.add_resource("weather", ResourceType.TOOL, FunctionTool(weather, idempotent=True))
    tools = ["weather"]
    if clock:
        agent.add_resource("time_server", ResourceType.MCP_SERVER,
                           McpServer(command=sys.executable, args=("-m", "mcp_server_time")))
        agent.add_resource("clock", ResourceType.TOOL,
                           McpTool("time_server", allowed_tools=["get_current_time"]))
        tools.append("clock")
    # Its answers stream (a word every 30 ms, as a model writes them): on a worker they go
    # to APP.stream as they are written (eddies send --follow shows them).
    connection = model or ScriptedChatModel(travel_model, word_delay=0.03)
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION, connection)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=tools, stream=True))
    return agent


# --- the tagline writer: a reflection loop ------------------------------------------------

_SUBJECT = re.compile(r"tagline for (?:an? |the )?(.+?)(?: (?:that|which|who) (.+?))?[.!?]*$", re.I | re.S)
_ASKED = re.compile(r"what sets it apart: '([^']+)'")


def _task_parts(text: str) -> tuple[str, str]:
    """(what the tagline is for, what sets it apart) in a task or a prompt holding one."""
    task = text.split("\n\n")[0].removeprefix("The task:\n").strip()
    found = _SUBJECT.search(task)
    if found is None:
        return "place", ""
    return found.group(1).strip(), (found.group(2) or "").strip()


def tagline_drafter(messages: list[ChatMessage], tools: list[ToolSpec]) -> str:
    """Scripted drafter: a generic first draft; from a refinement prompt, a draft built on
    the detail the reviewer asked for."""
    ask = messages[-1].content
    subject, _ = _task_parts(ask)
    wanted = _ASKED.search(ask)
    if wanted is None:
        return f"The {subject} you deserve."
    detail = wanted.group(1)
    return f"{detail[:1].upper()}{detail[1:]}: the {subject} worth waking up for."


def tagline_critic(messages: list[ChatMessage], tools: list[ToolSpec]) -> str:
    """Scripted critic: sends back a draft that misses what sets the subject apart (the
    task's "that ..." clause), approves one that has it."""
    ask = messages[-1].content
    _, detail = _task_parts(ask)
    draft = ask.partition("The draft to review:\n")[2]
    if detail and detail.lower() not in draft.lower():
        return f"REVISE: too generic. Say what sets it apart: '{detail}'."
    return "APPROVED - specific and short.\nconfidence: 0.9"


TAGLINE_PROMPTS = [("dave", "Write a tagline for a bakery that opens at 5 am.")]


def tagline_agent(drafter: Any = None, critic: Any = None) -> ReflectionAgent:
    """The tagline writer: a ReflectionAgent whose drafter and critic are connections
    ``drafter`` and ``critic`` (default: :func:`tagline_drafter` and :func:`tagline_critic`
    on the offline scripted model)."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = ReflectionAgent("tagline", drafter="writer", critic="editor",
                            drafter_prompt="You write short taglines.",
                            critic_prompt="You review taglines: they must be short and specific.",
                            options=ReflectionOptions(max_iterations=3, confidence_value=0.8))
    agent.add_resource("writer_model", ResourceType.CHAT_MODEL_CONNECTION,
                       drafter or ScriptedChatModel(tagline_drafter))
    agent.add_resource("editor_model", ResourceType.CHAT_MODEL_CONNECTION,
                       critic or ScriptedChatModel(tagline_critic))
    agent.add_resource("writer", ResourceType.CHAT_MODEL, ChatModelSetup("writer_model"))
    agent.add_resource("editor", ResourceType.CHAT_MODEL, ChatModelSetup("editor_model"))
    return agent


# --- the trip planner: sub-agents ---------------------------------------------------------


def planner_model(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage | str:
    """The trip planner's scripted model: it hands the packing to the ``travel`` sub-agent
    and the tagline to the ``tagline`` sub-agent, both at once, then puts their answers
    together."""
    done = [m for m in messages if m.role is MessageRole.TOOL]  # in the order asked
    if not done:
        question = next((m.content for m in reversed(messages) if m.role is MessageRole.USER), "")
        city = next((c for c in _WEATHER if c.lower() in question.lower()), None)
        if city is None:
            return f"Name a city I know: {', '.join(_WEATHER)}."
        return ChatMessage(MessageRole.ASSISTANT, "", [
            ToolCall("pack", "travel", {"prompt": f"I fly to {city}. What should I pack?"}),
            ToolCall("slogan", "tagline", {"prompt": f"Write a tagline for a trip to {city} that "
                                                     "starts at dawn."})])
    packing = json.loads(done[0].content)
    verdict = json.loads(done[1].content)
    draft = verdict.get("draft") if isinstance(verdict, dict) else verdict
    return f"Packing: {packing} Tagline: {draft}"


PLANNER_PROMPTS = [("erin", "Plan my trip to Tokyo.")]


def planner_agent(model: Any = None) -> ReActAgent:
    """The trip planner: a ReActAgent whose model (default: :func:`planner_model` on the
    offline scripted model) calls two sub-agents as tools, in parallel: the travel helper
    (a ReAct loop of its own) and the tagline writer (a reflection loop), each in a child
    scope of the session."""
    from eddies.connectors.models.scripted import ScriptedChatModel

    travel = travel_agent()
    travel.description = "Tells a traveller what to pack for the cities they name, from the weather."
    tagline = tagline_agent()
    tagline.description = "Writes a short tagline, reviewed until a critic approves it."
    agent = ReActAgent("planner", model="llm", prompt="You plan trips; delegate what you can.",
                       options=ReActOptions(max_iterations=3))
    agent.add_resource("travel", ResourceType.AGENT, travel)
    agent.add_resource("tagline", ResourceType.AGENT, tagline)
    agent.add_resource("planner_model", ResourceType.CHAT_MODEL_CONNECTION,
                       model or ScriptedChatModel(planner_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL,
                       ChatModelSetup("planner_model", tools=["travel", "tagline"]))
    return agent


def one_turn_agent() -> Calculator:
    """The calculator without tools: input -> one model call -> output (for benchmarks)."""
    return calculator_agent(tools=False)


RAG_PROMPTS = [("frank", "Where can I sleep cheaply in Lisbon?")]
_PASSAGE = re.compile(r"^\[(\d+)\] \(([^)]*)\) (.+)$", re.M)
_WORD = re.compile(r"[a-z]{4,}")


def guide_corpus() -> list[Document]:
    """The travel guide shipped with Eddies (``eddies/corpus/travel-guide.jsonl``): a
    dozen passages on a few cities, each with its source, city and topic."""
    from importlib.resources import files

    text = (files("eddies") / "corpus" / "travel-guide.jsonl").read_text(encoding="utf-8")
    return [document_of(json.loads(line)) for line in text.splitlines() if line.strip()]


def rag_model(messages: list[ChatMessage], tools: list[ToolSpec]) -> str:
    """The guide's offline model: it answers with the first sentence of the passage that
    shares the most words with the question (the nearest among equals), citing it."""
    asked = messages[-1].content
    question = set(_WORD.findall(asked.rsplit("Question:", 1)[-1].lower()))
    scored = []
    for n, source, content in _PASSAGE.findall(asked):
        shared = len(question & set(_WORD.findall(f"{source} {content}".lower())))
        scored.append((shared, -int(n), content))
    if not scored or max(scored)[0] == 0:
        return "The passages do not say."
    _, n, content = max(scored)
    return f"{content.split('; ')[0].rstrip('.')} [{-n}]."


def rag_agent(model: Any = None) -> RagAgent:
    """The travel guide: a RagAgent over the shipped corpus (:func:`guide_corpus`) in the
    embedded vector store, embedded by the offline embedding model, answering on
    :func:`rag_model` (the offline scripted model) with the passages it cites."""
    from eddies.connectors.models.embeddings import OfflineEmbeddingModel
    from eddies.connectors.models.scripted import ScriptedChatModel
    from eddies.connectors.stores.embedded import EmbeddedVectorStore

    embedder = OfflineEmbeddingModel()
    store = EmbeddedVectorStore(embedding_model="embedder", collection="travel-guide")
    corpus = guide_corpus()
    vectors, _ = embedder.embed([d.content for d in corpus])
    store.add("travel-guide", [document_dict(d) for d in corpus], vectors)
    agent = RagAgent("guide", model="llm", vector_store="guide", options=RagOptions(max_results=3))
    agent.add_resource("offline_embedder", ResourceType.EMBEDDING_MODEL_CONNECTION, embedder)
    agent.add_resource("embedder", ResourceType.EMBEDDING_MODEL, EmbeddingModelSetup("offline_embedder"))
    agent.add_resource("guide", ResourceType.VECTOR_STORE, store)
    agent.add_resource("guide_model", ResourceType.CHAT_MODEL_CONNECTION,
                       model or ScriptedChatModel(rag_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("guide_model"))
    return agent



# --- the support desk: personal data kept out of the model and the history ---------------

def customer_record(order: str) -> dict[str, str]:
    """The customer record of ``order`` (fake data, personal data and all)."""
    return {"order": order, "customer": "Ann Lee", "email": "ann.lee@example.com",
            "card": "5555 5555 5555 4444", "status": "charged twice"}


def support_model(messages: list[ChatMessage], tools: list[ToolSpec]) -> ChatMessage | str:
    """The support desk's scripted model: it looks the order up, then answers from the
    customer record (with what it was given of the e-mail and the card)."""
    results = [m.content for m in messages if m.role is MessageRole.TOOL]
    if not results:
        question = next((m.content for m in reversed(messages) if m.role is MessageRole.USER), "")
        order = re.search(r"\bo-\d+\b", question)
        if order is None:
            return "Which order is it about? (Its number looks like o-123.)"
        return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("call-1", "customer_record",
                                                                {"order": order.group()})])
    record = json.loads(results[0])
    return (f"Sorry about order {record['order']}, {record['customer']}: it was {record['status']}. "
            f"We refunded the card {record['card']} and wrote to {record['email']}.")


def support_agent(model: Any = None) -> ReActAgent:
    """The support desk: a ReActAgent with the ``customer_record`` tool on connection
    ``model`` (default: :func:`support_model` on the offline scripted model), behind
    ``PiiRedaction`` (the ``pii`` extra), which masks e-mail addresses, phone numbers, card
    numbers, IBANs and US SSNs wherever they would be recorded or sent."""
    from eddies.connectors.guardrails.pii import PiiRedaction
    from eddies.connectors.models.scripted import ScriptedChatModel

    agent = ReActAgent("support", model="llm", prompt="You help customers with their orders.")
    agent.add_resource("customer_record", ResourceType.TOOL, FunctionTool(customer_record, idempotent=True))
    agent.add_resource("offline", ResourceType.CHAT_MODEL_CONNECTION,
                       model or ScriptedChatModel(support_model))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("offline", tools=["customer_record"]))
    agent.add_hook(PiiRedaction())
    return agent
