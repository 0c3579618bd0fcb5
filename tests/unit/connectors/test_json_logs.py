"""Structured logs: one JSON object per line, with the session, run and call ids a line
is about."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from eddies.connectors.runtime.json_logs import JsonFormatter, ids, use_json_logs


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    logger = logging.getLogger("eddies.test.json_logs")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    use_json_logs(logger)
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    text = out.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_a_line_has_time_level_logger_message_and_the_ids(logged: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = logged
    logger.warning("call %s timed out after %d ms", "s1:r2:i1:c0", 500, extra=ids(call="s1:r2:i1:c0"))
    logger.info("plain")
    first, second = _lines(out)
    assert first["level"] == "WARNING" and first["logger"] == "eddies.test.json_logs"
    assert first["message"] == "call s1:r2:i1:c0 timed out after 500 ms"
    assert (first["session_id"], first["run"], first["call_id"]) == ("s1", 2, "s1:r2:i1:c0")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(first["time"]))
    assert first["thread"] == "MainThread"
    assert second["message"] == "plain" and "session_id" not in second and "call_id" not in second


def test_newlines_unicode_and_tracebacks_stay_on_one_line(logged: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = logged
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logger.exception("session %r:\nfailed ✗", "sö", extra=ids(session="sö"))
    [line] = _lines(out)  # one line, though message and traceback have newlines
    assert line["message"] == "session 'sö':\nfailed ✗" and line["session_id"] == "sö"
    assert line["level"] == "ERROR"
    assert "ValueError: bad\nvalue" in str(line["exception"])
    assert "✗" in out.getvalue()  # readable, not \u-escaped


def test_ids_derive_session_and_run_from_a_call_and_survive_odd_ones() -> None:
    assert ids(call="a/critic@i1c0:r3:i1:c2") == {"call_id": "a/critic@i1c0:r3:i1:c2",
                                                  "session_id": "a", "run": 3}  # a sub-agent's call
    assert ids(call="a/b:r3:i1:c2")["session_id"] == "a/b"  # a session id with a "/"
    assert ids(session="s", run=1) == {"session_id": "s", "run": 1}
    assert ids(call="no-parts") == {"call_id": "no-parts", "session_id": "no-parts"}
    assert ids(call="x:ry:i1:c0") == {"call_id": "x:ry:i1:c0", "session_id": "x"}
    assert len(ids(session="s" * 10_000)["session_id"]) == 200
    assert ids() == {}


def test_an_unexpected_value_does_not_lose_the_line() -> None:
    record = logging.LogRecord("eddies.x", logging.INFO, __file__, 1, "n=%s", (object(),), None)
    record.session_id = b"bytes"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"].startswith("n=<object") and line["session_id"] == "b'bytes'"


def test_use_json_logs_formats_every_handler_of_the_root() -> None:
    root = logging.Logger("root-for-test")
    use_json_logs(root)  # none: one to stderr is added
    [handler] = root.handlers
    assert isinstance(handler.formatter, JsonFormatter)
