"""Retries and timeouts of durable calls: per call kind, exponential back-off on durable
timers, and how long an executor lets a call run.

A call whose outcome is a TRANSIENT error (see ``ErrorInfo.category``) is asked again,
attempt + 1, after a delay: ``base_delay_ms * 2**(attempt-1)``, capped at
``max_delay_ms``, spread by +-``jitter`` (a fraction), and never shorter than the server's
Retry-After. The next request carries its due time (``not_before``) and executors hold it
until then, so waiting holds no thread, survives crashes and is replayed, not re-waited.
The jitter is a hash of the call id and attempt: the same decision on every replay.
Permanent errors and a callee's own errors are not retried; nor are timers and signals.

Configured per kind in the agent's config (defaults in :data:`DEFAULT_POLICIES`)::

    MyAgent(config={"retry": {"TOOL": {"max_attempts": 5, "base_delay_ms": 200}}})

Timeouts: a request carries ``timeout_ms``; the executor abandons a call still running
then and answers it with a TRANSIENT ``TimeoutError`` (so it is retried as above; a late
result is dropped). Per kind in the config, per tool or model setup on the resource::

    MyAgent(config={"timeout_ms": {"TOOL": 30_000, "CHAT_MODEL": 120_000}})
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from eddies.engine.options import did_you_mean
from eddies.events import CallKind, ErrorInfo


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a kind of call is tried again. ``max_attempts`` counts the
    first: 1 is no retry."""

    max_attempts: int = 1
    base_delay_ms: int = 1_000
    max_delay_ms: int = 30_000
    jitter: float = 0.2

    def delay_ms(self, call_id: str, attempt: int, error: ErrorInfo) -> int | None:
        """How long to wait before attempt ``attempt + 1`` after ``error``; None: give up.
        Example: ``RetryPolicy(max_attempts=3).delay_ms("c", 1, transient)`` -> ~1000."""
        if attempt >= self.max_attempts or not error.retryable:
            return None
        backoff: int = min(self.max_delay_ms, self.base_delay_ms * 2 ** (attempt - 1))
        digest = hashlib.blake2b(f"{call_id}/{attempt}".encode(), digest_size=8).digest()
        spread = (int.from_bytes(digest, "big") / 2**64 * 2 - 1) * self.jitter
        delay: int = round(backoff * (1 + spread))
        if error.retry_after_ms is not None:
            delay = max(delay, error.retry_after_ms)
        return delay


#: Model calls and tools are retried on transient errors; functions (often side effects
#: written by the user) and sub-agents only when configured.
DEFAULT_POLICIES: dict[CallKind, RetryPolicy] = {
    CallKind.CHAT_MODEL: RetryPolicy(max_attempts=4),
    CallKind.TOOL: RetryPolicy(max_attempts=3),
    CallKind.SUBAGENT: RetryPolicy(max_attempts=1),
    CallKind.FUNCTION: RetryPolicy(max_attempts=1),
}
RETRIED_KINDS = frozenset(DEFAULT_POLICIES)


def retry_policies(config: Any) -> dict[CallKind, RetryPolicy]:
    """The policies of an agent's ``retry`` config (kind name -> options) over the
    defaults; a ValueError names the kind or option that is wrong."""
    policies = dict(DEFAULT_POLICIES)
    if config is None:
        return policies
    if not isinstance(config, Mapping):
        raise ValueError(f"config 'retry': expected a mapping of call kind to options, got "
                         f"{type(config).__name__}")
    options = {f.name: f.type for f in fields(RetryPolicy)}
    for name, given in config.items():
        kind = _kind("retry", name)
        if not isinstance(given, Mapping):
            raise ValueError(f"config 'retry.{name}': expected a mapping of options")
        for key, value in given.items():
            if key not in options:
                raise ValueError(f"config 'retry.{name}.{key}': unknown option"
                                 f"{did_you_mean(str(key), options)} (options: "
                                 f"{', '.join(options)})")
            bad = (not 0 <= value <= 1 if key == "jitter" else
                   not isinstance(value, int) or isinstance(value, bool) or value < (
                       1 if key == "max_attempts" else 0))
            if not isinstance(value, int | float) or isinstance(value, bool) or bad:
                raise ValueError(f"config 'retry.{name}.{key}': {value!r} is out of range")
        policies[kind] = replace(policies[kind], **given)
    return policies


#: No timeout unless configured: a call's own client (litellm's ``timeout``, say) is the
#: first judge; this is the executor's backstop.
DEFAULT_TIMEOUTS: dict[CallKind, int | None] = dict.fromkeys(DEFAULT_POLICIES)


def call_timeouts(config: Any) -> dict[CallKind, int | None]:
    """The per-kind timeouts of an agent's ``timeout_ms`` config (kind name -> ms) over
    the defaults; a ValueError names what is wrong."""
    timeouts = dict(DEFAULT_TIMEOUTS)
    if config is None:
        return timeouts
    if not isinstance(config, Mapping):
        raise ValueError(f"config 'timeout_ms': expected a mapping of call kind to ms, got "
                         f"{type(config).__name__}")
    for name, value in config.items():
        kind = _kind("timeout_ms", name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"config 'timeout_ms.{name}': expected a positive number of ms, "
                             f"got {value!r}")
        timeouts[kind] = value
    return timeouts


def _kind(key: str, name: Any) -> CallKind:
    """The call kind a config key names; a ValueError lists the ones it may name."""
    kind = next((k for k in RETRIED_KINDS if k.value == name), None)
    if kind is None:
        raise ValueError(f"config '{key}': {name!r} is not a call kind that is retried or "
                         f"timed ({', '.join(sorted(k.value for k in RETRIED_KINDS))})")
    return kind
