"""The built-in RAG agent: retrieve, then answer with citations.

Per input (a question, or ``{"question": ..., "filters": {...}}``), ``RagAgent`` queries
its vector store for the passages nearest to the question, numbers them, and asks its
chat model to answer from them only, citing each passage it uses as ``[n]``. A model that
finds the passages wanting may answer ``SEARCH: <another query>`` instead: the store is
queried again (up to ``max_searches`` queries in all) and the new passages are numbered
after the first. The output is ``{"answer", "citations"}``, the citations being the
passages the answer cites, in order (``n``, ``id``, ``content``, ``metadata``). Every
query and model call is durable: a replay calls neither the store, nor the embedding
model, nor the chat model. Example::

    agent = RagAgent("guide", model="llm", vector_store="docs", max_results=3)
    # resources: the chat model "llm", the VECTOR_STORE "docs" and its embedding model
    LocalRunner(agent).run([("s1", "Where can I sleep cheaply in Lisbon?")])
    # [{"answer": "Hostels in Alfama start at 18 euros [1].", "citations": [{"n": 1, ...}]}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eddies.events import ChatMessage, Document, InputEvent, MessageRole, OutputEvent

from .agent import Agent, PlanError
from .options import from_mapping
from .prompts import check_prompt, opening_messages
from .resources import ResourceType

if TYPE_CHECKING:
    from .context import RunnerContext
    from .plan_view import PlanView

ACTION = "rag"
RAG_PROMPT = (
    "Answer the question from the numbered passages only. Cite every passage you use by its "
    "number in brackets, like [2]. If the passages do not hold the answer, say so; or, to "
    "look again, answer only SEARCH: followed by a better search query.")
#: How a model asks for another search instead of answering.
SEARCH = re.compile(r"^\s*SEARCH:\s*(.+?)\s*$", re.S)
_CITED = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class RagOptions:
    """``max_results`` passages per query; at most ``max_searches`` queries per question
    (1: the model cannot ask for another)."""

    max_results: int = 4
    max_searches: int = 2

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RagOptions:
        """The options a declarative definition gives (text values read as their types, an
        unknown key a ValueError naming it). Example: ``RagOptions.from_mapping({"max_results": "3"})``."""
        return from_mapping(cls, values)

    def __post_init__(self) -> None:
        for name in ("max_results", "max_searches"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"RagOptions.{name} must be a positive int, got {value!r}")


class RagAgent(Agent):
    """Retrieval-augmented answers on chat model ``model`` from VECTOR_STORE
    ``vector_store`` (see the module)."""

    subagent_compatible = True  # a question in, its answer out

    def __init__(self, name: str, *, model: str, vector_store: str, prompt: str | None = None,
                 options: RagOptions | None = None, version: str | None = None,
                 config: dict[str, Any] | None = None) -> None:
        opts = options if options is not None else RagOptions()
        if not isinstance(opts, RagOptions):
            raise TypeError(f"RagAgent {name!r}: options must be RagOptions, got {opts!r}")
        super().__init__(name, version, config)
        self.add_action(ACTION, InputEvent, rag_action, model=model, vector_store=vector_store,
                        prompt=prompt or RAG_PROMPT, options=opts)

    def check_plan(self, plan: PlanView) -> None:
        """Called by ``AgentPlan.compile``: the model and the store must be resources."""
        config = plan.actions[ACTION].config
        for key, rtype in (("model", ResourceType.CHAT_MODEL), ("vector_store", ResourceType.VECTOR_STORE)):
            entry = plan.resources.get(config[key])
            if entry is None or entry[0] is not rtype:
                raise PlanError(f"RagAgent {self.name!r}: {key} {config[key]!r} is not a "
                                f"{rtype.name} resource")
        check_prompt(plan, f"RagAgent {self.name!r}", config["prompt"])


def passages_text(passages: list[Document], first: int = 1) -> str:
    """The passages as the model reads them: ``[n] (source) content``, one a paragraph."""
    lines = []
    for n, doc in enumerate(passages, first):
        source = doc.metadata.get("source") or doc.metadata.get("title") or doc.id
        lines.append(f"[{n}] ({source}) {doc.content}" if source else f"[{n}] {doc.content}")
    return "\n\n".join(lines)


def citations(answer: str, passages: list[Document]) -> list[dict[str, Any]]:
    """The passages ``answer`` cites (``[n]``), in the order first cited."""
    out, seen = [], set()
    for match in _CITED.finditer(answer):
        n = int(match.group(1))
        if 1 <= n <= len(passages) and n not in seen:
            seen.add(n)
            doc = passages[n - 1]
            out.append({"n": n, "id": doc.id, "content": doc.content, "metadata": dict(doc.metadata)})
    return out


async def rag_action(event: InputEvent, ctx: RunnerContext) -> None:
    """Retrieve, ask, and search again while the model asks for it and searches are left."""
    config = ctx.action_config
    options: RagOptions = config["options"]
    asked = event.input
    question = asked.get("question") if isinstance(asked, dict) else asked
    if not isinstance(question, str) or not question.strip():
        raise ValueError("RagAgent: the input is a question (text) or {\"question\": text, "
                         "\"filters\": {...}}")
    filters = asked.get("filters") if isinstance(asked, dict) else None
    store = ctx.get_resource(config["vector_store"], ResourceType.VECTOR_STORE)
    llm = ctx.get_resource(config["model"], ResourceType.CHAT_MODEL)
    passages: list[Document] = []
    messages = opening_messages(ctx.step.plan.resources, ctx.config, config["prompt"])
    query, searches = question, 0
    while True:
        found = await store.query_async(query, limit=options.max_results, filters=filters)
        searches += 1
        known = {d.id for d in passages}
        fresh = [d for d in found if d.id not in known]
        text = passages_text(fresh, len(passages) + 1) if fresh else "(no new passages)"
        passages += fresh
        intro = "Passages" if searches == 1 else f"More passages, for {query!r}"
        messages.append(ChatMessage(MessageRole.USER, f"{intro}:\n\n{text}\n\nQuestion: {question}"))
        reply = await llm.chat_async(messages)
        again = SEARCH.match(reply.content)
        if again is None or searches >= options.max_searches:
            break
        messages.append(reply)
        query = again.group(1)
    answer = reply.content if again is None else "The passages found do not answer the question."
    ctx.send_event(OutputEvent(output={"answer": answer, "citations": citations(answer, passages)}))


__all__ = ["RAG_PROMPT", "RagAgent", "RagOptions", "citations", "passages_text", "rag_action"]
