"""Keeping a conversation within a token budget (``tokens_management_strategy``).

The loop keeps the conversation; the executor counts its tokens (a tokenizer is a
provider's concern and its version may change, so the count is part of the call's
recorded outcome, never recomputed on replay). Both split a conversation the same way,
here:

- the *head* is kept whatever the budget: the leading system messages, the original user
  message, and the summary that replaced earlier turns, if there is one;
- a *turn* starts at each assistant message and holds what follows it (the results of
  its tool calls), so a tool result is never kept without the call it answers;
- the *latest context* is the last turn. TRIM drops whole turns after the head, oldest
  first; SUMMARIZE replaces the turns between the head and the latest context by a
  summary. Example::

    head, starts = split(messages)   # messages[head:starts[-1]] may go
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from eddies.events import ChatMessage, MessageRole

#: The chat call argument that asks the executor to keep a request within a budget:
#: ``{"strategy": "TRIM" | "SUMMARIZE", "threshold": tokens}``.
BUDGET_ARG = "token_budget"
#: The key of the reply's ``extra_args`` where the executor says what it counted and did:
#: ``{"counted", "threshold", "sent", "trimmed"}``, or ``"summarize": true`` for a request
#: it did not send because it is over the budget and has turns to summarise.
REPORT_KEY = "token_budget"
#: Marks (in ``extra_args``) the user message that holds a summary of earlier turns.
SUMMARY_MARK = "summary_of_earlier_turns"

SUMMARY_PROMPTS = {
    "CONCISE": "Summarise the conversation below in a few sentences. Keep every fact, "
               "number, name and tool result that later steps may need; leave out the rest.",
    "STRUCTURED": "Summarise the conversation below as a structured list with these "
                  "headings: Goal, Facts found (with tool results and numbers), Decisions, "
                  "Open questions. Keep every fact later steps may need.",
    "VERBOSE": "Summarise the conversation below in detail: each step taken, each tool "
               "called with its arguments and result, and what was concluded, in order. "
               "Leave out only repetition.",
}


def split(messages: Sequence[ChatMessage]) -> tuple[int, list[int]]:
    """The head's length and the start index of each turn after it (the last start is
    the latest context's); no turns for a conversation that is all head."""
    n, head = len(messages), 0
    while head < n and messages[head].role is MessageRole.SYSTEM:
        head += 1
    if head < n and messages[head].role is MessageRole.USER:
        head += 1
    if head < n and messages[head].extra_args.get(SUMMARY_MARK):
        head += 1
    if head == n:
        return head, []
    starts = [head] + [k for k in range(head + 1, n) if messages[k].role is MessageRole.ASSISTANT]
    return head, starts


def summarisable(messages: Sequence[ChatMessage]) -> bool:
    """Whether there is a turn before the latest context (else: too little to summarise)."""
    _, starts = split(messages)
    return len(starts) > 1


def summary_request(messages: Sequence[ChatMessage], prompt: str) -> list[ChatMessage]:
    """The messages of the model call that summarises what SUMMARIZE replaces (with the
    summary it replaced before, if any), asked with summary prompt ``prompt``."""
    head, starts = split(messages)
    older = [m for m in messages[:head] if m.extra_args.get(SUMMARY_MARK)]
    lines = [_line(m) for m in [*older, *messages[head:starts[-1]]]]
    return [ChatMessage(MessageRole.SYSTEM, SUMMARY_PROMPTS[prompt]),
            ChatMessage(MessageRole.USER, "The conversation:\n\n" + "\n\n".join(lines))]


def summarised(messages: Sequence[ChatMessage], summary: str) -> list[ChatMessage]:
    """``messages`` with the turns before the latest context (and any older summary)
    replaced by one user message holding ``summary``."""
    head, starts = split(messages)
    kept = [m for m in messages[:head] if not m.extra_args.get(SUMMARY_MARK)]
    note = ChatMessage(MessageRole.USER, f"Summary of the earlier steps:\n{summary}", [], None,
                       {SUMMARY_MARK: True})
    return [*kept, note, *messages[starts[-1]:]]


def _line(message: ChatMessage) -> str:
    if message.extra_args.get(SUMMARY_MARK):
        return f"(earlier) {message.content}"
    text = f"{message.role.value}: {message.content}".rstrip()
    for call in message.tool_calls:
        text += f"\n{message.role.value} calls {call.name}({json.dumps(call.arguments, sort_keys=True)})"
    return text


__all__ = ["BUDGET_ARG", "REPORT_KEY", "SUMMARY_MARK", "SUMMARY_PROMPTS", "split", "summarisable",
           "summarised", "summary_request"]
