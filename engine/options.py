"""Agent options from declarative definitions (a YAML mapping, a SQL ``WITH`` clause):
values given as text are read as the option's type, an unknown key is an error naming
it, the known ones and the nearest of them (:func:`did_you_mean`, which settings and
definitions use for their keys too). Example::

    from_mapping(ReActOptions, {"max_iterations": "5", "handle_exception": "continue"})
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def did_you_mean(word: str, known: Iterable[str], shown: str = "{!r}") -> str:
    """`` (did you mean X?)`` for the known name nearest ``word`` (``shown`` formats it),
    or "" when none is near: a misspelt key's error names the fix.

    Example: ``did_you_mean("max_iteration", ["max_iterations", "request_timeout"])`` is
    ``" (did you mean 'max_iterations'?)"``."""
    near = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean {shown.format(near[0])}?)" if near else ""


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
            raise ValueError(f"{kind.__name__}: unknown option {key!r}{did_you_mean(name, fields)} "
                             f"(options: {', '.join(fields)})")
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
