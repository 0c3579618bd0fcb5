"""The metadata filters of vector store operations, in the shape Chroma's ``where`` and
Mongo use: ``{"city": "Lisbon"}`` (equal), ``{"price": {"$lt": 30}}`` (``$eq $ne $gt $gte
$lt $lte $in $nin``), and ``{"$and": [...]}`` / ``{"$or": [...]}`` of such; several keys in
one mapping must all hold. A filter that is not of this shape is a ValueError naming the
part that is wrong, raised before anything is read.

Values compare as JSON values, the same in every store: ``true`` is not ``1``; an order
(``$gt``...) holds between two numbers, two strings (by code point) or two booleans, never
between values of different kinds; a key a document lacks is ``null``. Example::

    check({"$or": [{"city": "Lisbon"}, {"price": {"$lt": 30}}]})
    matches({"city": "Porto", "price": 25}, {"$or": [{"city": "Lisbon"}, {"price": {"$lt": 30}}]})
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any


def metadata_json(metadata: Any) -> str:
    """``metadata`` as JSON text; a TypeError if JSON cannot hold it, since metadata is
    journaled and filtered as JSON (``metadata_json({"city": "Porto"})``)."""
    try:
        return json.dumps(metadata)
    except (TypeError, ValueError) as err:
        raise TypeError(f"a document's metadata must be JSON: {err}") from None


def kind(value: Any) -> str:
    """A value's JSON kind: ``boolean``, ``number``, ``string``, ``null``, ``array`` or
    ``object`` (Postgres' ``jsonb_typeof`` names)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list | tuple) else "object"


def same(a: Any, b: Any) -> bool:
    """JSON equality: Python's, except that a boolean equals no number."""
    return kind(a) == kind(b) and a == b


#: The kinds of value an order compares.
ORDERED_KINDS = ("number", "string", "boolean")

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": same,
    "$ne": lambda a, b: not same(a, b),
    "$gt": lambda a, b: kind(a) == kind(b) and a > b,
    "$gte": lambda a, b: kind(a) == kind(b) and a >= b,
    "$lt": lambda a, b: kind(a) == kind(b) and a < b,
    "$lte": lambda a, b: kind(a) == kind(b) and a <= b,
    "$in": lambda a, b: any(same(a, x) for x in b),
    "$nin": lambda a, b: not any(same(a, x) for x in b),
}
#: The comparison operators, in the order an error message lists them.
OPERATORS = tuple(_COMPARE)


def check(filters: Mapping[str, Any], where: str = "filters") -> None:
    """Raise a ValueError naming what is wrong in ``filters``."""
    if not isinstance(filters, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {filters!r:.60}")
    for key, value in filters.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise ValueError(f"{where}.{key}: expected a non-empty list of filters")
            for i, part in enumerate(value):
                check(part, f"{where}.{key}[{i}]")
        elif key.startswith("$"):
            raise ValueError(f"{where}: {key} is not an operator here (only $and, $or)")
        elif isinstance(value, Mapping):
            for op, operand in value.items():
                if op not in _COMPARE:
                    raise ValueError(f"{where}.{key}: {op} is not an operator (known: "
                                     f"{', '.join(_COMPARE)})")
                if op in ("$in", "$nin") and not isinstance(operand, list):
                    raise ValueError(f"{where}.{key}.{op}: expected a list")
                if op in ("$gt", "$gte", "$lt", "$lte") and kind(operand) not in ORDERED_KINDS:
                    raise ValueError(f"{where}.{key}.{op}: expected a number, a string or a "
                                     f"boolean, got {operand!r:.40}")


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether a document's ``metadata`` satisfies ``filters`` (checked: :func:`check`)."""
    for key, value in filters.items():
        if key == "$and":
            if not all(matches(metadata, part) for part in value):
                return False
        elif key == "$or":
            if not any(matches(metadata, part) for part in value):
                return False
        elif isinstance(value, Mapping):
            have = metadata.get(key)
            if not all(_COMPARE[op](have, operand) for op, operand in value.items()):
                return False
        elif not same(metadata.get(key), value):
            return False
    return True


__all__ = ["OPERATORS", "ORDERED_KINDS", "check", "kind", "matches", "same"]
