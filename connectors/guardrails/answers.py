"""Checks of an agent's answer before it goes out: a JSON schema it must match, a regular
expression it must (or must not) match. Each is a hook whose ``check_answer`` refuses an
answer with the reason: a ReAct agent sends it back to its model once, and fails the run
(``OutputRefusedError``) if the second answer is refused too. Example::

    agent.add_hook(JsonSchemaCheck({"type": "object", "required": ["price"],
                                    "properties": {"price": {"type": "number", "maximum": 60}}}))
    agent.add_hook(PatternCheck(r"(?i)guarantee", must_match=False, reason="it promises a guarantee"))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from eddies.engine import Hook, InputInfo, PlanError, Refuse
from eddies.engine.json_schema import Wording, checker, schema_problem


class JsonSchemaCheck(Hook):
    """Refuses an answer that does not match ``schema`` (an answer given as text is read
    as JSON first; text that is not JSON is refused as such)."""

    name = "json-schema"

    def __init__(self, schema: Mapping[str, Any]) -> None:
        problem = schema_problem(schema)
        if problem is not None:
            raise PlanError(f"JsonSchemaCheck: the schema is not valid: {problem}")
        self.schema = dict(schema)
        self._check = checker(self.schema, Wording("the answer"))

    def check_answer(self, value: Any, info: InputInfo) -> Refuse | None:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return Refuse("it is not JSON; answer with only a JSON value that matches the schema "
                              f"{json.dumps(self.schema)}")
        problem = self._check(value)
        return None if problem is None else Refuse(problem)


class PatternCheck(Hook):
    """Refuses an answer (as text: JSON for one that is not) that does not match
    ``pattern`` (``must_match=False``: that does), saying ``reason``."""

    name = "pattern"

    def __init__(self, pattern: str, *, must_match: bool = True, reason: str = "") -> None:
        try:
            self._pattern = re.compile(pattern)
        except re.error as err:
            raise PlanError(f"PatternCheck: {pattern!r} is not a regular expression: {err}") from None
        self.must_match = must_match
        said = f"it does not match {pattern!r}" if must_match else f"it matches {pattern!r}"
        self.reason = reason or said

    def check_answer(self, value: Any, info: InputInfo) -> Refuse | None:
        text = value if isinstance(value, str) else json.dumps(value)
        if (self._pattern.search(text) is not None) != self.must_match:
            return Refuse(self.reason)
        return None


__all__ = ["JsonSchemaCheck", "PatternCheck"]
