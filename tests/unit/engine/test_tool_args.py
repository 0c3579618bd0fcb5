"""A tool's arguments are checked (engine/tool_args.py) as a plain reading of the schema
says: the interpreter the compiled checks replaced is kept here as the reference, and judges
generated schemas and values beside the compiled checks and jsonschema (which checks the
schemas the compiled checks do not read: maximum, pattern, oneOf...); all three say the same
in the same words (the messages a model sees)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from eddies.engine.json_schema import checker
from eddies.engine.tool_args import _CHECKS, ARGUMENTS, _short, compilable, problem
from eddies.engine.tool_schema import parameters


def _problem(schema: Mapping[str, Any], value: Any, where: str, defs: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref[len("#/$defs/"):])
        return None if target is None else _problem(target, value, where, defs)
    at = where or "the arguments"
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        found = [_problem(o, value, where, defs) for o in options]
        if "oneOf" in schema and found.count(None) > 1:
            return f"{at}: {_short(value)} matches more than one of the allowed shapes"
        if all(found):
            if len(found) == 1:
                return found[0]
            return f"{at}: {_short(value)} matches none of the allowed shapes"
        return None
    if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
        allowed = ", ".join(_short(v) for v in schema["enum"])
        return f"{at}: {_short(value)} is not one of {allowed}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{at}: expected {_short(schema['const'])}, got {_short(value)}"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds and not any(_CHECKS.get(k, lambda v: True)(value) for k in kinds):
        return f"{at}: expected {' or '.join(kinds)}, got {_short(value)}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    for key, limit in schema.items():  # the limits, in the schema's order
        if key == "minimum" and number and value < limit:
            return f"{at}: {value!r} is less than the minimum of {limit!r}"
        if key == "maximum" and number and value > limit:
            return f"{at}: {value!r} is greater than the maximum of {limit!r}"
        if key == "pattern" and isinstance(value, str) and not re.search(limit, value):
            return f"{at}: {_short(value)} does not match {limit!r}"
        low, high = schema.get("minLength"), schema.get("maxLength")
        if (key in ("minLength", "maxLength") and isinstance(value, str)
                and not ((low is None or len(value) >= low) and (high is None or len(value) <= high))):
            return f"{at}: expected {_expected(low, high, 'character')}, got {len(value)}"
    if isinstance(value, list):
        return _items(schema, value, where, defs)
    if isinstance(value, dict):
        return _fields(schema, value, where, defs)
    return None


def _items(schema: Mapping[str, Any], value: list[Any], where: str, defs: Mapping[str, Any]) -> str | None:
    at = where or "the arguments"
    low, high = schema.get("minItems"), schema.get("maxItems")
    if (isinstance(low, int) and len(value) < low) or (isinstance(high, int) and len(value) > high):
        return f"{at}: expected {_expected(low, high, 'item')}, got {len(value)}"
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


def _expected(low: int | None, high: int | None, noun: str) -> str:
    def n(k: int | None) -> str:
        return f"{k} {noun}" if k == 1 else f"{k} {noun}s"

    if low is None:
        return f"at most {n(high)}"
    if high is None:
        return f"at least {n(low)}"
    return n(low) if low == high else f"{low} to {high} {noun}s"


def _equal(one: Any, two: Any) -> bool:
    """Equal as JSON values: True is not 1 (at any depth), 1.0 is 1."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[k], two[k]) for k in one)
    return bool(one == two)


def reference(schema: Mapping[str, Any], arguments: Any) -> str | None:
    return _problem(schema, arguments, "", schema.get("$defs", {}))


_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
#: Few, so that an enum or a const often holds the value (or True beside 1, 2.0 beside 2).
_SCALARS = st.sampled_from([None, True, False, 0, 1, 2, -3, 3, 1.5, 2.0, "a", "b", "", "ab", "ba"])
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)),
    max_leaves=8)


