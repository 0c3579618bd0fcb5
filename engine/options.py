"""Agent options from declarative definitions (a YAML mapping, a SQL ``WITH`` clause):
values given as text are read as the option's type, an unknown key is an error naming
it and the known ones. Example::

    from_mapping(ReActOptions, {"max_iterations": "5", "handle_exception": "continue"})
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def from_mapping(kind: type[T], values: Mapping[str, Any]) -> T:
    """A ``kind`` (an options dataclass) from ``values``; keys may use ``-`` for ``_``.
    Text is read as an int, a float or None where the option is one; a nested options
    dataclass (ReflectionOptions' ``loop``) from a nested mapping. ValueError naming a
    key that is not an option, or a value that does not read as its type."""
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init}  # type: ignore[arg-type]
    hints = typing.get_type_hints(kind)
    given: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key).strip().lower().replace("-", "_")
        if name not in fields:
            raise ValueError(f"{kind.__name__}: unknown option {key!r} (options: {', '.join(fields)})")
        given[name] = _read(kind, name, hints[name], value)
    return kind(**given)


def _read(kind: type, name: str, hint: Any, value: Any) -> Any:
    options = typing.get_args(hint) or (hint,)
    if isinstance(value, Mapping):
        nested = next((o for o in options if dataclasses.is_dataclass(o)), None)
        if nested is not None:
            return from_mapping(nested, value)  # type: ignore[arg-type]
    if not isinstance(value, str):
        return value
    text = value.strip()
    if type(None) in options and text.lower() in ("", "null", "none"):
        return None
    for number in (int, float):
        if number in options:
            try:
                return number(text)
            except ValueError:
                if number is float or float not in options:
                    raise ValueError(f"{kind.__name__}.{name}: {value!r} is not a number") from None
    return value


__all__ = ["from_mapping"]
