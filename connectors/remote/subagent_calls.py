"""What every call to an external sub-agent (HTTP or A2A) shares: the header its call id
travels in, so the far side can drop a repeat, the headers who asked travels in
(:func:`identity_headers`), and the error a call past its timeout
raises, the engine's own :class:`~eddies.engine.SubagentTimeoutError`, so an action
catches an external sub-agent's timeout as it catches an internal one's. Example::

    headers[IDEMPOTENCY_HEADER] = call_id
    raise subagent_timeout(call_id, "HTTP sub-agent http://a.example: no answer within 5 s")
"""

from __future__ import annotations

from eddies.engine import SubagentTimeoutError
from eddies.events import ErrorCategory, ErrorInfo, Identity

#: The HTTP header (A2A: the service parameter) a sub-agent call's id travels in.
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: The HTTP headers (A2A: service parameters) who asked for the run travels in: the end
#: user's id and their tenant, as the input's signed identity named them.
USER_HEADER = "Eddies-User"
TENANT_HEADER = "Eddies-Tenant"


def identity_headers(identity: Identity | None) -> dict[str, str]:
    """The headers telling a remote agent who asked (none for an anonymous run)."""
    if identity is None:
        return {}
    if identity.tenant is None:
        return {USER_HEADER: identity.user}
    return {USER_HEADER: identity.user, TENANT_HEADER: identity.tenant}


def subagent_timeout(call_id: str, message: str) -> SubagentTimeoutError:
    """The error for a sub-agent call ``call_id`` that did not answer in time: transient,
    as any timeout is (a retry policy may try again)."""
    return SubagentTimeoutError(call_id, ErrorInfo(
        type=SubagentTimeoutError.__name__, message=message, retryable=True,
        category=ErrorCategory.TRANSIENT, http_status=None, retry_after_ms=None))


__all__ = ["IDEMPOTENCY_HEADER", "TENANT_HEADER", "USER_HEADER", "identity_headers", "subagent_timeout"]
