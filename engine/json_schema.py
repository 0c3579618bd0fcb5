"""Values against JSON schemas, judged by jsonschema (a full, maintained validator: every
keyword of the schema's dialect, 2020-12 unless ``$schema`` names another), its verdict said
the way a model or a person reads it: the path of the first wrong field, and what is wrong.

Example::

    check = checker({"type": "object", "properties": {"price": {"type": "number", "maximum": 60}}},
                    Wording("the answer"))
    check({"price": 112})
    # "price: 112 is greater than the maximum of 60"

jsonschema is imported when the first checker is made (some 50 ms, once per process), never
by ``import eddies``; a checker is made once per schema and checks each value in some 15-65
us. Nothing is fetched: a ``$ref`` resolves within the schema and the dialects' metaschemas.
Of several problems, the one reported is the first in reading order: a field's own (its
kind before its limits) before those of what it holds, fields in the value's order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator


class Wording:
    """How a problem names the value as a whole, and a field the schema does not allow:
    ``"{path}: {unexpected} ({listed}: a, b)"``. (A plain class: a dataclass would cost
    ``import eddies`` some 1.5 ms.)"""

    __slots__ = ("listed", "unexpected", "whole")

    def __init__(self, whole: str = "the value", unexpected: str = "not allowed by the schema",
                 listed: str = "allowed") -> None:
        self.whole = whole
        self.unexpected = unexpected
        self.listed = listed


#: A value's wording: "the value", "x: not allowed by the schema (allowed: a, b)".
VALUE = Wording()

#: A value -> what is wrong with it, or None.
Check = Callable[[Any], str | None]


def checker(schema: Mapping[str, Any], wording: Wording = VALUE, *, tool: bool = False) -> Check:
    """The check of values against ``schema``, made once (jsonschema's validator for the
    schema's dialect). ``tool``: as a tool's arguments are checked, where an integer is an
    ``int`` (``2.0`` is not: the function gets what its hints say), a ``$ref`` that resolves
    to nothing and an unknown ``type`` allow anything, and a schema the validator cannot apply
    (a malformed keyword) leaves the arguments to the tool; otherwise the standard's reading,
    and such a schema is a problem saying so (see :func:`schema_problem`)."""
    import referencing

    validator = _class(schema, tool)(schema, registry=referencing.Registry())

    def check(value: Any) -> str | None:
        try:
            errors = list(validator.iter_errors(value))
        except Exception as err:  # the schema, not the value: a malformed keyword, an unresolved $ref
            if tool:
                return None
            kind = type(err).__name__
            named = "" if kind.startswith("_") else f"{kind}: "
            return f"the schema cannot be applied: {named}{str(err)[:200]}"
        if not errors:
            return None
        return describe(first(errors, value), value, wording)

    return check


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """What makes ``schema`` no valid schema of its dialect (checked against the dialect's
    metaschema, patterns compiled), or None."""
    from jsonschema import exceptions, validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except exceptions.SchemaError as err:
        where = _path(err.absolute_path)
        return f"{where + ': ' if where else ''}{_shortened(err.message, err.instance)}"
    return None


def first(errors: Iterable[ValidationError], root: Any) -> ValidationError:
    """The first of ``errors`` (of value ``root``) in reading order."""
    return min(errors, key=lambda error: _order(error, root))


def describe(error: ValidationError, root: Any, wording: Wording) -> str:
    """``error`` (found in ``root``) as ``"path: what is wrong"``."""
    path = _path(error.absolute_path)
    at = path or wording.whole
    keyword = error.validator
    wanted: Any = error.validator_value
    value: Any = error.instance
    schema: Any = error.schema
    if keyword in ("anyOf", "oneOf"):
        if wanted and not error.context:  # oneOf: the value is of more than one
            return f"{at}: {short(value)} matches more than one of the allowed shapes"
        if len(wanted) == 1:
            return describe(first(error.context, root), root, wording)
        return f"{at}: {short(value)} matches none of the allowed shapes"
    if keyword == "enum":
        return f"{at}: {short(value)} is not one of {', '.join(short(v) for v in wanted)}"
    if keyword == "const":
        return f"{at}: expected {short(wanted)}, got {short(value)}"
    if keyword == "type":
        kinds = wanted if isinstance(wanted, list) else [wanted]
        return f"{at}: expected {' or '.join(str(k) for k in kinds)}, got {short(value)}"
    if keyword in ("minItems", "maxItems"):
        counted = count(schema.get("minItems"), schema.get("maxItems"), "item")
        return f"{at}: expected {counted}, got {len(value)}"
    if keyword in ("minLength", "maxLength"):
        counted = count(schema.get("minLength"), schema.get("maxLength"), "character")
        return f"{at}: expected {counted}, got {len(value)}"
    if keyword == "required":
        name = next((n for n in wanted if n not in value), "?")
        return f"{path + '.' if path else ''}{name}: missing (required)"
    if keyword == "additionalProperties":  # false: one that is not listed
        props = schema.get("properties") or {}
        name = next(iter(_extras(value, schema)), "?")
        return (f"{path + '.' if path else ''}{name}: {wording.unexpected} "
                f"({wording.listed}: {', '.join(props) or 'none'})")
    if keyword is None:  # a `false` schema
        return f"{at}: {short(value)} is not allowed here"
    return f"{at}: {_shortened(error.message, value)}"


def count(low: Any, high: Any, noun: str) -> str:
    """``"2 items"``, ``"1 to 3 items"``, ``"at most 3 items"``, ``"at least 1 item"``."""
    low = low if isinstance(low, int) and not isinstance(low, bool) else None
    high = high if isinstance(high, int) and not isinstance(high, bool) else None
    if low is None:
        return f"at most {high} {noun}{'' if high == 1 else 's'}"
    if high is None:
        return f"at least {low} {noun}{'' if low == 1 else 's'}"
    if low == high:
        return f"{low} {noun}{'' if low == 1 else 's'}"
    return f"{low} to {high} {noun}s"


def short(value: Any) -> str:
    """``repr(value)``, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: Where a field's own problems come, by keyword, before (lower) or after one another: its
#: kind before its limits, before what it must hold. Any other keyword: 4.
_RANK = {"anyOf": 0, "oneOf": 0, "enum": 1, "const": 2, "type": 3, "minItems": 5, "maxItems": 5,
         "required": 6}


def _order(error: ValidationError, root: Any) -> tuple[tuple[int, int], ...]:
    """Reading order: the positions of the field's path in the value (a dict's keys in its
    order), then the keyword's rank; a field's own problems before those within it."""
    steps: list[str | int] = list(error.absolute_path)
    rank = _RANK.get(str(error.validator), 4)
    if error.validator == "additionalProperties":  # at the field that is not allowed
        schema: Any = error.schema
        steps.append(next(iter(_extras(error.instance, schema)), ""))
        rank = 0
    key: list[tuple[int, int]] = []
    node = root
    for step in steps:
        if isinstance(node, dict):
            key.append((0, list(node).index(step) if step in node else len(node)))
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            key.append((0, step))
            node = node[step]
        else:
            key.append((0, 0))
            node = None
    key.append((-1, rank))
    key.append((-1, _place(error)))
    return tuple(key)


#: Keywords said together, in one message ("expected 2-5 characters"): at the first of them.
_PAIRED = {"minLength": ("minLength", "maxLength"), "maxLength": ("minLength", "maxLength")}


def _place(error: ValidationError) -> int:
    """Where the keyword stands in its schema: a field's limits are judged in the schema's
    order, whatever order the validator yields them in."""
    schema: Any = error.schema
    if not isinstance(schema, Mapping):
        return 0
    keys = list(schema)
    names = _PAIRED.get(str(error.validator), (str(error.validator),))
    return min((keys.index(n) for n in names if n in schema), default=len(keys))


def _extras(value: Any, schema: Mapping[str, Any]) -> Iterator[str]:
    """The fields of ``value`` that ``schema``'s properties and patternProperties leave to
    additionalProperties, in the value's order."""
    if not isinstance(value, dict):
        return
    props = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or ())
    for name in value:
        if name not in props and not any(re.search(p, name) for p in patterns):
            yield name


