"""A tool call's arguments against its JSON schema (before the call: a bad argument is a
tool error the model sees, not a crash), and the arguments as the function takes them
(enums, dataclasses and pydantic models made from their JSON, when it is called).

Example::

    problem(parameters(book), {"city": "Paris", "nights": [1]})
    # "city: 'Paris' is not one of 'Oslo', 'Lima'"
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


class ToolArgumentError(ValueError):
    """A tool was called with arguments its schema does not allow."""


def problem(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """The first thing wrong with ``arguments`` for the parameters ``schema``, or None."""
    return _problem(schema, arguments, "", schema.get("$defs", {}))


def _problem(schema: Mapping[str, Any], value: Any, where: str, defs: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref[len("#/$defs/"):])
        return None if target is None else _problem(target, value, where, defs)
    at = where or "the arguments"
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        found = [_problem(o, value, where, defs) for o in options]
        if all(found):
            if len(found) == 1:
                return found[0]
            return f"{at}: {_short(value)} matches none of the allowed shapes"
        return None
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_short(v) for v in schema["enum"])
        return f"{at}: {_short(value)} is not one of {allowed}"
    if "const" in schema and value != schema["const"]:
        return f"{at}: expected {_short(schema['const'])}, got {_short(value)}"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds and not any(_CHECKS.get(k, lambda v: True)(value) for k in kinds):
        return f"{at}: expected {' or '.join(kinds)}, got {_short(value)}"
    if isinstance(value, list):
        return _items(schema, value, where, defs)
    if isinstance(value, dict):
        return _fields(schema, value, where, defs)
    return None


def _items(schema: Mapping[str, Any], value: list[Any], where: str, defs: Mapping[str, Any]) -> str | None:
    at = where or "the arguments"
    low, high = schema.get("minItems"), schema.get("maxItems")
    if (isinstance(low, int) and len(value) < low) or (isinstance(high, int) and len(value) > high):
        return f"{at}: expected {low if low == high else f'{low} to {high}'} items, got {len(value)}"
    prefix = schema.get("prefixItems") or []
    items = schema.get("items")
    for i, item in enumerate(value):
        sub = prefix[i] if i < len(prefix) else items
        if isinstance(sub, Mapping):
            found = _problem(sub, item, f"{where}[{i}]", defs)
            if found:
                return found
    return None


def _fields(schema: Mapping[str, Any], value: dict[str, Any], where: str,
            defs: Mapping[str, Any]) -> str | None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            return f"{where + '.' if where else ''}{name}: missing (required)"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        path = f"{where}.{name}" if where else str(name)
        sub = props.get(name)
        if sub is None:
            if extra is False:
                allowed = ", ".join(props) or "none"
                return f"{path}: not an argument of this tool (its arguments: {allowed})"
            sub = extra if isinstance(extra, Mapping) else None
        if sub is not None:
            found = _problem(sub, item, path, defs)
            if found:
                return found
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def converters(fn: Callable[..., Any]) -> dict[str, Callable[[Any], Any]]:
    """For each parameter of ``fn`` typed as an enum, a dataclass or a pydantic model (or
    an optional one), how its JSON value becomes that type when ``fn`` is called."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return {}
    out: dict[str, Callable[[Any], Any]] = {}
    for name in inspect.signature(fn).parameters:
        convert = _converter(hints.get(name))
        if convert is not None:
            out[name] = convert
    return out


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        base = _converter(inner[0]) if len(inner) == 1 else None
        return None if base is None else (lambda v: None if v is None else base(v))
    if not isinstance(hint, type):
        return None
    if issubclass(hint, enum.Enum):
        return hint
    validate = getattr(hint, "model_validate", None)
    if callable(validate):
        return validate  # type: ignore[no-any-return]
    if dataclasses.is_dataclass(hint):
        kind: Any = hint
        return lambda v: kind(**v) if isinstance(v, dict) else v
    return None


__all__ = ["ToolArgumentError", "converters", "problem"]
