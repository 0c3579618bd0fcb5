"""The executor's half of ``tokens_management_strategy``: count a chat request's tokens
before it is sent and keep it within its budget (see :mod:`eddies.engine.tokens` for what
may be dropped or summarised).

A connection that can be asked to keep a budget has ``count_tokens(messages, *, model,
tools) -> int`` (litellm's counter for :class:`LiteLLMChatModel`, which works offline).
Example::

    fitted = fit(conn, messages, "openai/m", [], {"strategy": "TRIM", "threshold": 4000})
    fitted.messages, fitted.report   # what to send; {"counted": ..., "trimmed": 2, ...}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eddies.engine.resources import ToolSpec
from eddies.engine.tokens import split, summarisable
from eddies.events import ChatMessage


@dataclass(frozen=True)
class Fitted:
    """What to send (``send`` False: nothing, the loop summarises first) and the report
    the reply carries in ``extra_args["token_budget"]``."""

    messages: list[ChatMessage]
    report: dict[str, Any]
    send: bool = True


def fit(conn: Any, messages: list[ChatMessage], model: str, tools: list[ToolSpec],
        budget: dict[str, Any]) -> Fitted:
    """``messages`` kept within ``budget`` (``{"strategy", "threshold"}``): TRIM drops the
    oldest turns after the head until the count is at most the threshold (only the latest
    context left: sent as is); SUMMARIZE sends nothing when over it with turns to summarise."""
    counter = getattr(conn, "count_tokens", None)
    if counter is None:
        raise TypeError(f"{type(conn).__name__} cannot count tokens (no count_tokens method), so it "
                        "cannot keep a token budget; use tokens_management_strategy NONE")
    strategy, threshold = str(budget["strategy"]), int(budget["threshold"])

    def count(candidate: list[ChatMessage]) -> int:
        return int(counter(candidate, model=model, tools=tools))

    counted = count(messages)
    report: dict[str, Any] = {"strategy": strategy, "threshold": threshold, "counted": counted}
    if counted <= threshold:
        return Fitted(messages, {**report, "sent": counted, "trimmed": 0})
    if strategy == "SUMMARIZE":
        if summarisable(messages):
            return Fitted(messages, {**report, "summarize": True}, send=False)
        return Fitted(messages, {**report, "sent": counted, "trimmed": 0})  # too little: as is
    head, starts = split(messages)
    kept, sent = messages, counted
    for cut in starts[1:]:  # drop whole turns, oldest first
        kept = messages[:head] + messages[cut:]
        sent = count(kept)
        if sent <= threshold:
            break
    return Fitted(kept, {**report, "sent": sent, "trimmed": len(messages) - len(kept)})


__all__ = ["Fitted", "fit"]
