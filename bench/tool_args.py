"""A tool call's arguments against its schema: the compiled checks of engine/tool_args.py
next to jsonschema (engine/json_schema.py), and what importing jsonschema costs.

Run: ``.venv/bin/python bench/tool_args.py`` (a few seconds). For three tools' schemas, as
``parameters()`` makes them from type hints (the calculator's ``add``; ``book``, with an
enum, a list and an optional; ``quote``, a pydantic model with Field limits), the time of
one check of good and of bad arguments (the best of 5 repeats of 5,000): by the compiled
checks (for ``quote`` they read no limit: what was checked before jsonschema), and by
jsonschema's validator made once for the schema (``iter_errors``, the first problem in
reading order described as the model sees it). Then, in fresh processes (the best of 5):
what ``import eddies`` costs, and what the first jsonschema check adds (its import, then
the validator's making), and making a validator for one more schema.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, Field

from eddies.engine.json_schema import checker
from eddies.engine.tool_args import ARGUMENTS, _Checks, compilable, problem
from eddies.engine.tool_schema import parameters


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def book(city: Literal["Oslo", "Lima"], nights: list[int], note: str | None = None, guests: int = 1) -> str:
    """Book a room."""
    return city


class Item(BaseModel):
    code: str = Field(pattern="^[A-Z]{3}$")
    price: float = Field(ge=1, le=60)
    note: str = Field("", max_length=20)


def quote(item: Item, currency: str = "EUR") -> str:
    """Quote an item."""
    return currency


#: name, function, good arguments, bad arguments
TOOLS: list[tuple[str, Callable[..., Any], dict[str, Any], dict[str, Any]]] = [
    ("add", add, {"a": 3, "b": 2}, {"a": 3, "b": "2"}),
    ("book", book, {"city": "Oslo", "nights": [1, 2], "note": None, "guests": 2},
     {"city": "Oslo", "nights": [1, "2"]}),
    ("quote", quote, {"item": {"code": "KTL", "price": 12.5}, "currency": "EUR"},
     {"item": {"code": "KTL", "price": 112}}),
]

_IMPORT = """
import time
t0 = time.perf_counter()
import eddies
t1 = time.perf_counter()
from eddies.engine.json_schema import checker
checker({"type": "object", "properties": {"a": {"type": "integer", "maximum": 9}}})({"a": 1})
t2 = time.perf_counter()
import jsonschema, referencing
checker({"type": "object", "properties": {"b": {"type": "string", "maxLength": 9}}})({"b": "x"})
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""
_JSONSCHEMA_ONLY = "import time; t = time.perf_counter(); import jsonschema.validators, referencing; " \
                   "print(time.perf_counter() - t)"


def per_call_us(check: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(check, number=number, repeat=5)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=5_000, help="checks per repeat")
    args = parser.parse_args()
    n = args.number
    print(f"{'tool':<7} {'checked by':<10} {'compiled good':>14} {'bad':>8} {'jsonschema good':>16} "
          f"{'bad':>8}  message")
    for name, fn, good, bad in TOOLS:
        schema = parameters(fn)
        compiled = _Checks(schema.get("$defs", {})).of(schema)
        validated = checker(schema, ARGUMENTS, tool=True)
        assert validated(good) is None and validated(bad) == problem(schema, bad)
        times = [per_call_us(partial(compiled, value, ""), n) for value in (good, bad)]
        times += [per_call_us(partial(validated, value), n) for value in (good, bad)]
        path = "compiled" if compilable(schema) else "jsonschema"
        print(f"{name:<7} {path:<10} {times[0]:>11.2f} us {times[1]:>5.2f} us {times[2]:>13.2f} us "
              f"{times[3]:>5.2f} us  {problem(schema, bad)}")
    runs = [[float(x) for x in subprocess.run([sys.executable, "-c", _IMPORT], check=True,
                                              capture_output=True, text=True).stdout.split()]
            for _ in range(5)]
    alone = min(float(subprocess.run([sys.executable, "-c", _JSONSCHEMA_ONLY], check=True,
                                     capture_output=True, text=True).stdout) for _ in range(5))
    eddies_ms, first_ms, next_ms = (min(r[i] for r in runs) * 1e3 for i in range(3))
    print(f"import eddies: {eddies_ms:.0f} ms (jsonschema not imported); the first jsonschema check "
          f"after it: {first_ms:.1f} ms (import jsonschema, referencing alone: {alone * 1e3:.1f} ms); "
          f"a validator for one more schema and its first check: {next_ms:.2f} ms")


if __name__ == "__main__":
    main()
