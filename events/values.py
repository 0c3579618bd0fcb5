"""The one encoding of arbitrary values (inputs, outputs, tool arguments and results).

Values travel as JSON text (RFC 8259, UTF-8) inside Avro ``string`` fields, so any Avro
reader in any language can decode them with its JSON library. Python values map as
``json`` does; in addition dataclasses and pydantic models become objects, enums their
value, tuples and sets arrays. Dict keys must be strings. NaN and infinities become
``null`` (JSON has no such numbers), as with JavaScript's ``JSON.stringify``.

Example::

    >>> encode_value({"a": (1, 2)})
    '{"a":[1,2]}'
    >>> decode_value('{"a":[1,2]}')
    {'a': [1, 2]}
"""

import base64
from typing import Any

import orjson

from .errors import DecodeError, EncodingError


class Base64Bytes(bytes):
    """Bytes that a JSON value holds as base64 text: a content block's data, which comes
    back as bytes because its reader knows it is. Other bytes are refused (they would come
    back as text). Example: ``encode_value(Base64Bytes(b"hi"))`` -> ``'"aGk="'``."""

    __slots__ = ()


def _default(obj: Any) -> Any:
    # orjson handles dataclasses, enums, tuples and str/int/dict subclasses natively.
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Base64Bytes):  # a content block's data; other bytes stay an error
        return base64.b64encode(obj).decode()
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(obj).__name__} is not JSON-encodable")


def encode_value(value: Any, where: str = "value", of: str | None = None) -> str:
    """Encode ``value`` as compact JSON text; ``where`` names the field in errors (``of``:
    what it belongs to, ``"{where} {of}"``, joined only when there is an error)."""
    try:
        return orjson.dumps(value, default=_default).decode()
    except TypeError as err:
        raise EncodingError(f"{where if of is None else f'{where} {of}'}: {err}") from None


def decode_value(text: str, where: str = "value", of: str | None = None) -> Any:
    """Decode JSON text written by :func:`encode_value` (or any JSON writer); ``where``
    and ``of`` as for :func:`encode_value`."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError) as err:
        raise DecodeError(f"{where if of is None else f'{where} {of}'}: invalid JSON: {err}") from None
