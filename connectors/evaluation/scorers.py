"""Scorers: what judges a candidate's answer to a case, in the vocabulary promptfoo made
common. Each is called with the case's result (and the baseline's, for a pairwise one)
and returns a :class:`Score`: passed or not, a value in [0, 1], and why. Example::

    scorers = [Equals(), Contains("Lisbon"), Regex(r"\\d+ days"), IsJson(),
               JsonSchema({"type": "object", "required": ["city"]}),
               Function(lambda output, case: len(str(output)) < 200, name="short"),
               Threshold("cost_usd", max=0.01)]
    scorers[1](result).passed

A scorer that finds no output (the run failed) fails the case, saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eddies.connectors.evaluation.cases import Case
from eddies.connectors.evaluation.results import METRICS, CaseResult
from eddies.engine.json_schema import Check, Wording, checker, schema_problem


@dataclass(frozen=True)
class Score:
    """A scorer's verdict on one case."""

    passed: bool
    value: float
    reason: str = ""


class Scorer(Protocol):
    """Judges one case's result (``baseline``: the baseline's result of the same case)."""

    @property
    def name(self) -> str:
        """What the report calls it (unique among an evaluation's scorers)."""

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score: ...


def answer_text(value: Any) -> str:
    """An answer (or an expected output) as the text scorers read: itself, or its JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _verdict(passed: bool, reason: str) -> Score:
    return Score(passed, 1.0 if passed else 0.0, "" if passed else reason)


def _failed(result: CaseResult) -> Score | None:
    return None if result.error is None else Score(False, 0.0, f"no answer: {result.error}")


class _Expected:
    def __repr__(self) -> str:
        return "EXPECTED"


#: What :class:`Equals` compares with by default: the case's expected output.
EXPECTED: Any = _Expected()


@dataclass(frozen=True)
class Equals:
    """The output equals ``value`` (default: the case's expected output); texts compare
    without their surrounding whitespace, other values as JSON."""

    value: Any = EXPECTED
    name: str = "equals"

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        case: Case = result.case
        if self.value is EXPECTED and not case.has_expected:
            return Score(False, 0.0, "the case has no expected output")
        wanted = case.expected if self.value is EXPECTED else self.value
        got = result.output
        same = (got.strip() == wanted.strip() if isinstance(got, str) and isinstance(wanted, str)
                else answer_text(got) == answer_text(wanted))
        return _verdict(same, f"expected {answer_text(wanted)[:80]!r}, got {answer_text(got)[:80]!r}")


@dataclass(frozen=True)
class Contains:
    """The output (as text) contains ``text``."""

    text: str
    ignore_case: bool = False
    name: str = "contains"

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        got = answer_text(result.output)
        found = (self.text.lower() in got.lower()) if self.ignore_case else self.text in got
        return _verdict(found, f"{self.text!r} is not in the answer")


@dataclass(frozen=True)
class Regex:
    """A match of ``pattern`` somewhere in the output (as text)."""

    pattern: str
    name: str = "regex"

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as err:
            raise ValueError(f"regex scorer: {self.pattern!r}: {err}") from None

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        return _verdict(re.search(self.pattern, answer_text(result.output)) is not None,
                        f"no match of {self.pattern!r}")


@dataclass(frozen=True)
class IsJson:
    """The output is JSON: a value (an agent's structured output) or a text that parses."""

    name: str = "is-json"

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        return _verdict(_json_of(result.output) is not _NOT_JSON, "the answer is not JSON")


#: How the json-schema scorer names the answer and a field its schema does not allow.
ANSWER = Wording("the answer", "not allowed by the schema", "allowed")


@dataclass(frozen=True)
class JsonSchema:
    """The output (or the JSON a text holds) matches JSON schema ``schema``: every keyword
    of its dialect (2020-12 unless ``$schema`` says), checked by jsonschema; the reason names
    the first wrong field (``price: 112 is greater than the maximum of 60``). A schema that
    is not valid is a ValueError here."""

    schema: dict[str, Any]
    name: str = "json-schema"
    _check: Check = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        wrong = schema_problem(self.schema)
        if wrong is not None:
            raise ValueError(f"json-schema scorer: the schema is not valid: {wrong}")
        object.__setattr__(self, "_check", checker(self.schema, ANSWER))

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        value = _json_of(result.output)
        if value is _NOT_JSON:
            return Score(False, 0.0, "the answer is not JSON")
        wrong = self._check(value)
        return _verdict(wrong is None, str(wrong))


@dataclass(frozen=True)
class Function:
    """``fn(output, case)``: True/False, a number in [0, 1] (passed from ``threshold`` on),
    or a :class:`Score`."""

    fn: Callable[[Any, Case], Any]
    name: str = "function"
    threshold: float = 0.5

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        if (failed := _failed(result)) is not None:
            return failed
        got = self.fn(result.output, result.case)
        if isinstance(got, Score):
            return got
        if isinstance(got, bool):
            return _verdict(got, f"{self.name} said no")
        if isinstance(got, int | float):
            return Score(float(got) >= self.threshold, float(got),
                         "" if got >= self.threshold else f"{got:g} < {self.threshold:g}")
        raise TypeError(f"scorer {self.name!r}: the function returned {got!r:.60}; a bool, a number "
                        "or a Score")


@dataclass(frozen=True)
class Threshold:
    """Metric ``metric`` (cost_usd, tokens, latency_ms, iterations, tool_calls,
    refused_calls) at most ``max`` and at least ``min``."""

    metric: str
    max: float | None = None
    min: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"threshold: no metric {self.metric!r}: one of {', '.join(METRICS)}")
        if self.max is None and self.min is None:
            raise ValueError(f"threshold on {self.metric}: give max, min or both")
        if not self.name:
            object.__setattr__(self, "name", f"{self.metric}-threshold")

    def __call__(self, result: CaseResult, baseline: CaseResult | None = None) -> Score:
        got = result.metric(self.metric)
        low = self.min is not None and got < self.min
        high = self.max is not None and got > self.max
        if not (low or high):
            return Score(True, 1.0)
        return Score(False, 0.0, f"{self.metric} {got:g} is "
                     + (f"over {self.max:g}" if high else f"under {self.min:g}"))


_NOT_JSON = object()


def _json_of(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return _NOT_JSON


__all__ = ["EXPECTED", "Contains", "Equals", "Function", "IsJson", "JsonSchema", "Regex", "Score", "Scorer",
           "Threshold", "answer_text"]
