"""The cases an evaluation runs: an input, and what is expected of it when that is known,
read from a JSONL or CSV file. Example::

    cases = load_cases("cases.jsonl")   # {"input": "3 days in Porto", "expected": "..."} a line
    cases[0].id, cases[0].input, cases[0].expected
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What a case without an expected output holds there.
NOTHING = None


@dataclass(frozen=True)
class Case:
    """One input to evaluate, run as session ``id``; ``expected`` if the file says."""

    id: str
    input: Any
    expected: Any = NOTHING
    has_expected: bool = False


class CaseFileError(ValueError):
    """A cases file that cannot be read: the message names the file and line."""


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a ``.jsonl`` file (one object a line: ``input``, optional ``expected``
    and ``id``) or a ``.csv`` file (columns ``input``, optional ``expected`` and ``id``;
    a cell that is JSON is read as JSON). A case without an id is ``case-N``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise CaseFileError(f"{path}: {err.strerror or err}") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        if reader.fieldnames is None or "input" not in reader.fieldnames:
            raise CaseFileError(f"{path}: a cases CSV file has an 'input' column")
        rows = [(n + 2, {k: _cell(v) for k, v in row.items() if k and v not in (None, "")})
                for n, row in enumerate(reader)]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise CaseFileError(f"{path}:{n}: not JSON: {err}") from None
            if not isinstance(row, dict) or "input" not in row:
                raise CaseFileError(f"{path}:{n}: a case is an object with an 'input'")
            rows.append((n, row))
    cases: list[Case] = []
    seen: set[str] = set()
    for n, row in rows:
        case_id = str(row.get("id") or f"case-{len(cases) + 1}")
        if case_id in seen:
            raise CaseFileError(f"{path}:{n}: case id {case_id!r} again")
        seen.add(case_id)
        cases.append(Case(case_id, row["input"], row.get("expected"), "expected" in row))
    if not cases:
        raise CaseFileError(f"{path}: no cases")
    return cases


def _cell(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


__all__ = ["Case", "CaseFileError", "load_cases"]
