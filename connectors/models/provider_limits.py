"""What a provider allows, declared on a model connection: calls at once, requests and
tokens per minute. They hold for the app's fleet: each executor takes a share
proportional to the session partitions it owns, re-cut on every rebalance (no
coordination service), and a call over a limit waits, in order, before it starts
(:mod:`eddies.connectors.execution.provider_gates`). Example::

    conn = LiteLLMChatModel(api_base="http://llm:8000/v1",
                            limits=ProviderLimits(requests_per_minute=600, tokens_per_minute=200_000))
    # YAML: arguments: {limits: {requests_per_minute: 600, tokens_per_minute: 200000}}
    # SQL:  CREATE CONNECTION llm WITH ('type' = 'openai', 'requests_per_minute' = '600', ...)

A limit belongs to one connection: a provider's models with limits of their own are one
connection each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: The declarable limits, as YAML and SQL spell them.
LIMIT_KEYS = ("calls_at_once", "requests_per_minute", "tokens_per_minute", "max_wait_s")


class ProviderBusyError(RuntimeError):
    """A call waited ``max_wait_s`` for its provider's limits without starting: it was not
    made (a chat model setup's fallbacks are asked next, if it has any)."""


@dataclasses.dataclass(frozen=True)
class ProviderLimits:
    """Limits of one provider connection for the whole fleet (None: no limit).

    ``tokens_per_minute`` counts input and output: a call is estimated before it starts
    (its request's size) and counted from its reply's usage once answered.
    ``max_wait_s``: a call that waits longer than this for a place fails with
    :class:`ProviderBusyError` instead of waiting on (None: it waits as long as it takes;
    the run's deadline still holds). Example: ``ProviderLimits(requests_per_minute=600)``.
    """

    calls_at_once: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_wait_s: float | None = None

    def __post_init__(self) -> None:
        for key in LIMIT_KEYS:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"limits.{key}: a positive number, got {value!r}")
        if self.calls_at_once is not None and not isinstance(self.calls_at_once, int):
            raise ValueError(f"limits.calls_at_once: a whole number, got {self.calls_at_once!r}")

    @property
    def any(self) -> bool:
        """Whether any limit is set (a call of a connection without one never waits)."""
        return (self.calls_at_once is not None or self.requests_per_minute is not None
                or self.tokens_per_minute is not None)

    @classmethod
    def of(cls, value: ProviderLimits | Mapping[str, Any] | None) -> ProviderLimits | None:
        """``value`` as limits: as they are, or read from a mapping (YAML's ``limits:``);
        a key it does not know is a ValueError naming it."""
        if value is None or isinstance(value, ProviderLimits):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"limits: a mapping of {', '.join(LIMIT_KEYS)}, got {value!r}")
        unknown = sorted(set(value) - set(LIMIT_KEYS))
        if unknown:
            raise ValueError(f"limits.{unknown[0]}: not a provider limit (known: {', '.join(LIMIT_KEYS)})")
        read: dict[str, Any] = {k: _number(k, v) for k, v in value.items() if v is not None}
        return cls(**read)


def _number(key: str, value: Any) -> int | float:
    if isinstance(value, str):  # SQL options and environment-read YAML are text
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"limits.{key}: a positive number, got {value!r}") from None
    if key == "calls_at_once" and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"limits.{key}: a positive number, got {value!r}")
    return value


def limits_of(connection: Any) -> ProviderLimits | None:
    """The limits a connection declares (its ``limits`` attribute), if any."""
    limits = getattr(connection, "limits", None)
    return limits if isinstance(limits, ProviderLimits) and limits.any else None


def estimated_tokens(args: str) -> int:
    """A call's tokens before it is made, from its request's arguments (JSON holding the
    messages): about four characters a token. Its reply's usage corrects it."""
    return max(1, len(args) // 4)
