"""Memory an action reads and writes (short-term: per session, across runs; sensory: per
run) and the metrics it reports; both buffered until the action completes, so a
suspended or replayed execution leaves no trace. Example::

    memory = Memory({}, "short_term_memory")
    memory.set("count", 1)
    memory.commit()
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from eddies.events import EncodingError, decode_value, encode_value

_MISSING = object()
_NONE: Mapping[str, str] = MappingProxyType({})


def _utf8_len(text: str) -> int:
    # isascii() is O(1) in CPython: most memory is ASCII JSON, and needs no encoding here.
    return len(text) if text.isascii() else len(text.encode())


class Memory:
    """Key-value memory with JSON values; writes are buffered until the action completes.

    Example: ``ctx.short_term_memory.set("count", ctx.short_term_memory.get("count", 0) + 1)``.
    """

    __slots__ = ("_base", "_name", "_under", "_writes")

    def __init__(self, base: dict[str, str], name: str, under: Mapping[str, str] | None = None) -> None:
        self._base = base
        self._writes: dict[str, str | None] = {}
        self._name = name
        # A sub-agent's memory reads its parent's where it has no key of its own (read-only).
        self._under: Mapping[str, str] = under or _NONE

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (a fresh copy), or ``default``."""
        text = self._writes.get(key, _MISSING)
        if text is _MISSING:
            text = self._base.get(key)
            if text is None:
                text = self._under.get(key)
        if text is None:
            return default
        return decode_value(text)  # type: ignore[arg-type]

    def set(self, key: str, value: Any) -> None:
        """Store a JSON-encodable value under ``key``."""
        try:
            self._writes[key] = encode_value(value)
        except EncodingError:  # again, to name the key (not built for every write)
            encode_value(value, f"{self._name}[{key!r}]")
            raise

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self._writes[key] = None

    def __contains__(self, key: object) -> bool:
        if key in self._writes:
            return self._writes[key] is not None
        return key in self._base or key in self._under

    def keys(self) -> Iterator[str]:
        """Keys present, including this action's writes."""
        seen = set()
        for k in (*self._under, *self._base, *self._writes):
            if k not in seen and k in self:
                seen.add(k)
                yield k

    @property
    def written(self) -> bool:
        """Whether the action wrote anything (set or delete)."""
        return bool(self._writes)

    def size_after_commit(self) -> int:
        """UTF-8 bytes of the keys and JSON values the memory would hold after :meth:`commit`."""
        base, writes = self._base, self._writes
        size = sum(_utf8_len(k) + _utf8_len(v) for k, v in base.items() if k not in writes)
        return size + sum(_utf8_len(k) + _utf8_len(v) for k, v in writes.items() if v is not None)

    def commit(self) -> None:
        """Apply the buffered writes (called by the machine when the action completes)."""
        for k, v in self._writes.items():
            if v is None:
                self._base.pop(k, None)
            else:
                self._base[k] = v
        self._writes.clear()


class Metrics:
    """Counters and observations of an action, reported only if it completes; and what
    the agent's hooks counted of the calls it asked (``hooked``: ``"HOOK.NAME" -> n``),
    reported whether it completes, waits or fails."""

    __slots__ = ("hooked", "updates")

    def __init__(self) -> None:
        self.updates: list[tuple[str, str, float]] = []
        self.hooked: dict[str, float] = {}

    def inc(self, name: str, n: float = 1) -> None:
        """Add ``n`` to counter ``name``."""
        self.updates.append(("counter", name, n))

    def count_hooked(self, counts: dict[str, float]) -> None:
        """Add what hooks counted of one call."""
        hooked = self.hooked
        for key, n in counts.items():
            hooked[key] = hooked.get(key, 0) + n

    def observe(self, name: str, value: float) -> None:
        """Record one observation of histogram ``name``."""
        self.updates.append(("histogram", name, value))


__all__ = ["Memory", "Metrics"]
