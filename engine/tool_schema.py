"""What a model is told about a Python function tool: a complete JSON schema from its type
hints, and per-parameter descriptions from its docstring (Google ``Args:`` or reST
``:param x:``).

Nested lists, dicts, tuples and sets carry their item types; ``Literal`` and ``Enum`` are
enums; ``X | None`` allows null; dataclasses, TypedDicts and pydantic models are objects
(a pydantic model's own schema, its ``$defs`` hoisted to the parameters' root so ``$ref``
resolves for providers). Example::

    def book(city: Literal["Oslo", "Lima"], nights: list[int], note: str | None = None) -> str:
        '''Book a room.

        Args:
            city: Where.
            nights: The nights, as day numbers.
        '''

    parameters(book)["properties"]["nights"]   # {"type": "array", "items": {"type": "integer"},
                                                #  "description": "The nights, as day numbers."}
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Literal, Union

_SCALARS: dict[Any, str] = {int: "integer", float: "number", str: "string", bool: "boolean",
                            type(None): "null"}
_BARE: dict[Any, str] = {list: "array", tuple: "array", set: "array", frozenset: "array",
                         dict: "object"}
_SEQUENCES = (list, set, frozenset, collections.abc.Sequence, collections.abc.Set,
              collections.abc.MutableSequence, collections.abc.Iterable, collections.abc.Collection)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|"
                      r"Notes?|Attributes|See Also)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parameters(fn: Callable[..., Any], hidden: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON schema of ``fn``'s parameters (an object), without those in ``hidden``
    (injected ones the model must not see) and without ``*args``/``**kwargs``."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: untyped parameters
        hints = {}
    described = docstring(fn)[1]
    defs: dict[str, Any] = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    skip = set(hidden)
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in skip:
            continue
        schema = dict(schema_of(hints.get(name, Any), defs))
        if name in described:
            schema["description"] = described[name]
        if param.default is param.empty:
            required.append(name)
        elif _plain(param.default):
            schema["default"] = param.default.value if isinstance(param.default, enum.Enum) else param.default
        props[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if defs:
        out["$defs"] = defs
    return out


def docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """``fn``'s description (its docstring up to the first section such as ``Args:``) and
    the description of each parameter its ``Args:`` section or ``:param:`` lines give."""
    doc = inspect.getdoc(fn) or ""
    head: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        rest = _REST_PARAM.match(stripped)
        if rest is not None:
            current, section = rest.group(1), "rest"
            params[current] = rest.group(2).strip()
            continue
        header = _SECTION.match(stripped)
        if header is not None:
            section, current = header.group(1), None
            continue
        if section is None:
            head.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params") and stripped:
            arg = _GOOGLE_ARG.match(stripped)
            if arg is not None and not line.startswith((" " * 8, "\t\t")):
                current = arg.group(1).lstrip("*")
                params[current] = arg.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "rest" and stripped and current is not None and not stripped.startswith(":"):
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(head).strip(), params


def schema_of(annotation: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of values of ``annotation`` ({} for Any or what has none); named
    object schemas of pydantic models go into ``defs``."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = schema_of(args[0], defs)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": notes[0]} if notes else inner
    if origin in (Union, types.UnionType):
        options = [schema_of(a, defs) for a in args]
        if not all(options):
            return {}
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is Literal:
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        return {**_type_of(values), "enum": values}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [m.value for m in annotation]
        return {**_type_of(values), "enum": values}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation in _BARE:
        return {"type": _BARE[annotation]}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0], defs)}
        items = [schema_of(a, defs) for a in args]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    if origin in _SEQUENCES:
        return {"type": "array", **({"items": schema_of(args[0], defs)} if args else {})}
    if origin in _MAPPINGS:
        extra = schema_of(args[1], defs) if len(args) == 2 else {}
        return {"type": "object", **({"additionalProperties": extra} if extra else {})}
    if callable(getattr(annotation, "model_json_schema", None)):
        return _pydantic(annotation, defs)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation, include_extras=True)
        fields = dataclasses.fields(annotation)
        return {"type": "object",
                "properties": {f.name: schema_of(hints.get(f.name, Any), defs) for f in fields},
                "required": [f.name for f in fields if f.default is dataclasses.MISSING
                             and f.default_factory is dataclasses.MISSING],
                "additionalProperties": False}
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        keys: Any = getattr(annotation, "__required_keys__", frozenset(hints))
        return {"type": "object", "properties": {k: schema_of(v, defs) for k, v in hints.items()},
                "required": [k for k in hints if k in keys]}
    return {}


def _pydantic(model: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = dict(model.model_json_schema(ref_template="#/$defs/{model}"))
    defs.update(schema.pop("$defs", {}))
    return schema


def _type_of(values: list[Any]) -> dict[str, Any]:
    kinds = {_SCALARS.get(type(v)) for v in values}
    return {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}


def _plain(value: Any) -> bool:
    """Whether a default value can be shown in a schema (JSON text, as it is)."""
    if isinstance(value, enum.Enum):
        value = value.value
    return value is None or isinstance(value, (str, int, float, bool))


__all__ = ["docstring", "parameters", "schema_of"]