def _path(steps: Iterable[str | int]) -> str:
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _shortened(message: str, value: Any) -> str:
    """jsonschema's ``message``, the value it starts with shortened, 200 characters at most."""
    shown = repr(value)
    if message.startswith(shown):
        message = short(value) + message[len(shown):]
    return message if len(message) <= 200 else message[:197] + "..."


#: The tool flavour of each dialect's validator class.
_TOOL_CLASSES: dict[Any, type[Validator]] = {}


def _class(schema: Mapping[str, Any], tool: bool) -> type[Validator]:
    from jsonschema import validators

    base: type[Validator] = validators.validator_for(schema, default=validators.Draft202012Validator)
    if not tool:
        return base
    cls = _TOOL_CLASSES.get(base)
    if cls is None:
        keywords = base.VALIDATORS
        lenient = {name: wrap(keywords[name]) for name, wrap in (("type", _any_unknown_type),
                                                                  ("$ref", _any_unresolved))
                   if name in keywords}
        types = base.TYPE_CHECKER.redefine("integer", _int)
        cls = _TOOL_CLASSES[base] = validators.extend(  # type: ignore[no-untyped-call]
            base, validators=lenient, type_checker=types)
    return cls


def _int(checker: Any, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


Keyword = Callable[[Any, Any, Any, Any], Iterator[Any]]


def _any_unknown_type(keyword: Keyword) -> Keyword:
    """``type`` where a type name it does not know (and an empty list) allows anything."""
    from jsonschema.exceptions import UnknownType

    def lenient(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if types == []:
            return
        try:
            errors = list(keyword(validator, types, instance, schema))
        except UnknownType:
            return
        yield from errors

    return lenient


def _any_unresolved(keyword: Keyword) -> Keyword:
    """``$ref`` where a reference that resolves to nothing allows anything."""
    from referencing.exceptions import Unresolvable

    def lenient(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[Any]:
        try:
            errors = list(keyword(validator, ref, instance, schema))
        except Unresolvable:
            return
        yield from errors

    return lenient


__all__ = ["VALUE", "Check", "Wording", "checker", "count", "describe", "first", "schema_problem", "short"]
