"""Secret values this process has read (API keys and tokens, from the environment
variables a connection names), and their removal from everything it writes: call
outcomes (a tool's result or a provider's error that echoes a key), and log lines, their
tracebacks included. The connectors that read a secret remember it here; a value shorter
than 8 characters is not taken for one (``test`` would blank every word it is part of).
Example::

    remember(os.environ["OPENAI_KEY"])
    redact(f"401: bad key {os.environ['OPENAI_KEY']}")   # "401: bad key [secret]"
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any

MASK = "[secret]"
MIN_CHARS = 8

_known: tuple[str, ...] = ()  # longest first, so a secret inside another is not half-masked
_lock = threading.Lock()
_logs_redacted = False


def remember(value: str) -> str:
    """Take ``value`` for a secret from now on (returned, for chaining)."""
    global _known
    if len(value) >= MIN_CHARS and value not in _known:
        with _lock:
            if value not in _known:
                _known = tuple(sorted({*_known, value}, key=len, reverse=True))
            _redact_logs()
    return value


def redact(text: str) -> str:
    """``text`` with every remembered secret replaced by ``[secret]``."""
    for value in _known:
        if value in text:
            text = text.replace(value, MASK)
    return text


def known() -> bool:
    """Whether any secret is remembered (redacting is then worth its cost)."""
    return bool(_known)


def _redact_logs() -> None:
    """Every log record, of any logger, made with its message and traceback redacted."""
    global _logs_redacted
    if _logs_redacted:
        return
    _logs_redacted = True
    make = logging.getLogRecordFactory()

    def redacted(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit: the handler says so
            return record
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            # Formatters use exc_text when it is set, instead of formatting the exception.
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return record

    logging.setLogRecordFactory(redacted)


__all__ = ["MASK", "known", "redact", "remember"]
