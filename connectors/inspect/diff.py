"""Field-by-field differences between two events (a recorded one and its recomputation).

JSON text inside an event (a call's arguments, a result's value) is compared as the data
it holds, so a changed argument shows as ``payload.args.kwargs.city`` rather than as two
long strings. Example::

    for path, was, now in field_diff(recorded, recomputed):
        print(f"{path}: {was!r} -> {now!r}")
"""

from __future__ import annotations

import json
from typing import Any

from eddies.events import AgentEvent
from eddies.events.records import to_record

#: A difference: the field's path, its recorded value, its recomputed value (MISSING: absent).
Difference = tuple[str, Any, Any]


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


def field_diff(recorded: AgentEvent, recomputed: AgentEvent) -> list[Difference]:
    """The fields that differ, as (path, recorded, recomputed), in field order."""
    out: list[Difference] = []
    _walk("", _plain(to_record(recorded)), _plain(to_record(recomputed)), out)
    return out


def _plain(value: Any) -> Any:
    """The record with its payload union's branch spelt out and JSON text decoded."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return {"type": value[0], **_plain(value[1])}  # the payload union's (branch, record)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "[", "\""):  # JSON text of a value
        try:
            return _plain(json.loads(value))
        except ValueError:
            return value
    return value


def _walk(path: str, a: Any, b: Any, out: list[Difference]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            _walk(f"{path}.{key}" if path else str(key), a.get(key, MISSING), b.get(key, MISSING), out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(f"{path}[{i}]", x, y, out)
        return
    if a != b or type(a) is not type(b):
        out.append((path, a, b))


def shown(value: Any, n: int = 80) -> str:
    """A value as a diff shows it: JSON, on one line, at most ``n`` characters."""
    if value is MISSING:
        return "(absent)"
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= n else text[:n - 3] + "..."
