"""What an executor records of an exception a call raised: its category (transient,
permanent, or the callee's own), the HTTP status and Retry-After where there are some.

The category decides whether the call is tried again (:mod:`eddies.engine.retry`), so it
is decided once, here, where the exception is, and travels in the call's outcome.
Example::

    describe_error(TimeoutError("read timed out")).category   # TRANSIENT
    describe_error(litellm.AuthenticationError(...)).category  # PERMANENT, http_status 401
    describe_error(ValueError("bad row")).category             # CALLEE (a tool raised)
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

from eddies.engine import DurableCallError
from eddies.events import ErrorCategory, ErrorInfo

#: Statuses a retry may get past: timeout, conflict, too early, too many requests.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
#: An error message kept in an outcome is cut to this many characters.
MAX_MESSAGE_CHARS = 4_000
#: Exception class names (anywhere in the class's ancestry) of failures to reach or hear
#: from a server, in the HTTP clients litellm, httpx, requests and aiohttp raise.
_TRANSIENT_NAMES = frozenset({
    "Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout",
    "APIConnectionError", "ConnectError", "ConnectionError", "RemoteProtocolError",
    "ServerDisconnectedError", "ClientConnectionError", "ServiceUnavailableError",
    "InternalServerError", "RateLimitError",
})
_VALIDATION_NAMES = frozenset({"ValidationError", "JSONDecodeError"})


def describe_error(err: BaseException) -> ErrorInfo:
    """The outcome's error for ``err``, classified."""
    if isinstance(err, DurableCallError):  # the engine's own (a sub-agent's timeout): as it says
        return ErrorInfo(type=err.error_type, message=err.message[:MAX_MESSAGE_CHARS],
                         retryable=err.retryable, category=err.category,
                         http_status=err.http_status, retry_after_ms=None)
    status = http_status(err)
    names = {c.__name__ for c in type(err).__mro__}
    if status is not None and 400 <= status < 600:
        category = (ErrorCategory.TRANSIENT if status in TRANSIENT_STATUS or status >= 500
                    else ErrorCategory.PERMANENT)
    elif isinstance(err, TimeoutError | ConnectionError) or names & _TRANSIENT_NAMES:
        category = ErrorCategory.TRANSIENT
    elif names & _VALIDATION_NAMES:
        category = ErrorCategory.PERMANENT
    else:
        category = ErrorCategory.CALLEE
    return ErrorInfo(type(err).__name__, str(err)[:MAX_MESSAGE_CHARS],
                     category is ErrorCategory.TRANSIENT, category, status,
                     retry_after_ms(err) if category is ErrorCategory.TRANSIENT else None)


def http_status(err: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``, ``status``, or its
    ``response``'s), if any."""
    for owner in (err, getattr(err, "response", None)):
        for name in ("status_code", "status"):
            value = getattr(owner, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def retry_after_ms(err: BaseException, now: float | None = None) -> int | None:
    """The server's Retry-After (seconds, or an HTTP date) on the exception's response
    headers, in ms; None if it sent none."""
    for headers in _headers_of(err):
        try:
            raw = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
            if raw is not None:
                return max(0, round(float(raw)))
            raw = headers.get("retry-after") or headers.get("Retry-After")
        except (AttributeError, TypeError, ValueError):
            continue
        if raw is None:
            continue
        try:
            return max(0, round(float(raw) * 1000))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(str(raw)).timestamp()
        except (TypeError, ValueError):
            continue
        return max(0, round((when - (time.time() if now is None else now)) * 1000))
    return None


def _headers_of(err: BaseException) -> list[Any]:
    found = []
    for owner in (err, getattr(err, "response", None)):
        for name in ("headers", "litellm_response_headers", "response_headers"):
            headers = getattr(owner, name, None)
            if headers is not None and hasattr(headers, "get"):
                found.append(headers)
    return found
