"""What an A2A task says, read from the SDK's protobuf messages: its state's name, and the
value of its parts (text joined by lines; one data part alone: its JSON value, whole numbers
as ints). Example::

    task_state(task)                          # 'completed'
    parts_value([a.parts for a in task.artifacts])   # 'echo: hello'
"""

from __future__ import annotations

import json
from typing import Any


def task_state(task: Any) -> str:
    """The name of ``task``'s state, lower case, without its prefix."""
    from a2a.types import TaskState

    return str(TaskState.Name(task.status.state)).removeprefix("TASK_STATE_").lower()


def parts_value(groups: list[Any]) -> Any:
    """The text of the parts (several joined with newlines; one data part alone: its JSON
    value)."""
    from a2a.helpers import get_data_parts

    parts = [p for group in groups for p in group]
    if len(parts) == 1 and parts[0].HasField("data"):
        return whole_numbers(get_data_parts(parts)[0])
    out = []
    for p in parts:
        kind = p.WhichOneof("content")
        if kind == "text":
            out.append(p.text)
        elif kind == "data":
            out.append(json.dumps(whole_numbers(get_data_parts([p])[0])))
        elif kind == "url":
            out.append(p.url)
        elif kind == "raw":
            name = f" {p.filename}" if p.filename else ""
            out.append(f"[{p.media_type or 'file'}{name}: {len(p.raw)} bytes]")
    return "\n".join(out)


def whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints (a protobuf Value holds every number as a
    double)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    return value


__all__ = ["parts_value", "task_state", "whole_numbers"]
