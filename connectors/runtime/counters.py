"""The counters a worker exposes (inputs, outputs, calls, dlq, ...), for its status view
and for tests."""

from __future__ import annotations

import threading


class Counters:
    """Thread-safe counters a worker exposes (dlq, inputs, results, outputs, calls, ...).

    Each thread counts in its own dict (no lock on the hot path); readers sum them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._dicts: list[dict[str, int]] = []

    def _own(self) -> dict[str, int]:
        mine: dict[str, int] = {}
        self._local.values = mine
        with self._lock:
            self._dicts.append(mine)
        return mine

    def inc(self, name: str, n: int = 1) -> None:
        """Add ``n`` to ``name``."""
        try:
            mine: dict[str, int] = self._local.values
        except AttributeError:
            mine = self._own()
        mine[name] = mine.get(name, 0) + n

    def get(self, name: str) -> int:
        """The value of ``name`` (0 if never counted)."""
        return self.snapshot().get(name, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter."""
        total: dict[str, int] = {}
        with self._lock:
            dicts = list(self._dicts)
        for d in dicts:
            for k, v in dict(d).items():  # dict(d) is one step under the GIL
                total[k] = total.get(k, 0) + v
        return total
