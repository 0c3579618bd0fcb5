"""Structured logs: one JSON object per line (``log_format = "json"``,
``EDDIES_LOG_FORMAT=json`` or ``eddies worker --log-format json``).

Each line has ``time`` (UTC, ISO 8601, milliseconds), ``level``, ``logger``, ``thread``
and ``message``, then ``session_id``, ``run`` and ``call_id`` when the line concerns one
(the worker passes them with :func:`ids`), and ``exception`` with the traceback. Example::

    use_json_logs()
    log.warning("call %s timed out", cid, extra=ids(call=cid))
    # {"time": "2025-01-02T03:04:05.678Z", "level": "WARNING", "logger": "eddies.worker",
    #  "thread": "eddies-executor", "message": "call s1:r1:i1:c0 timed out",
    #  "session_id": "s1", "run": 1, "call_id": "s1:r1:i1:c0"}
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from eddies.events.ids import run_of_call, session_of_call

#: The record attributes (set through ``extra=``) copied into a line, in this order.
ID_FIELDS = ("session_id", "run", "call_id")

#: The longest id kept in a log line: ids come from records anyone may write to APP.input.
MAX_ID_CHARS = 200


def ids(session: str | None = None, run: int | None = None, call: str | None = None) -> dict[str, Any]:
    """The ``extra=`` of a log call about a session, a run or a call; a call id also names
    its session and run: ``ids(call="s1:r2:i1:c0")`` ->
    ``{"session_id": "s1", "run": 2, "call_id": "s1:r2:i1:c0"}``."""
    extra: dict[str, Any] = {}
    if call is not None:
        extra["call_id"] = call[:MAX_ID_CHARS]
        try:  # from a record no worker wrote, a call id may not have the usual parts
            session = session if session is not None else session_of_call(call)
            run = run if run is not None else run_of_call(call)
        except (IndexError, ValueError):
            pass
    if session is not None:
        extra["session_id"] = session[:MAX_ID_CHARS]
    if run is not None:
        extra["run"] = run
    return extra


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring for its fields)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line (newlines in it are escaped)."""
        line: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        fields = record.__dict__
        for name in ID_FIELDS:
            value = fields.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            # exc_text if set: the traceback with secrets redacted (connectors/remote/secrets.py).
            line["exception"] = record.exc_text or self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # default=str: an argument or id of an unexpected type must not lose the line.
        return json.dumps(line, ensure_ascii=False, default=str)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """UTC, ISO 8601 with milliseconds: ``2025-01-02T03:04:05.678Z``."""
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + (
            f".{int(record.msecs):03d}Z")


def use_json_logs(root: logging.Logger | None = None) -> None:
    """Format every handler of ``root`` (default: the root logger) as JSON lines, adding a
    handler to stderr if it has none."""
    logger = root if root is not None else logging.getLogger()
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler())
    formatter = JsonFormatter()
    for handler in logger.handlers:
        handler.setFormatter(formatter)
