"""Scorers that ask a model: a model as judge with a rubric (of one answer, or pairwise:
the candidate's answer against the baseline's), and similarity by an embedding model.
They run in the evaluating process, not in a session (nothing of them is journaled), and
take any chat or embedding connection Eddies has (litellm's for a provider; the scripted
and offline ones for tests). Example::

    judge = Judge(LiteLLMChatModel(), model="openai/gpt-5-mini",
                  rubric="The answer names a city and a number of days.")
    better = Judge(LiteLLMChatModel(), model="openai/gpt-5-mini", pairwise=True,
                   rubric="The more useful travel plan.")
    close = Similar(OfflineEmbeddingModel(), threshold=0.8)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from eddies.connectors.evaluation.results import CaseResult
from eddies.connectors.evaluation.scorers import Score, answer_text
from eddies.engine.long_term_memory import object_in
from eddies.events import ChatMessage, MessageRole

#: What a judge of one answer is asked (the rubric follows); it answers with one object.
JUDGE_PROMPT = (
    "You grade an AI agent's answer against a rubric. You are shown the input, the expected "
    "answer if there is one, and the answer. Reply with one JSON object and nothing else: "
    '{"pass": true or false, "score": a number from 0 to 1, "reason": "one sentence"}.\n\nRubric: ')
#: What a pairwise judge is asked: which of two answers to the same input is better.
PAIRWISE_PROMPT = (
    "You compare two answers of AI agents to the same input against a rubric. Reply with one "
    'JSON object and nothing else: {"winner": "A", "B" or "tie", "reason": "one sentence"}.'
    "\n\nRubric: ")


@dataclass(frozen=True)
class Judge:
    """A model grades the answer by ``rubric`` (``pairwise``: the candidate's against the
    baseline's, asked in both orders so that the order does not decide; a win is 1, a tie
    0.5, passed from 0.5 on). ``connection``: a chat model connection; ``model`` what it
    asks for. A reply that is not the JSON asked for fails the case, saying so."""

    connection: Any
    rubric: str
    model: str = ""
    pairwise: bool = False
    name: str = "judge"

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if result.error is not None:
            return Score(False, 0.0, f"no answer: {result.error}")
        if not self.pairwise:
            asked = {"input": result.case.input, "answer": result.output}
            if result.case.has_expected:
                asked["expected"] = result.case.expected
            found = self._ask(JUDGE_PROMPT, asked)
            if not isinstance(found.get("pass"), bool):
                return Score(False, 0.0, "the judge's reply is not the JSON asked for")
            value = found.get("score")
            value = float(value) if isinstance(value, int | float) else float(found["pass"])
            return Score(found["pass"], min(1.0, max(0.0, value)), str(found.get("reason", "")))
        if baseline is None:
            raise ValueError(f"scorer {self.name!r} is pairwise: it needs a baseline")
        if baseline.error is not None:
            return Score(True, 1.0, "the baseline has no answer")
        points = []
        for mine, first in (("A", (result, baseline)), ("B", (baseline, result))):
            found = self._ask(PAIRWISE_PROMPT, {"input": result.case.input, "answer A": first[0].output,
                                                "answer B": first[1].output})
            winner = found.get("winner")
            if winner not in ("A", "B", "tie"):
                return Score(False, 0.0, "the judge's reply is not the JSON asked for")
            points.append(0.5 if winner == "tie" else 1.0 if winner == mine else 0.0)
        value = sum(points) / 2
        return Score(value >= 0.5, value, "" if value >= 0.5 else "the baseline's answer was judged better")

    def _ask(self, prompt: str, asked: dict[str, Any]) -> dict[str, Any]:
        """The judge's reply as an object ({} if it holds none)."""
        reply = self.connection.chat([ChatMessage(MessageRole.SYSTEM, prompt + self.rubric),
                                      ChatMessage(MessageRole.USER, json.dumps(asked, default=str))],
                                     model=self.model, tools=[])
        return object_in(reply.content)


@dataclass(frozen=True)
class Similar:
    """The answer means what the expected output means: the cosine similarity of their
    embeddings (``connection``: an embedding model connection) is at least ``threshold``."""

    connection: Any
    threshold: float = 0.8
    model: str | None = None
    name: str = "similar"

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if result.error is not None:
            return Score(False, 0.0, f"no answer: {result.error}")
        if not result.case.has_expected:
            return Score(False, 0.0, "the case has no expected output")
        texts = [answer_text(result.output), answer_text(result.case.expected)]
        vectors, _usage = self.connection.embed(texts, model=self.model, dimensions=None)
        value = max(0.0, _cosine(vectors[0], vectors[1]))
        return Score(value >= self.threshold, round(value, 6),
                     "" if value >= self.threshold else f"similarity {value:.3f} < {self.threshold:g}")


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


__all__ = ["JUDGE_PROMPT", "PAIRWISE_PROMPT", "Judge", "Similar"]
