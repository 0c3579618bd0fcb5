"""Secrets this process has read are masked in what it writes: call outcomes (value and
error), log messages and tracebacks, in the text and the JSON log formats."""

from __future__ import annotations

import logging

import pytest

from eddies.connectors.execution.calls import result_event
from eddies.connectors.remote import secrets
from eddies.connectors.runtime.json_logs import JsonFormatter
from eddies.events import AgentEvent, CallKind, CallStatus, DurableCallRequest, ErrorInfo

KEY = "sk-unit-5ecret-88a1b2"


def test_a_remembered_secret_is_masked_and_a_short_value_is_not_one() -> None:
    secrets.remember(KEY)
    secrets.remember("test")  # too short to be told from ordinary words
    secrets.remember(KEY + "-longer")
    assert secrets.redact(f"a {KEY}-longer and {KEY}; a test") == "a [secret] and [secret]; a test"


def test_call_outcomes_are_written_without_it() -> None:
    secrets.remember(KEY)
    request = AgentEvent.external("s", DurableCallRequest("s:r1:i1:c0", CallKind.TOOL, "leak"),
                                  event_id="e", timestamp=1)
    ok = result_event(request, CallStatus.OK, f'"the key is {KEY}"')
    assert ok.payload.value == '"the key is [secret]"'
    failed = result_event(request, CallStatus.ERROR, "null", ErrorInfo("AuthError", f"bad key {KEY}"))
    assert failed.payload.error is not None and failed.payload.error.message == "bad key [secret]"


def test_log_lines_and_their_tracebacks_are_written_without_it(caplog: pytest.LogCaptureFixture) -> None:
    secrets.remember(KEY)
    log = logging.getLogger("eddies.test.secrets")
    try:
        raise PermissionError(f"denied for {KEY}")
    except PermissionError:
        log.exception("call with %s failed", KEY)
    [record] = [r for r in caplog.records if r.name == "eddies.test.secrets"]
    for formatter in (logging.Formatter("%(message)s"), JsonFormatter()):
        line = formatter.format(record)
        assert KEY not in line
        assert "call with [secret] failed" in line and "denied for [secret]" in line
