"""Durable calls: what actions ask for, and the errors replay can raise.

Example::

    def pay(event, ctx):
        receipt = ctx.durable_execute(charge_card, event.input, reconciler=lookup_charge)
        ctx.send_event(OutputEvent(output=receipt))
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddies.events import ErrorInfo


@dataclass(frozen=True)
class DurableCall:
    """One entry of ``ctx.durable_execute_all_async([...])``."""

    func: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    reconciler: Callable[..., Any] | None = None
    idempotent: bool = False


@dataclass(frozen=True)
class Outcome:
    """Result or failure of one call of a batch."""

    value: Any = None
    error: BaseException | None = None

    def is_success(self) -> bool:
        """Whether the call returned normally."""
        return self.error is None

    def is_failure(self) -> bool:
        """Whether the call raised."""
        return self.error is not None


class DurableCallError(Exception):
    """A durable call raised. Replays raise the same error without calling again.

    When the original exception was a built-in type (``ValueError``, ``KeyError``, ...)
    the raised error is also an instance of it, so ``except ValueError`` still works.
    """

    def __init__(self, call_id: str, error: ErrorInfo) -> None:
        super().__init__(f"{error.type}: {error.message}")
        self.call_id = call_id
        self.error_type = error.type
        self.message = error.message
        self.retryable = error.retryable
        self.category = error.category
        self.http_status = error.http_status


class DurableCallUnknownError(DurableCallError):
    """A call started before a crash and its outcome was not recorded.

    It has no reconciler and is not idempotent, so Eddies fails closed rather than risk
    performing the side effect twice.
    """


class SubagentTimeoutError(DurableCallError, TimeoutError):
    """A sub-agent call that did not answer within its timeout (its work was abandoned)."""


class JournalMismatchError(BaseException):
    """On replay, an action asked for a different call than the journal recorded there.

    The rule: the journal is the truth; the run fails with this error and no new call is
    made. It derives from BaseException so that ``except Exception`` in an action cannot
    swallow it and continue on a history that is not the recorded one.
    """

    def __init__(self, call_id: str, recorded: str, now: str) -> None:
        super().__init__(
            f"durable call {call_id}: the journal recorded {recorded}, but the action now "
            f"calls {now}; actions must make the same durable calls in the same order on "
            "replay (move non-deterministic code into a durable call)"
        )
        self.call_id = call_id


_ERROR_CLASSES: dict[str, type[DurableCallError]] = {
    "SubagentTimeoutError": SubagentTimeoutError,
    # A vector store's unknown collection: ``except LookupError`` catches it.
    "CollectionNotFoundError": type("DurableCallError[CollectionNotFoundError]",
                                    (DurableCallError, LookupError), {}),
}


def durable_error(call_id: str, error: ErrorInfo) -> DurableCallError:
    """The exception an action sees for a failed call (deterministic for a given ErrorInfo)."""
    if error.type == "DurableCallUnknownError":
        return DurableCallUnknownError(call_id, error)
    cls = _ERROR_CLASSES.get(error.type)
    if cls is None:
        base = getattr(builtins, error.type, None)
        if (
            isinstance(base, type)
            and issubclass(base, Exception)
            and not issubclass(base, DurableCallError)
        ):
            try:
                cls = type(f"DurableCallError[{error.type}]", (DurableCallError, base), {})
            except TypeError:  # layout conflict with some builtins: plain error
                cls = DurableCallError
        else:
            cls = DurableCallError
        _ERROR_CLASSES[error.type] = cls
    return cls(call_id, error)


def function_name(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a callable: the target of its durable calls."""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"
