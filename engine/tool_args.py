"""A tool call's arguments against its JSON schema (before the call: a bad argument is a
tool error the model sees, not a crash), and the arguments as the function takes them
(enums, dataclasses and pydantic models made from their JSON, when it is called).

A schema whose every keyword is one of the common ones a function's type hints give (type,
enum, const, properties, required, additionalProperties, items, prefixItems, minItems,
maxItems, anyOf, a ``$ref`` to ``$defs``) is checked by checks compiled from it here, in 1-5
us; any other (``maximum``, ``pattern``, ``maxLength``, ``oneOf``, another dialect...) by
jsonschema (:mod:`eddies.engine.json_schema`, 15-65 us). Both say the same of a schema both
read (a property test holds them to it), in the same words.

Example::

    problem(parameters(book), {"city": "Paris", "nights": [1]})
    # "city: 'Paris' is not one of 'Oslo', 'Lima'"
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from .json_schema import Wording, checker, count
from .json_schema import short as _short

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}

#: How a tool's arguments are named in a problem.
ARGUMENTS = Wording("the arguments", "not an argument of this tool", "its arguments")


class ToolArgumentError(ValueError):
    """A tool was called with arguments its schema does not allow."""


def problem(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """The first thing wrong with ``arguments`` for the parameters ``schema``, or None.

    A schema is turned into its check once (on first use, by its identity: a tool's schema
    is made when its agent is compiled and not changed after): nested checks compiled from
    it when :func:`compilable`, else jsonschema's validator, and checked by that on every
    call, rather than read again for each argument.
    """
    entry = _COMPILED.get(id(schema))
    if entry is None or entry[0] is not schema:
        if len(_COMPILED) >= MAX_COMPILED:
            _COMPILED.clear()
        entry = _COMPILED[id(schema)] = (schema, _check_of(schema))
    return entry[1](arguments, "")


def _check_of(schema: Mapping[str, Any]) -> Check:
    if compilable(schema):
        return _Checks(schema.get("$defs", {})).of(schema)
    check = checker(schema, ARGUMENTS, tool=True)
    return lambda value, where: check(value)


#: Keywords that say nothing of a value (``format`` neither: jsonschema does not check it).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly",
                          "writeOnly", "$comment", "format", "contentEncoding", "contentMediaType"})
#: The keywords the compiled checks read (besides a ``$ref`` and an ``anyOf``, alone).
_KEYWORDS = frozenset({"type", "enum", "const", "properties", "required", "additionalProperties",
                       "items", "prefixItems", "minItems", "maxItems"})
_ROOT_KEYWORDS = frozenset({"$defs", "$schema", "$id"})
_DIALECT = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")
_DEF_REF = re.compile(r"#/\$defs/[A-Za-z0-9_.-]+")


def compilable(schema: Mapping[str, Any]) -> bool:
    """Whether the compiled checks read all of ``schema`` as jsonschema does: of dialect
    2020-12, every keyword (its ``$defs`` too) one they read, well formed, a ``$ref`` or an
    ``anyOf`` beside annotations only."""
    if schema.get("$schema", _DIALECT[0]) not in _DIALECT:
        return False
    defs = schema.get("$defs", {})
    return (isinstance(defs, Mapping) and _compilable(schema, _ROOT_KEYWORDS)
            and all(isinstance(d, Mapping) and _compilable(d) for d in defs.values()))


def _compilable(schema: Mapping[str, Any], allowed: frozenset[str] = frozenset()) -> bool:
    keys = set(schema) - _ANNOTATIONS - allowed
    if "$ref" in schema:
        ref = schema["$ref"]
        return keys == {"$ref"} and isinstance(ref, str) and _DEF_REF.fullmatch(ref) is not None
    if "anyOf" in schema:
        return keys == {"anyOf"} and _schemas(schema["anyOf"]) and bool(schema["anyOf"])
    if not keys <= _KEYWORDS:
        return False
    kind = schema.get("type", "string")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    return ((isinstance(kind, str) or _strings(kind))
            and isinstance(schema.get("enum", []), list)
            and isinstance(props, Mapping) and _schemas(list(props.values()))
            and _strings(schema.get("required", []))
            and (isinstance(extra, bool) or (isinstance(extra, Mapping) and _compilable(extra)))
            and ("items" not in schema or _schemas([schema["items"]]))
            and _schemas(schema.get("prefixItems", []))
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in (schema.get("minItems", 0), schema.get("maxItems", 0))))


def _schemas(given: Any) -> bool:
    return isinstance(given, list) and all(isinstance(s, Mapping) and _compilable(s) for s in given)


def _strings(given: Any) -> bool:
    return isinstance(given, list) and all(isinstance(s, str) for s in given)


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
        counted = count(low, high, "item")
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
    texts = [v for v in allowed if isinstance(v, str)]

    def check(value: Any, where: str) -> str | None:
        if not (value in texts if isinstance(value, str) else any(_same(value, v) for v in allowed)):
            return (f"{where or 'the arguments'}: {_short(value)} is not one of "
                    f"{', '.join(_short(v) for v in allowed)}")
        return None

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, where: str) -> str | None:
        if not _same(value, expected):
            return f"{where or 'the arguments'}: expected {_short(expected)}, got {_short(value)}"
        return None

    return check


def _same(one: Any, two: Any) -> bool:
    """Equal as JSON values (as jsonschema compares them): ``True`` is not ``1``, in a list
    or a dict neither; ``1.0`` is ``1``."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_same(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _same(v, two[k]) for k, v in one.items())
    if one is True or one is False or two is True or two is False:
        return False
    return bool(one == two)


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


__all__ = ["ARGUMENTS", "ToolArgumentError", "compilable", "converters", "problem"]
