"""Budgets: how many tokens, and how many US dollars of model calls, a run and a session
may spend. Neither Flink Agents nor Confluent's agents have them.

After each model call the session machine adds what the call's reply reports
(``extra_args["usage"]``: tokens, and ``cost_usd`` from the connection) to the run's and
the session's totals; a run that has gone over a budget ends with a failed OutputEvent
naming it, and a session over its own budget fails each later run before it calls
anything. Configured in the agent's config::

    MyAgent(config={"budget": {"run": {"max_total_tokens": 50_000},
                               "session": {"max_cost_usd": 2.0}}})

A call whose cost is unknown (a model missing from litellm's price table, with no prices
registered on its connection) counts as costing nothing: its tokens still count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eddies.events import CallKind


@dataclass(frozen=True)
class Budget:
    """Limits of one scope (a run, or a session); None: no limit."""

    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def exceeded(self, tokens: int, cost_usd: float) -> str | None:
        """Which limit ``tokens`` and ``cost_usd`` pass (its option name), or None."""
        if self.max_total_tokens is not None and tokens > self.max_total_tokens:
            return f"max_total_tokens={self.max_total_tokens} ({tokens} tokens spent)"
        if self.max_cost_usd is not None and cost_usd > self.max_cost_usd:
            return f"max_cost_usd={self.max_cost_usd:g} ({cost_usd:.6g} USD spent)"
        return None


def budgets(config: Any) -> dict[str, Budget]:
    """The ``budget`` config: scope ("run", "session") -> Budget; a ValueError names the
    key that is wrong."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ValueError(f"config 'budget': expected a mapping with 'run' and/or 'session', got "
                         f"{type(config).__name__}")
    out = {}
    for scope, given in config.items():
        if scope not in ("run", "session"):
            raise ValueError(f"config 'budget': {scope!r} is not a scope (run, session)")
        if not isinstance(given, Mapping):
            raise ValueError(f"config 'budget.{scope}': expected a mapping of limits")
        for key, value in given.items():
            if key not in ("max_total_tokens", "max_cost_usd"):
                raise ValueError(f"config 'budget.{scope}.{key}': unknown limit "
                                 "(max_total_tokens, max_cost_usd)")
            whole = key == "max_total_tokens"
            if isinstance(value, bool) or not isinstance(value, int if whole else int | float) \
                    or value <= 0:
                raise ValueError(f"config 'budget.{scope}.{key}': expected a positive "
                                 f"{'integer' if whole else 'number'}, got {value!r}")
        out[scope] = Budget(**given)
    return out


#: The calls whose outcomes report the tokens and cost they took (``extra_args["usage"]``):
#: a chat model's reply, an embedding's, a vector store operation's (its texts' embedding).
SPENDING_KINDS = frozenset({CallKind.CHAT_MODEL, CallKind.EMBEDDING, CallKind.VECTOR_STORE})


def reported_usage(value: Any) -> Mapping[str, Any] | None:
    """What a model reply (or an outcome of :data:`SPENDING_KINDS`) reports of its tokens and
    cost: its ``extra_args["usage"]``, if it has one."""
    usage = value.get("extra_args", {}).get("usage") if isinstance(value, Mapping) else None
    return usage if isinstance(usage, Mapping) else None


def spent(value: Any) -> tuple[int, float]:
    """Tokens and cost a model reply reports (its ``extra_args["usage"]``)."""
    usage = reported_usage(value)
    if usage is None:
        return 0, 0.0
    tokens = int(usage.get("prompt_tokens", 0) or 0) + int(usage.get("completion_tokens", 0) or 0)
    cost = usage.get("cost_usd")
    return tokens, float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0