#: What the compiled checks do not read (jsonschema checks a schema that has one).
_LIMITS = {"minimum": st.integers(-2, 2), "maximum": st.integers(-2, 2), "minLength": st.integers(0, 2),
           "maxLength": st.integers(0, 2), "pattern": st.sampled_from(["^a", "b$", "^$", "a|b"])}


def _schemas(refs: bool, limits: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.one_of(
            st.fixed_dictionaries({"type": st.just("object")}, optional={
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
                "additionalProperties": st.one_of(st.booleans(), inner)}),
            st.fixed_dictionaries({"type": st.just("array")}, optional={
                "items": inner, "prefixItems": st.lists(inner, max_size=2),
                "minItems": st.integers(0, 2), "maxItems": st.integers(1, 3)}),
            st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
            *([st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=3)})] if limits else []),
        )

    leaves = st.one_of(
        st.fixed_dictionaries({}, optional={"type": st.one_of(_TYPES, st.lists(_TYPES, max_size=2)),
                                            "enum": st.lists(_SCALARS, min_size=1, max_size=3),
                                            "const": _SCALARS}),
        *([st.fixed_dictionaries({}, optional={"type": st.sampled_from(["integer", "number", "string"]),
                                               **_LIMITS})] if limits else []),
        *([st.just({"$ref": "#/$defs/Node"}), st.just({"$ref": "#/$defs/Missing"})] if refs else []),
    )
    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(_schemas(refs=True), _schemas(refs=False), st.lists(_VALUES, min_size=1, max_size=4))
def test_the_compiled_checks_say_what_the_schema_says(schema: dict[str, Any], node: dict[str, Any],
                                                      values: list[Any]) -> None:
    schema = {**schema, "$defs": {"Node": node}}
    assert compilable(schema)  # checked by the compiled checks, not jsonschema
    for value in values:  # the same schema object: the second and later use the compiled checks
        assert problem(schema, value) == reference(schema, value)


@settings(max_examples=300, deadline=None)
@given(_schemas(refs=True), _schemas(refs=False), st.lists(_VALUES, min_size=1, max_size=4))
def test_jsonschema_says_what_the_compiled_checks_say(schema: dict[str, Any], node: dict[str, Any],
                                                      values: list[Any]) -> None:
    """The compiled checks are a faster way to the maintained validator's verdict, in the
    same words, for every schema they read."""
    schema = {**schema, "$defs": {"Node": node}}
    check = checker(schema, ARGUMENTS, tool=True)
    for value in values:
        assert check(value) == problem(schema, value) == reference(schema, value)


@settings(max_examples=400, deadline=None)
@given(_schemas(refs=True, limits=True), _schemas(refs=False, limits=True),
       st.lists(_VALUES, min_size=1, max_size=4))
def test_limits_and_one_of_are_checked_by_jsonschema(schema: dict[str, Any], node: dict[str, Any],
                                                     values: list[Any]) -> None:
    schema = {**schema, "$defs": {"Node": node}}
    for value in values:
        assert problem(schema, value) == reference(schema, value)


def test_a_recursive_definition_is_checked_all_the_way_down() -> None:
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}
    schema = {"$ref": "#/$defs/Tree", "$defs": {"Tree": tree}}
    value = {"name": "a", "kids": [{"name": "b", "kids": [{"name": 3}]}]}
    expected = "kids[0].kids[0].name: expected string, got 3"
    assert problem(schema, value) == reference(schema, value) == expected


#: One field's schema: its kind, or its limits.
_LEAF = st.one_of(
    st.fixed_dictionaries({}, optional={"type": _TYPES, "enum": st.lists(_SCALARS, min_size=1, max_size=3),
                                        "const": _SCALARS}),
    st.fixed_dictionaries({}, optional={"type": st.sampled_from(["integer", "number", "string"]), **_LIMITS}))
_NAMES = st.sampled_from("abc")
_FLAT = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(_NAMES, _LEAF, min_size=1, max_size=3)},
    optional={"required": st.lists(_NAMES, max_size=2), "additionalProperties": st.booleans()})
_ARGUMENTS = st.dictionaries(st.sampled_from("abcd"), _SCALARS, max_size=3)


