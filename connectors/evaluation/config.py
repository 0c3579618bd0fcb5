"""What ``eddies eval`` is told: the cases, the candidates, the baseline, the scorers, the
calls it may make live and the floors under which it fails, from a YAML file or from its
flags (a flag adds to the file). Example::

    inputs: cases.jsonl          # or recorded traffic: {app: travel, from_time: "2026-12-01T00:00:00Z",
                                 #   sessions: [...], sample: 200}
    candidates:
      - {name: new, agent: "travel.agents:planner", set: {model: "openai/gpt-5-mini"}}
    baseline: {name: old, agent: "travel.agents:planner"}   # or a candidate's name
    scorers:
      - equals                                  # the case's expected output
      - {type: contains, value: Porto, ignore_case: true}
      - {type: regex, pattern: "\\\\d+ days"}
      - is-json
      - {type: json-schema, schema: {type: object, required: [city]}}
      - {type: python, function: "travel.checks:polite", name: polite}
      - {type: judge, model: openai/gpt-5-mini, rubric: "Names a city and a number of days."}
      - {type: judge, model: openai/gpt-5-mini, rubric: "The more useful plan.", pairwise: true}
      - {type: judge, connection: "travel.models:judge", rubric: "Polite."}   # a connection object
      - {type: similar, threshold: 0.8}           # the offline embedding model, or embedding: NAME
      - {type: threshold, metric: cost_usd, max: 0.01}
    allow_calls: [search_hotels]
    live_models: false           # recorded traffic: reuse a recorded reply to the same model call
    fail_under: {equals: 0.8, all: 0.5}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eddies.connectors.evaluation.scorers import (
    Contains,
    Equals,
    Function,
    IsJson,
    JsonSchema,
    Regex,
    Scorer,
    Threshold,
)

_SCORER_KEYS = {"type", "name", "value", "ignore_case", "pattern", "schema", "function", "threshold",
                "metric", "max", "min", "rubric", "model", "endpoint", "responder", "connection", "pairwise",
                "embedding"}
_KEYS = {"inputs", "candidates", "baseline", "scorers", "allow_calls", "live_models", "fail_under", "title"}


class EvalConfigError(ValueError):
    """A config or flag that cannot be used; the message names the key or flag."""


@dataclass(frozen=True)
class CandidateSpec:
    """An agent to evaluate: ``agent`` as ``--agent`` takes it (``module:attribute``,
    ``FILE.yaml``, ``FILE.sql#name``), with its chat models' ``set`` overrides."""

    name: str
    agent: str
    set: tuple[str, ...] = ()  # FIELD=VALUE or RESOURCE.FIELD=VALUE, as --set


@dataclass(frozen=True)
class TrafficSpec:
    """Cases from an app's recorded traffic: its inputs from ``from_offset``
    (``PARTITION:OFFSET,...``) or ``from_time`` (ISO 8601 or ms), of ``sessions`` only if
    named, ``sample`` sessions at most; ``app`` None: the settings' app."""

    app: str | None = None
    from_offset: str | None = None
    from_time: str | None = None
    sessions: tuple[str, ...] = ()
    sample: int | None = None


@dataclass
class EvalConfig:
    """An evaluation, before it runs."""

    inputs: Path | TrafficSpec | None = None
    candidates: list[CandidateSpec] = field(default_factory=list)
    baseline: CandidateSpec | str | None = None
    scorers: list[Scorer] = field(default_factory=list)
    allow_calls: set[str] = field(default_factory=set)
    live_models: bool = False
    fail_under: dict[str, float] = field(default_factory=dict)
    #: What the kept report is called (default: its candidates and baseline).
    title: str | None = None

    def described(self) -> dict[str, Any]:
        """How the evaluation was set up, as plain data (kept with its report)."""
        given = self.inputs
        cases: Any = (str(given) if isinstance(given, Path) else None if given is None
                      else {k: v for k, v in asdict(given).items() if v not in (None, ())})

        def agent(spec: CandidateSpec) -> dict[str, Any]:
            return {"agent": spec.agent, **({"set": list(spec.set)} if spec.set else {})}

        return {"cases": cases, "candidates": {c.name: agent(c) for c in self.candidates},
                "baseline": (self.baseline if not isinstance(self.baseline, CandidateSpec)
                             else {"name": self.baseline.name, **agent(self.baseline)}),
                "scorers": [s.name for s in self.scorers], "allow_calls": sorted(self.allow_calls),
                "live_models": self.live_models, "fail_under": dict(self.fail_under)}


def load_config(path: str | Path) -> EvalConfig:
    """The config of YAML file ``path`` (relative paths in it: from the file's folder)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise EvalConfigError(f"{path}: {err}") from None
    if not isinstance(data, dict):
        raise EvalConfigError(f"{path}: an eval config is a mapping ({', '.join(sorted(_KEYS))})")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise EvalConfigError(f"{path}: {unknown[0]!r} is not a key of an eval config "
                              f"({', '.join(sorted(_KEYS))})")
    out = EvalConfig()
    given = data.get("inputs")
    if isinstance(given, dict):
        out.inputs = traffic(given, f"{path}: inputs")
    elif given is not None:
        out.inputs = path.parent / str(given)
    for i, entry in enumerate(_list(data, "candidates", path)):
        out.candidates.append(candidate(entry, f"{path}: candidates[{i}]"))
    base = data.get("baseline")
    out.baseline = base if isinstance(base, str) or base is None else candidate(base, f"{path}: baseline")
    for i, entry in enumerate(_list(data, "scorers", path)):
        out.scorers.append(scorer(entry, f"{path}: scorers[{i}]"))
    out.allow_calls = {str(c) for c in _list(data, "allow_calls", path)}
    live = data.get("live_models", False)
    if not isinstance(live, bool):
        raise EvalConfigError(f"{path}: live_models: true or false, got {live!r}")
    out.live_models = live
    floors = data.get("fail_under") or {}
    if not isinstance(floors, dict):
        raise EvalConfigError(f"{path}: fail_under: a mapping of scorer names to pass rates")
    out.fail_under = {str(k): rate(v, f"{path}: fail_under.{k}") for k, v in floors.items()}
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise EvalConfigError(f"{path}: title: a text, got {title!r}")
    out.title = title
    return out


def traffic(entry: dict[str, Any], where: str) -> TrafficSpec:
    """Recorded traffic from ``{app, from_offset, from_time, sessions, sample}``."""
    unknown = sorted(set(entry) - {"app", "from_offset", "from_time", "sessions", "sample"})
    if unknown:
        raise EvalConfigError(f"{where}: {unknown[0]!r} is not a key of recorded inputs (app, from_offset, "
                              "from_time, sessions, sample)")
    if (entry.get("from_offset") is None) == (entry.get("from_time") is None):
        raise EvalConfigError(f"{where}: give one of from_offset and from_time")
    sample = entry.get("sample")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise EvalConfigError(f"{where}: sample: a positive number of sessions, got {sample!r}")
    sessions = entry.get("sessions") or []
    if not isinstance(sessions, list):
        raise EvalConfigError(f"{where}: sessions: a list of session ids")
    return TrafficSpec(None if entry.get("app") is None else str(entry["app"]),
                       None if entry.get("from_offset") is None else str(entry["from_offset"]),
                       None if entry.get("from_time") is None else str(entry["from_time"]),
                       tuple(str(x) for x in sessions), sample)


def candidate(entry: Any, where: str) -> CandidateSpec:
    """A candidate from ``{name, agent, set}`` or from ``NAME=AGENT`` (``AGENT`` alone:
    named by it)."""
    if isinstance(entry, str):
        name, sep, agent = entry.partition("=")
        return CandidateSpec(name if sep else entry, agent if sep else entry)
    if not isinstance(entry, dict) or not isinstance(entry.get("agent"), str):
        raise EvalConfigError(f"{where}: a candidate is {{name, agent, set}} or NAME=AGENT")
    sets = entry.get("set") or {}
    if not isinstance(sets, dict):
        raise EvalConfigError(f"{where}: set: a mapping of FIELD (or RESOURCE.FIELD) to values")
    return CandidateSpec(str(entry.get("name") or entry["agent"]), entry["agent"],
                         tuple(f"{k}={v}" for k, v in sets.items()))


def scorer(entry: Any, where: str) -> Scorer:
    """A scorer from a config entry (a type name, or a mapping with its options)."""
    spec = {"type": entry} if isinstance(entry, str) else entry
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise EvalConfigError(f"{where}: a scorer is a type name or a mapping with a 'type'")
    unknown = sorted(set(spec) - _SCORER_KEYS)
    if unknown:
        raise EvalConfigError(f"{where}: {unknown[0]!r} is not an option of a scorer")
    kind = spec["type"]
    named = {"name": str(spec["name"])} if "name" in spec else {}
    try:
        if kind == "equals":
            return Equals(spec["value"], **named) if "value" in spec else Equals(**named)
        if kind == "contains":
            return Contains(str(spec["value"]), bool(spec.get("ignore_case", False)), **named)
        if kind == "regex":
            return Regex(str(spec["pattern"]), **named)
        if kind == "is-json":
            return IsJson(**named)
        if kind == "json-schema":
            schema = spec["schema"]
            if isinstance(schema, str):  # a file
                schema = json.loads(Path(schema).read_text(encoding="utf-8"))
            return JsonSchema(dict(schema), **named)
        if kind == "python":
            from eddies.connectors.declarative.references import import_target

            return Function(import_target(str(spec["function"]), where, "function"),
                            str(spec.get("name") or spec["function"]), float(spec.get("threshold", 0.5)))
        if kind == "judge":
            from eddies.connectors.evaluation.model_scorers import Judge

            return Judge(_chat_connection(spec, where), str(spec["rubric"]), str(spec.get("model") or ""),
                         bool(spec.get("pairwise", False)), str(spec.get("name") or "judge"))
        if kind == "similar":
            from eddies.connectors.evaluation.model_scorers import Similar

            embedding = str(spec.get("embedding") or "offline")
            return Similar(_embedding_connection(embedding, spec), float(spec.get("threshold", 0.8)),
                           None if embedding == "offline" else embedding, str(spec.get("name") or "similar"))
        if kind == "threshold":
            return Threshold(str(spec["metric"]), _number(spec.get("max")), _number(spec.get("min")),
                             **named)
    except KeyError as err:
        raise EvalConfigError(f"{where}: a {kind} scorer needs {err.args[0]!r}") from None
    except (ValueError, TypeError, OSError) as err:
        raise EvalConfigError(f"{where}: {err}") from None
    raise EvalConfigError(f"{where}: type {kind!r} is not one of equals, contains, regex, is-json, "
                          "json-schema, python, judge, similar, threshold")


def _chat_connection(spec: dict[str, Any], where: str) -> Any:
    """A judge's model: ``connection`` (MODULE:ATTRIBUTE, a chat model connection, or a
    function of no arguments that gives one), ``responder`` (MODULE:FUNCTION, the offline
    scripted model), else litellm asking ``model`` (at ``endpoint``, if given)."""
    if spec.get("connection"):
        from eddies.connectors.declarative.references import import_target

        found = import_target(str(spec["connection"]), where, "connection")
        connection = found if callable(getattr(found, "chat", None)) else found() if callable(found) else None
        if not callable(getattr(connection, "chat", None)):
            raise EvalConfigError(f"{where}: connection {spec['connection']!r} is neither a chat model "
                                  "connection (with a chat method) nor a function that gives one")
        return connection
    if spec.get("responder"):
        from eddies.connectors.declarative.references import import_target
        from eddies.connectors.models.scripted import ScriptedChatModel

        return ScriptedChatModel(import_target(str(spec["responder"]), where, "responder"))
    if not spec.get("model"):
        raise EvalConfigError(f"{where}: a judge needs a 'model' (a litellm model name), a 'connection' "
                              "or a 'responder'")
    from eddies.connectors.models.litellm import LiteLLMChatModel

    return LiteLLMChatModel(api_base=spec.get("endpoint"))


def _embedding_connection(embedding: str, spec: dict[str, Any]) -> Any:
    """``offline`` (the offline model, in eddies[embeddings]) or a litellm embedding model."""
    if embedding == "offline":
        from eddies.connectors.models.embeddings import OfflineEmbeddingModel

        return OfflineEmbeddingModel()
    from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel

    return LiteLLMEmbeddingModel(api_base=spec.get("endpoint"))


def scorer_flag(text: str) -> Scorer:
    """A scorer from ``--scorer``: ``equals``, ``contains:TEXT``, ``icontains:TEXT``,
    ``regex:PATTERN``, ``is-json``, ``json-schema:FILE``, ``python:MODULE:FUNCTION``,
    ``similar[:THRESHOLD]`` (the offline embedding model), ``max:METRIC=N``, ``min:METRIC=N``."""
    kind, _, rest = text.partition(":")
    where = f"--scorer {text}"
    if kind in ("max", "min"):
        metric, sep, value = rest.partition("=")
        if not sep:
            raise EvalConfigError(f"{where}: {kind}:METRIC=NUMBER")
        return scorer({"type": "threshold", "metric": metric, kind: _number(value, where)}, where)
    simple: dict[str, dict[str, Any]] = {
        "equals": {"type": "equals"}, "is-json": {"type": "is-json"},
        "contains": {"type": "contains", "value": rest},
        "icontains": {"type": "contains", "value": rest, "ignore_case": True, "name": "icontains"},
        "regex": {"type": "regex", "pattern": rest}, "json-schema": {"type": "json-schema", "schema": rest},
        "python": {"type": "python", "function": rest}, "similar": {"type": "similar"}}
    if kind == "similar" and rest:  # (only here: another kind's text is no number)
        simple["similar"]["threshold"] = _number(rest, where)
    if kind not in simple or (kind not in ("equals", "is-json", "similar") and not rest):
        raise EvalConfigError(f"{where}: one of equals, contains:TEXT, icontains:TEXT, regex:PATTERN, "
                              "is-json, json-schema:FILE, python:MODULE:FUNCTION, similar[:THRESHOLD], "
                              "max:METRIC=N, min:METRIC=N")
    return scorer(simple[kind], where)


def rate(value: Any, where: str) -> float:
    """A pass rate floor in [0, 1]."""
    got = _number(value, where)
    if got is None or not 0.0 <= got <= 1.0:
        raise EvalConfigError(f"{where}: a pass rate from 0 to 1, got {value!r}")
    return got


def _number(value: Any, where: str = "") -> float | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise EvalConfigError(f"{where}: expected a number, got {value!r}") from None


def _list(data: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise EvalConfigError(f"{path}: {key}: expected a list")
    return value


__all__ = ["CandidateSpec", "EvalConfig", "EvalConfigError", "TrafficSpec", "candidate", "load_config",
           "rate", "scorer", "scorer_flag", "traffic"]
