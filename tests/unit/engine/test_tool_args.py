"""The compiled argument checks (engine/tool_args.py) say exactly what a plain reading of
the schema says: the interpreter the checks replaced is kept here as the reference, and
both judge generated schemas and values (the messages a model sees must not change)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eddies.engine.tool_args import _CHECKS, _short, problem


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


def reference(schema: Mapping[str, Any], arguments: Any) -> str | None:
    return _problem(schema, arguments, "", schema.get("$defs", {}))


_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([1.5, "a", "b", ""]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)),
    max_leaves=8)


def _schemas(refs: bool) -> st.SearchStrategy[dict[str, Any]]:
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
        )

    leaves = st.one_of(
        st.fixed_dictionaries({}, optional={"type": st.one_of(_TYPES, st.lists(_TYPES, max_size=2)),
                                            "enum": st.lists(_SCALARS, min_size=1, max_size=3),
                                            "const": _SCALARS}),
        *([st.just({"$ref": "#/$defs/Node"}), st.just({"$ref": "#/$defs/Missing"})] if refs else []),
    )
    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(_schemas(refs=True), _schemas(refs=False), st.lists(_VALUES, min_size=1, max_size=4))
def test_the_compiled_checks_say_what_the_schema_says(schema: dict[str, Any], node: dict[str, Any],
                                                      values: list[Any]) -> None:
    schema = {**schema, "$defs": {"Node": node}}
    for value in values:  # the same schema object: the second and later use the compiled checks
        assert problem(schema, value) == reference(schema, value)


def test_a_recursive_definition_is_checked_all_the_way_down() -> None:
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}
    schema = {"$ref": "#/$defs/Tree", "$defs": {"Tree": tree}}
    value = {"name": "a", "kids": [{"name": "b", "kids": [{"name": 3}]}]}
    expected = "kids[0].kids[0].name: expected string, got 3"
    assert problem(schema, value) == reference(schema, value) == expected
