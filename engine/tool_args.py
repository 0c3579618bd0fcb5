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
    """The first thing wrong with ``arguments`` for the parameters ``schema``, or None.

    A schema is turned into nested checks once (on first use, by its identity: a tool's
    schema is made when its agent is compiled and not changed after) and checked by those
    on every call, rather than read again for each argument.
    """
    entry = _COMPILED.get(id(schema))
    if entry is None or entry[0] is not schema:
        if len(_COMPILED) >= MAX_COMPILED:
            _COMPILED.clear()
        entry = _COMPILED[id(schema)] = (schema, _Checks(schema.get("$defs", {})).of(schema))
    return entry[1](arguments, "")


#: A check: (value, where it is: "" for the arguments themselves) -> what is wrong, or None.
Check = Callable[[Any, str], str | None]
#: Schemas compiled, by identity (the schema is kept: its id is not reused meanwhile).
_COMPILED: dict[int, tuple[Mapping[str, Any], Check]] = {}
MAX_COMPILED = 4096


def _fine(value: Any, where: str) -> str | None:
    return None


class _Checks:
    """Builds the check of a (sub)schema; ``$defs`` references are resolved when first
    checked, so a recursive definition compiles."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.refs: dict[str, Check] = {}

    def of(self, schema: Mapping[str, Any]) -> Check:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return self._ref(ref[len("#/$defs/"):])
        options = schema.get("anyOf") or schema.get("oneOf")
        if options:
            return self._options([self.of(o) for o in options])
        checks: list[Check] = []
        if "enum" in schema:
            checks.append(_enum(schema["enum"]))
        if "const" in schema:
            checks.append(_const(schema["const"]))
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
        if kinds:
            checks.append(_kinds(kinds))
        checks.append(self._shape(schema))
        if len(checks) == 1:
            return checks[0]

        def check(value: Any, where: str) -> str | None:
            for c in checks:
                found = c(value, where)
                if found is not None:
                    return found
            return None

        return check

    def _ref(self, name: str) -> Check:
        def check(value: Any, where: str) -> str | None:
            compiled = self.refs.get(name)
            if compiled is None:
                target = self.defs.get(name)
                compiled = self.refs[name] = _fine if target is None else self.of(target)
            return compiled(value, where)

        return check

    @staticmethod
    def _options(options: list[Check]) -> Check:
        def check(value: Any, where: str) -> str | None:
            found = [o(value, where) for o in options]
            if all(found):
                if len(found) == 1:
                    return found[0]
                return f"{where or 'the arguments'}: {_short(value)} matches none of the allowed shapes"
            return None

        return check

    def _shape(self, schema: Mapping[str, Any]) -> Check:
        """What a list's items and a dict's fields must be (whatever ``type`` says)."""
        items = self._items(schema)
        fields = self._fields(schema)

        def check(value: Any, where: str) -> str | None:
            if isinstance(value, list):
                return items(value, where)
            if isinstance(value, dict):
                return fields(value, where)
            return None

        return check

    def _items(self, schema: Mapping[str, Any]) -> Check:
        low, high = schema.get("minItems"), schema.get("maxItems")
        counted = f"{low if low == high else f'{low} to {high}'} items"
        if not isinstance(low, int):
            low = None
        if not isinstance(high, int):
            high = None
        prefix = [self.of(p) if isinstance(p, Mapping) else None for p in schema.get("prefixItems") or []]
        given = schema.get("items")
        rest = self.of(given) if isinstance(given, Mapping) else None

        def check(value: Any, where: str) -> str | None:
            n = len(value)
            if (low is not None and n < low) or (high is not None and n > high):
                return f"{where or 'the arguments'}: expected {counted}, got {n}"
            for i, item in enumerate(value):
                sub = prefix[i] if i < len(prefix) else rest
                if sub is not None:
                    found = sub(item, f"{where}[{i}]")
                    if found:
                        return found
            return None

        return check

    def _fields(self, schema: Mapping[str, Any]) -> Check:
        props: Mapping[str, Any] = schema.get("properties") or {}
        subs = {name: self.of(sub) for name, sub in props.items() if isinstance(sub, Mapping)}
        required = list(schema.get("required") or ())
        extra = schema.get("additionalProperties", True)
        closed = extra is False
        others = self.of(extra) if isinstance(extra, Mapping) else None
        allowed = ", ".join(props) or "none"

        def check(value: dict[str, Any], where: str) -> str | None:
            for name in required:
                if name not in value:
                    return f"{where + '.' if where else ''}{name}: missing (required)"
            for name, item in value.items():
                sub = subs.get(name)
                if sub is None:
                    if closed:
                        path = f"{where}.{name}" if where else str(name)
                        return f"{path}: not an argument of this tool (its arguments: {allowed})"
                    sub = others
                    if sub is None:
                        continue
                found = sub(item, f"{where}.{name}" if where else str(name))
                if found:
                    return found
            return None

        return check


def _enum(allowed: Any) -> Check:
    def check(value: Any, where: str) -> str | None:
        if value not in allowed:
            return (f"{where or 'the arguments'}: {_short(value)} is not one of "
                    f"{', '.join(_short(v) for v in allowed)}")
        return None

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, where: str) -> str | None:
        if value != expected:
            return f"{where or 'the arguments'}: expected {_short(expected)}, got {_short(value)}"
        return None

    return check


def _kinds(kinds: list[Any]) -> Check:
    tests = [_CHECKS.get(k, _anything) for k in kinds]
    if len(tests) == 1:
        test = tests[0]

        def one(value: Any, where: str) -> str | None:
            if test(value):
                return None
            return f"{where or 'the arguments'}: expected {' or '.join(kinds)}, got {_short(value)}"

        return one

    def check(value: Any, where: str) -> str | None:
        if any(t(value) for t in tests):
            return None
        return f"{where or 'the arguments'}: expected {' or '.join(kinds)}, got {_short(value)}"

    return check


def _anything(value: Any) -> bool:
    return True


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
