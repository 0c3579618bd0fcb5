"""Errors classified where they are caught: category, HTTP status, Retry-After."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest

from eddies.connectors.remote.error_classes import describe_error, retry_after_ms
from eddies.events import ErrorCategory


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers


class HTTPFailure(Exception):
    """Like an HTTP client's error: the response it got."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers or {})


class ValidationError(ValueError):
    """Named like pydantic's."""


@pytest.mark.parametrize(("err", "category", "status"), [
    (TimeoutError("read timed out"), ErrorCategory.TRANSIENT, None),
    (ConnectionResetError("reset by peer"), ErrorCategory.TRANSIENT, None),
    (HTTPFailure(408), ErrorCategory.TRANSIENT, 408),
    (HTTPFailure(409), ErrorCategory.TRANSIENT, 409),
    (HTTPFailure(429), ErrorCategory.TRANSIENT, 429),
    (HTTPFailure(500), ErrorCategory.TRANSIENT, 500),
    (HTTPFailure(503), ErrorCategory.TRANSIENT, 503),
    (HTTPFailure(400), ErrorCategory.PERMANENT, 400),
    (HTTPFailure(401), ErrorCategory.PERMANENT, 401),
    (HTTPFailure(403), ErrorCategory.PERMANENT, 403),
    (HTTPFailure(404), ErrorCategory.PERMANENT, 404),
    (HTTPFailure(422), ErrorCategory.PERMANENT, 422),
    (ValidationError("age: not an int"), ErrorCategory.PERMANENT, None),
    (ValueError("the tool's own bug"), ErrorCategory.CALLEE, None),
    (KeyError("missing"), ErrorCategory.CALLEE, None),
])
def test_errors_are_classified(err: BaseException, category: ErrorCategory, status: int | None) -> None:
    info = describe_error(err)
    assert (info.category, info.http_status) == (category, status)
    assert info.retryable is (category is ErrorCategory.TRANSIENT)
    assert info.type == type(err).__name__


def test_retry_after_in_seconds_ms_or_as_a_date() -> None:
    assert describe_error(HTTPFailure(429, {"Retry-After": "3"})).retry_after_ms == 3000
    assert describe_error(HTTPFailure(503, {"retry-after-ms": "250"})).retry_after_ms == 250
    when = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_ms(HTTPFailure(429, {"Retry-After": when}), now=1_000_000) == 30_000
    assert describe_error(HTTPFailure(429, {"Retry-After": "soon"})).retry_after_ms is None
    # A permanent error's Retry-After is of no use: nothing is retried.
    assert describe_error(HTTPFailure(401, {"Retry-After": "3"})).retry_after_ms is None


def test_a_long_message_is_cut() -> None:
    assert len(describe_error(ValueError("x" * 100_000)).message) == 4_000


def test_a_status_that_is_not_an_http_status_is_ignored() -> None:
    err: Any = ValueError("odd")
    err.status = True  # not an int status
    assert describe_error(err).http_status is None
