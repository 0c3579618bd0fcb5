"""Human approval of tool calls: a tool declared ``requires_approval`` runs only once a
person approves that call.

The wait is a signal wait (a durable call of kind SIGNAL) named ``approval:<call id>``,
with a deadline; when it is first issued the machine also emits an
``ApprovalRequestEvent`` naming the tool, its arguments and the signal, which runners
write to ``APP.output``. A person (or any program) answers with that signal::

    eddies approve alice approval:alice:r1:i3:c0
    eddies reject alice approval:alice:r1:i3:c0 --reason "not this account"

A rejection, an answer that is not an approval, or no answer by the deadline is a tool
error the model sees (or, for ``ctx.get_resource(name).call()``, a
:class:`ToolNotApprovedError`); the tool is not called.
"""

from __future__ import annotations

from typing import Any

from eddies.events import ErrorCategory, ErrorInfo

from .remote_tools import AnyTool

PREFIX = "approval:"

#: Answers that approve, besides ``{"approved": true}`` (case-insensitive for text).
_YES = frozenset({"approve", "approved", "yes", "y", "ok"})


class ToolNotApprovedError(PermissionError):
    """A tool call that needed approval was rejected, or not approved in time."""


def signal_name(call_id: str) -> str:
    """The signal that answers the approval wait whose call id is ``call_id``."""
    return PREFIX + call_id


def answer(approved: bool, reason: str | None = None) -> dict[str, Any]:
    """The signal value that approves or rejects a call (what ``eddies approve`` and
    ``eddies reject`` send). Example: ``answer(False, "wrong account")``."""
    value: dict[str, Any] = {"approved": approved}
    if reason:
        value["reason"] = reason
    return value


def timeout_ms(tool: AnyTool, config: Any) -> int:
    """How long a call of ``tool`` waits for its approval: the tool's own
    ``approval_timeout_ms``, else the agent's ``approval_timeout_ms`` config."""
    own = tool.approval_timeout_ms
    return int(config["approval_timeout_ms"]) if own is None else own


def decision(value: Any) -> tuple[bool, str | None]:
    """(approved, reason) of a signal's value. Anything not clearly an approval rejects:
    a malformed answer must never run a tool that asked for a person's yes."""
    reason: Any = None
    if isinstance(value, dict):
        reason = value.get("reason")
        value = value.get("approved")
    if isinstance(value, str):
        value = value.strip().lower() in _YES
    if value is not True:
        return False, reason if isinstance(reason, str) and reason else None
    return True, None


def refusal(tool: str, value: Any, error: BaseException | None, waited_ms: int) -> ErrorInfo | None:
    """Why a call of ``tool`` may not run (the wait's outcome: its value, or the error it
    raised), or None if it was approved."""
    if error is not None:
        if isinstance(error, TimeoutError):
            return ErrorInfo("ApprovalTimeout", f"tool {tool!r} was not approved within "
                             f"{waited_ms / 1000:g} s; it was not called",
                             category=ErrorCategory.PERMANENT)
        return ErrorInfo("ApprovalError", f"tool {tool!r}: the wait for its approval failed "
                         f"({error}); it was not called", category=ErrorCategory.PERMANENT)
    approved, reason = decision(value)
    if approved:
        return None
    why = f": {reason}" if reason else ""
    return ErrorInfo("ApprovalRejected", f"a person rejected this call of tool {tool!r}{why}; "
                     "it was not called", category=ErrorCategory.PERMANENT)


__all__ = ["PREFIX", "ToolNotApprovedError", "answer", "decision", "refusal", "signal_name",
           "timeout_ms"]
