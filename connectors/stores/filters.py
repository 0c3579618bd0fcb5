"""The metadata filters of vector store operations, in the shape Chroma's ``where`` and
Mongo use: ``{"city": "Lisbon"}`` (equal), ``{"price": {"$lt": 30}}`` (``$eq $ne $gt $gte
$lt $lte $in $nin``), and ``{"$and": [...]}`` / ``{"$or": [...]}`` of such; several keys in
one mapping must all hold. A filter that is not of this shape is a ValueError naming the
part that is wrong, raised before anything is read. Example::

    check({"$or": [{"city": "Lisbon"}, {"price": {"$lt": 30}}]})
    matches({"city": "Porto", "price": 25}, {"$or": [{"city": "Lisbon"}, {"price": {"$lt": 30}}]})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and b is not None and a > b,
    "$gte": lambda a, b: a is not None and b is not None and a >= b,
    "$lt": lambda a, b: a is not None and b is not None and a < b,
    "$lte": lambda a, b: a is not None and b is not None and a <= b,
    "$in": lambda a, b: a in b,
    "$nin": lambda a, b: a not in b,
}


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
            try:
                if not all(_COMPARE[op](have, operand) for op, operand in value.items()):
                    return False
            except TypeError:  # an order between values of different types: no match
                return False
        elif metadata.get(key) != value:
            return False
    return True


__all__ = ["check", "matches"]