@settings(max_examples=400, deadline=None)
@given(_FLAT, st.lists(_ARGUMENTS, min_size=1, max_size=4))
def test_each_argument_is_checked_against_its_keywords(schema: dict[str, Any], values: list[Any]) -> None:
    """Flat arguments, so that each keyword (a limit, an enum holding 1 when True is sent...)
    is often what decides."""
    check = checker(schema, ARGUMENTS, tool=True)
    for value in values:
        assert check(value) == problem(schema, value) == reference(schema, value)


def test_an_integer_is_an_int_and_true_is_not_one() -> None:
    """A function typed ``int`` gets an int (2.0 is a JSON integer to the standard, not to
    a tool); an enum or a const of 1 is not matched by True, however the schema is checked."""
    for limit in ({}, {"maximum": 9}):  # compiled checks, jsonschema
        schema = {"type": "object", "properties": {"n": {"type": "integer", **limit},
                                                   "e": {"enum": [1, "a"]}, "c": {"const": [0]}}}
        assert problem(schema, {"n": 2.0}) == "n: expected integer, got 2.0"
        assert problem(schema, {"e": True}) == "e: True is not one of 1, 'a'"
        assert problem(schema, {"c": [False]}) == "c: expected [0], got [False]"
        assert problem(schema, {"n": 2, "e": 1.0, "c": [0.0]}) is None


class Item(BaseModel):
    code: str = Field(pattern="^[A-Z]{3}$")
    price: float = Field(ge=1, le=60)
    note: str = Field("", max_length=5)
    tags: list[str] = Field(default_factory=list, max_length=2)


def quote(item: Item, currency: str = "EUR") -> str:
    """Quote an item."""
    return f"{item.price} {currency}"


@pytest.mark.parametrize(("arguments", "message"), [
    ({"item": {"code": "ABC", "price": 112}}, "item.price: 112 is greater than the maximum of 60"),
    ({"item": {"code": "ABC", "price": 0.5}}, "item.price: 0.5 is less than the minimum of 1"),
    ({"item": {"code": "abc", "price": 5}}, "item.code: 'abc' does not match '^[A-Z]{3}$'"),
    ({"item": {"code": "ABC", "price": 5, "note": "too long"}},
     "item.note: expected at most 5 characters, got 8"),
    ({"item": {"code": "ABC", "price": 5, "tags": ["a", "b", "c"]}},
     "item.tags: expected at most 2 items, got 3"),
    ({"item": {"code": "ABC", "price": "5"}}, "item.price: expected number, got '5'"),  # the kind first
    ({"item": {"price": 112}}, "item.code: missing (required)"),  # the field's own, then what it holds
    ({"item": {"code": "ABC", "price": 5}, "extra": 1}, None),
])
def test_a_pydantic_models_limits_are_checked(arguments: dict[str, Any], message: str | None) -> None:
    schema = parameters(quote)
    assert not compilable(schema)  # maximum, pattern...: jsonschema
    assert problem(schema, arguments) == message


def test_a_schema_jsonschema_cannot_apply_leaves_the_arguments_to_the_tool() -> None:
    """A malformed keyword (an MCP server's, say) is the tool's to judge, as is a $ref that
    resolves to nothing and a type no dialect knows; the rest of the schema is checked."""
    assert problem({"type": "object", "properties": {"n": {"maximum": "x"}}}, {"n": 5}) is None
    schema = {"type": "object", "properties": {"n": {"$ref": "#/definitions/Gone", "maximum": 1},
                                               "t": {"type": "any"}, "m": {"type": "integer", "maximum": 1}}}
    assert problem(schema, {"n": "a", "t": {}, "m": 1}) is None
    assert problem(schema, {"n": "a", "t": {}, "m": 2}) == "m: 2 is greater than the maximum of 1"
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"at": {"type": "array", "items": [{"type": "integer"}]}}}
    assert not compilable(draft7)
    assert problem(draft7, {"at": ["x"]}) == "at[0]: expected integer, got 'x'"  # draft 7's tuple items
