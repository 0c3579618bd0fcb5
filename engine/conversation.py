"""A session's earlier turns, for an agent that answers in a conversation (a chat screen,
the HTTP door's chat completions): each question and its answer, kept in the session's
short-term memory (state, not a durable call: a replay keeps them as they were), the last
``turns`` of them put before the next question. Example::

    past = earlier_turns(ctx.short_term_memory, "react", turns=5)   # ChatMessages
    ...
    remember_turn(ctx.short_term_memory, "react", turns=5, question="hi", answer="hello")
"""

from __future__ import annotations

from typing import Any

from eddies.events import ChatMessage, MessageRole

#: The short-term memory key under which an agent's turns are kept (``conversation.NAME``).
PREFIX = "conversation."


def earlier_turns(memory: Any, name: str, turns: int) -> list[ChatMessage]:
    """The last ``turns`` question/answer pairs kept for agent ``name``, as messages."""
    if turns <= 0:
        return []
    kept = memory.get(PREFIX + name, [])
    out: list[ChatMessage] = []
    for turn in kept[-turns:]:
        out += [ChatMessage(MessageRole.USER, str(turn["q"])),
                ChatMessage(MessageRole.ASSISTANT, str(turn["a"]))]
    return out


def remember_turn(memory: Any, name: str, turns: int, question: str, answer: str) -> None:
    """Keep one more turn for agent ``name`` (the last ``turns`` of them)."""
    if turns <= 0:
        return
    kept = list(memory.get(PREFIX + name, []))
    kept.append({"q": question, "a": answer})
    memory.set(PREFIX + name, kept[-turns:])
