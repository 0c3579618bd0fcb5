"""The metadata filters of :mod:`eddies.connectors.stores.filters` as a Postgres ``WHERE``
condition over a ``jsonb`` column, meaning what they mean in the embedded store (a test
checks the two agree on generated documents and filters).

Keys and values travel as query parameters, never inside the SQL text; only the fixed
operators are written into it. A key a document lacks reads as JSON ``null``, as
``metadata.get(key)`` does. Example::

    sql, params = where({"city": "Lisbon", "price": {"$lt": 30}})
    # sql:    "(coalesce(metadata -> %s, 'null'::jsonb) = %s::jsonb AND ...)"
    # params: ["city", '"Lisbon"', "price", ...]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from eddies.connectors.stores.filters import check, kind

_VALUE = "coalesce(metadata -> %s, 'null'::jsonb)"
_ORDER = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def where(filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """A condition on the ``metadata`` column (``TRUE`` for no filters) and its
    parameters, in order; a ValueError names a malformed filter, as :func:`check` does."""
    check(filters)
    params: list[Any] = []
    return _all(filters, params), params


def _all(filters: Mapping[str, Any], params: list[Any]) -> str:
    parts = []
    for key, value in filters.items():
        if key in ("$and", "$or"):
            joined = f" {key[1:].upper()} ".join(_all(part, params) for part in value)
            parts.append(f"({joined})")
        elif isinstance(value, Mapping):
            parts.extend(_compare(key, op, operand, params) for op, operand in value.items())
        else:
            parts.append(_compare(key, "$eq", value, params))
    return "(" + " AND ".join(parts) + ")" if parts else "TRUE"


def _compare(key: str, op: str, operand: Any, params: list[Any]) -> str:
    params.append(key)
    if op in ("$eq", "$ne"):
        params.append(json.dumps(operand))
        return f"{_VALUE} {'=' if op == '$eq' else '<>'} %s::jsonb"
    if op in ("$in", "$nin"):
        params.append([json.dumps(x) for x in operand])
        found = f"{_VALUE} = ANY(%s::jsonb[])"
        return found if op == "$in" else f"NOT ({found})"
    # An order holds between values of one kind, as in Python; strings by code point
    # (the "C" collation orders UTF-8 bytes, which is the same), not by the locale's rules.
    # CASE, not AND: SQL may evaluate AND's operands in any order, and the cast fails on
    # a value of another kind.
    params.append(kind(operand))
    params.append(key)
    if kind(operand) == "number":
        params.append(operand)
        compared = f"({_VALUE})::numeric {_ORDER[op]} %s"
    elif kind(operand) == "string":
        params.append(operand)
        compared = f"({_VALUE} #>> '{{}}') COLLATE \"C\" {_ORDER[op]} %s COLLATE \"C\""
    else:
        params.append(json.dumps(operand))
        compared = f"{_VALUE} {_ORDER[op]} %s::jsonb"
    return f"(CASE WHEN jsonb_typeof({_VALUE}) = %s THEN {compared} ELSE FALSE END)"

__all__ = ["where"]
