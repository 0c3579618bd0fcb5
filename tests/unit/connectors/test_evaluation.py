"""``eddies eval``: candidates run on cases, scored, compared with a baseline; a call that
may be a side effect is not made unless allowed, and the report says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from eddies import (
    AgentPlan,
    ChatMessage,
    ChatModelSetup,
    FunctionTool,
    MessageRole,
    ReActAgent,
    ResourceType,
    ScriptedChatModel,
    ToolCall,
)
from eddies.cli import app
from eddies.eval import (
    CallPolicy,
    Case,
    CaseResult,
    Contains,
    Equals,
    EvalReport,
    Function,
    IsJson,
    JsonSchema,
    Regex,
    Threshold,
    evaluate,
    load_cases,
    paired_bootstrap,
)

CAPITALS = {"France": "Paris", "Portugal": "Lisbon", "Spain": "Madrid", "Italy": "Rome"}
CASES = [{"id": c, "input": c, "expected": CAPITALS.get(c, "Tokyo")}
         for c in ("France", "Portugal", "Spain", "Italy", "Japan")]
BOOKED: list[str] = []


def _asked(messages: list[ChatMessage]) -> str:
    return next(m.content for m in messages if m.role is MessageRole.USER)


def knows_all(messages: list[ChatMessage], tools: list[Any]) -> str:
    return CAPITALS.get(_asked(messages), "I do not know")


def knows_two(messages: list[ChatMessage], tools: list[Any]) -> str:
    country = _asked(messages)
    return CAPITALS[country] if country in ("France", "Portugal") else "Porto"


def _geo(responder: Any) -> ReActAgent:
    agent = ReActAgent("geo", model="llm")
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModel(responder))
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    return agent


def new_geo() -> ReActAgent:
    return _geo(knows_all)


def old_geo() -> ReActAgent:
    return _geo(knows_two)


def book(city: str) -> str:
    """Book a room in ``city`` (a side effect: not idempotent)."""
    BOOKED.append(city)
    return f"booked in {city}"


def books(messages: list[ChatMessage], tools: list[Any]) -> Any:
    if messages[-1].role is MessageRole.TOOL:
        return messages[-1].content
    return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall("1", "book", {"city": _asked(messages)})])


def booker() -> ReActAgent:
    agent = _geo(books)
    agent.resources = [r for r in agent.resources if r.name != "llm"]
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["book"]))
    agent.add_resource("book", ResourceType.TOOL, FunctionTool(book))
    return agent


def _cases_file(tmp_path: Path, rows: list[dict[str, Any]] = CASES) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_candidates_are_scored_and_compared_with_the_baseline_as_counted_by_hand(tmp_path: Path) -> None:
    cases = load_cases(_cases_file(tmp_path))
    told: list[tuple[str, int, int]] = []
    report = evaluate(cases, {"new": AgentPlan.compile(new_geo())},
                      [Equals(), Contains("o"), Threshold("tokens", max=100)],
                      baseline=("old", AgentPlan.compile(old_geo())), progress=lambda *a: told.append(a))
    assert told == [("old", n, 5) for n in range(1, 6)] + [("new", n, 5) for n in range(1, 6)]
    new, old = report.summary("new"), report.summary("old")
    # new: Paris, Lisbon, Madrid, Rome right, Japan not: 4 of 5; old: France and Portugal: 2 of 5.
    assert new.pass_rates["equals"] == 0.8 and old.pass_rates["equals"] == 0.4
    # "o" in: new Lisbon, Rome, "I do not know" (3); old Lisbon, Porto x3 (4).
    assert new.pass_rates["contains"] == 0.6 and old.pass_rates["contains"] == 0.8
    assert new.pass_rates["all"] == 0.4  # Lisbon and Rome pass all three
    diff = new.vs_baseline["equals"]
    assert diff.delta == pytest.approx(0.4) and diff.low <= 0.4 <= diff.high
    assert old.vs_baseline == {}
    # One model call a case, no tool: 25 tokens in, len(answer) // 4 + 1 out (the scripted model).
    assert new.iterations_mean == 1 and new.tool_calls_mean == 0 and new.errors == 0
    assert [r.tokens for r in report.results["new"]] == [27, 27, 27, 27, 29]
    assert new.tokens_p95 == 29 and new.tokens_mean == pytest.approx(27.4)
    lines = "\n".join(report.lines())
    assert "old (baseline): 5 cases" in lines and "+0.400 vs baseline" in lines
    assert report.below({"equals": 0.9}) == ["new: equals 0.8 < 0.9"] and report.below({"all": 0.4}) == []
    with pytest.raises(KeyError, match="no such scorer"):
        report.below({"nope": 0.5})
    data = report.to_dict()
    assert data["cases"][4]["by"]["new"]["output"] == "I do not know"
    assert data["cases"][4]["by"]["old"]["scores"]["equals"]["passed"] is False


def test_a_call_that_may_be_a_side_effect_is_not_made_and_is_reported(tmp_path: Path) -> None:
    BOOKED.clear()
    cases = [Case("c1", "Lisbon"), Case("c2", "Porto")]
    plan = AgentPlan.compile(booker())
    report = evaluate(cases, {"booker": plan}, [Contains("booked")])
    assert BOOKED == []  # never run
    summary = report.summary("booker")
    assert summary.refused_calls == 2 and summary.pass_rates["contains"] == 0.0
    [first, _] = report.results["booker"]
    [why] = first.refused.values()
    assert "TOOL book is not idempotent" in why and "--allow-call book" in why
    assert "CallRefusedError" in first.output  # the model saw the refusal
    allowed = evaluate(cases, {"booker": plan}, [Contains("booked")], policy=CallPolicy(frozenset({"book"})))
    assert BOOKED == ["Lisbon", "Porto"] and allowed.summary("booker").pass_rates["contains"] == 1.0
    assert allowed.summary("booker").refused_calls == 0 and allowed.summary("booker").tool_calls_mean == 1


def _result(output: Any, expected: Any = None, error: str | None = None) -> CaseResult:
    return CaseResult(Case("c", "q", expected, expected is not None), "x", output=output, error=error)


def test_scorers() -> None:
    assert Equals()(_result(" Paris\n", "Paris")).passed
    assert not Equals()(_result("Paris")).passed  # no expected output
    assert Equals({"a": 1})(_result({"a": 1}, "ignored")).passed
    assert not Equals()(_result("Lyon", "Paris")).passed
    assert Contains("paris", ignore_case=True)(_result("PARIS!")).passed
    assert Regex(r"\d+ days")(_result("3 days in Porto")).passed
    assert not Regex(r"^\d")(_result("three")).passed
    assert IsJson()(_result('{"a": 1}')).passed and IsJson()(_result({"a": 1})).passed
    assert not IsJson()(_result("not json")).passed
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert JsonSchema(schema)(_result('{"city": "Oslo"}')).passed
    wrong = JsonSchema(schema)(_result({"town": "Oslo"}))
    assert not wrong.passed and wrong.reason == "city: missing (required)"
    assert Function(lambda out, case: len(out) < 5, name="short")(_result("abc")).passed
    assert Function(lambda out, case: 0.3, name="so-so")(_result("abc")).value == 0.3
    assert not Function(lambda out, case: 0.3, name="so-so")(_result("abc")).passed
    failed = Contains("x")(_result(None, error="ModelFailedError: down"))
    assert not failed.passed and "no answer" in failed.reason
    over = Threshold("cost_usd", max=0.01)(CaseResult(Case("c", "q"), "x", output="a", cost_usd=0.02))
    assert not over.passed and "over 0.01" in over.reason
    with pytest.raises(ValueError, match="no metric 'dollars'"):
        Threshold("dollars", max=1)
    with pytest.raises(ValueError, match="give max, min or both"):
        Threshold("tokens")
    with pytest.raises(ValueError, match="regex scorer"):
        Regex("(")


def test_the_paired_bootstrap_interval() -> None:
    same = paired_bootstrap([True, False] * 20, [True, False] * 20)
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0) and not same.sure
    better = paired_bootstrap([True] * 40, [False] * 10 + [True] * 30)
    assert better.delta == 0.25 and better.low > 0 and better.sure
    noisy = paired_bootstrap([True, False, True, False], [False, True, True, False])
    assert noisy.low < 0 < noisy.high and not noisy.sure


def test_cases_files(tmp_path: Path) -> None:
    csv = tmp_path / "cases.csv"
    csv.write_text('id,input,expected\na,"{""city"": ""Oslo""}",Oslo\nb,hello,\n')
    a, b = load_cases(csv)
    assert (a.id, a.input, a.expected, a.has_expected) == ("a", {"city": "Oslo"}, "Oslo", True)
    assert (b.input, b.has_expected) == ("hello", False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": 1}\n{"output": 2}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: a case is an object with an 'input'"):
        load_cases(bad)
    bad.write_text('{"input": 1, "id": "x"}\n{"input": 2, "id": "x"}\n')
    with pytest.raises(ValueError, match="case id 'x' again"):
        load_cases(bad)


def test_eddies_eval_from_flags_and_from_a_config(tmp_path: Path) -> None:
    cases = _cases_file(tmp_path)
    me = "tests.unit.connectors.test_evaluation"
    args = ["eval", "--inputs", str(cases), "--candidate", f"new={me}:new_geo",
            "--baseline", f"old={me}:old_geo", "--scorer", "equals", "--scorer", "max:tokens=100"]
    ran = CliRunner().invoke(app, args)
    assert ran.exit_code == 0, ran.output
    assert "new: 5 cases" in ran.output and "equals" in ran.output and "+0.400 vs baseline" in ran.output
    under = CliRunner().invoke(app, [*args, "--fail-under", "equals=0.9"])
    assert under.exit_code == 1 and "under the floor: new: equals 0.8 < 0.9" in under.output
    as_json = CliRunner().invoke(app, [*args, "--json"])
    assert json.loads(as_json.output)["candidates"]["new"]["pass_rates"]["equals"] == 0.8

    config = tmp_path / "eval.yaml"
    config.write_text(f"""\
inputs: cases.jsonl
candidates:
  - {{name: new, agent: "{me}:new_geo"}}
baseline: {{name: old, agent: "{me}:old_geo"}}
scorers:
  - equals
  - {{type: contains, value: "o", name: has-o}}
fail_under: {{has-o: 0.6}}
""")
    ran = CliRunner().invoke(app, ["eval", str(config)])
    assert ran.exit_code == 0 and "has-o" in ran.output, ran.output
    wrong = CliRunner().invoke(app, ["eval", str(config), "--scorer", "contains"])
    assert wrong.exit_code == 2 and "--scorer contains: one of equals" in wrong.output
    config.write_text(config.read_text().replace("scorers:", "scorer:"))
    bad = CliRunner().invoke(app, ["eval", str(config)])
    assert bad.exit_code == 2 and "'scorer' is not a key of an eval config" in bad.output


def test_an_evaluation_needs_scorers_of_their_own_names() -> None:
    with pytest.raises(ValueError, match="scorers need names of their own"):
        evaluate([Case("c", "q")], {"new": AgentPlan.compile(new_geo())}, [Contains("a"), Contains("b")])
    with pytest.raises(ValueError, match="baseline 'old' is not a candidate"):
        evaluate([Case("c", "q")], {"new": AgentPlan.compile(new_geo())}, [Equals()], baseline="old")
    assert isinstance(evaluate([Case("c", "q")], {"new": AgentPlan.compile(new_geo())}, [Equals()]),
                      EvalReport)


def grader_connection() -> ScriptedChatModel:
    """The scripted judge as a connection object, from a function that makes it."""
    return ScriptedChatModel(grader)


def grader(messages: list[ChatMessage], tools: list[Any]) -> str:
    """A scripted judge: an answer passes if it says Paris; of two, the one that says Paris
    wins (a tie if both or neither do)."""
    asked = json.loads(messages[-1].content)
    if "answer" in asked:
        ok = "Paris" in str(asked["answer"])
        return f'Verdict: {{"pass": {str(ok).lower()}, "score": {1 if ok else 0.2}, "reason": "checked"}}'
    a, b = ("Paris" in str(asked["answer A"])), ("Paris" in str(asked["answer B"]))
    return json.dumps({"winner": "tie" if a == b else "A" if a else "B", "reason": "r"})


def says_a(messages: list[ChatMessage], tools: list[Any]) -> str:
    """A judge that always prefers the first answer it is shown."""
    return '{"winner": "A"}'


def test_a_model_as_judge_of_one_answer_and_of_two() -> None:
    from eddies.eval import Judge

    judge = Judge(ScriptedChatModel(grader), "Names the capital.")
    good, bad = judge(_result("It is Paris.")), judge(_result("Lyon"))
    assert (good.passed, good.value, good.reason) == (True, 1.0, "checked")
    assert (bad.passed, bad.value) == (False, 0.2)
    pairwise = Judge(ScriptedChatModel(grader), "The right capital.", pairwise=True, name="vs")
    assert pairwise(_result("Paris"), _result("Lyon")).value == 1.0  # it wins in both orders
    assert pairwise(_result("Lyon"), _result("Paris")).passed is False
    assert pairwise(_result("Paris"), _result("Paris, France")).value == 0.5
    biased = Judge(ScriptedChatModel(says_a), "Anything.", pairwise=True)
    assert biased(_result("x"), _result("y")).value == 0.5  # first in one order, second in the other
    assert not Judge(ScriptedChatModel(lambda m, t: "no idea"), "r")(_result("x")).passed
    with pytest.raises(ValueError, match="it needs a baseline"):
        pairwise(_result("Paris"))


def test_similarity_by_the_offline_embedding_model() -> None:
    pytest.importorskip("wordllama", reason="the offline embedding model is in eddies[embeddings]")
    from eddies import OfflineEmbeddingModel
    from eddies.eval import Similar

    similar = Similar(OfflineEmbeddingModel(), threshold=0.8)
    same = similar(_result("A cheap hotel near the beach", "A cheap hotel near the beach"))
    assert same.passed and same.value == pytest.approx(1.0, abs=1e-5)
    far = similar(_result("Sourdough bread, step by step", "A cheap hotel near the beach"))
    assert not far.passed and far.value < same.value and "similarity" in far.reason


GRADER_CONNECTION = grader_connection()


def test_judges_and_similarity_from_a_config(tmp_path: Path) -> None:
    from eddies.connectors.evaluation.config import load_config
    from eddies.eval import Judge, Similar

    config = tmp_path / "eval.yaml"
    config.write_text("""\
scorers:
  - {type: judge, rubric: "Names the capital.", responder: "tests.unit.connectors.test_evaluation:grader"}
  - {type: judge, rubric: "Better.", responder: "tests.unit.connectors.test_evaluation:grader",
     pairwise: true, name: better}
  - {type: similar, threshold: 0.7}
""")
    judge, better, similar = load_config(config).scorers
    assert isinstance(judge, Judge) and judge.name == "judge" and not judge.pairwise
    assert isinstance(better, Judge) and better.pairwise and better.name == "better"
    assert isinstance(similar, Similar) and similar.threshold == 0.7
    assert judge(_result("Paris")).passed
    config.write_text('scorers:\n  - {type: judge, rubric: "r"}\n')
    with pytest.raises(ValueError, match="a judge needs a 'model'"):
        load_config(config)
    # A connection object of one's own, or a function that gives one.
    for named in ("GRADER_CONNECTION", "grader_connection"):
        config.write_text(f'scorers:\n  - {{type: judge, rubric: "r", connection: '
                          f'"tests.unit.connectors.test_evaluation:{named}"}}\n')
        [own] = load_config(config).scorers
        assert own(_result("Paris")).passed and not own(_result("Lyon")).passed
    config.write_text('scorers:\n  - {type: judge, rubric: "r", '
                      'connection: "tests.unit.connectors.test_evaluation:BOOKED"}\n')
    with pytest.raises(ValueError, match="BOOKED. is neither a chat model connection"):
        load_config(config)


def test_the_html_report_holds_the_summary_and_every_case_side_by_side(tmp_path: Path) -> None:
    from eddies.connectors.evaluation.html import html_report

    report = evaluate(load_cases(_cases_file(tmp_path)), {"new": AgentPlan.compile(new_geo())}, [Equals()],
                      baseline=("old", AgentPlan.compile(old_geo())))
    page = html_report(report, "geo")
    assert page.count("<details class=case") == 5 and "<script" not in page and "http" not in page
    assert "old (baseline)" in page and "+0.400 [" in page
    spain = page[page.index("id='case-Spain'"):page.index("id='case-Italy'")]
    assert "<del>Porto</del> <ins>Madrid</ins>" in spain  # the new answer against the baseline's
    assert "expected &#x27;Madrid&#x27;, got &#x27;Porto&#x27;" in spain  # the old side's reason
    assert "model llm" in spain  # the trace
    written = tmp_path / "eval.html"
    ran = CliRunner().invoke(app, ["eval", "--inputs", str(tmp_path / "cases.jsonl"), "--candidate",
                                   "new=tests.unit.connectors.test_evaluation:new_geo", "--scorer", "equals",
                                   "--html", str(written)])
    assert ran.exit_code == 0 and written.read_text().count("<details class=case") == 5


def test_call_rules_travel_as_json_and_a_record_that_is_none_is_refused() -> None:
    from eddies.connectors.evaluation.call_rules import CallRules

    rules = CallRules("brief", source_app="travel", from_offsets={0: 12, 3: 40}, sessions=("ana", "bo"),
                      allow=("add",), live_models=True)
    assert CallRules.from_json(rules.to_json()) == rules
    assert rules.policy.allow == frozenset({"add"}) and rules.policy.live_models
    assert CallRules.from_json(CallRules("file-cases").to_json()).source_app is None
    for bad in (b"", b"[]", b'{"source_app": "travel"}'):
        with pytest.raises(ValueError, match="not call rules"):
            CallRules.from_json(bad)


def test_the_refused_calls_of_a_case_are_read_from_its_history_when_not_given() -> None:
    from eddies.connectors.evaluation.results import case_result

    BOOKED.clear()
    report = evaluate([Case("c1", "Lisbon")], {"booker": AgentPlan.compile(booker())}, [Contains("booked")])
    [given] = report.results["booker"]
    assert given.refused  # counted by the run's RecordedCalls
    # What a worker fleet's run gives: only the history, the same refusals read from it.
    assert case_result(given.case, "booker", given.history, latency_ms=1.0).refused == given.refused


PRODUCT = {"type": "object", "additionalProperties": False, "required": ["name", "price"], "properties": {
    "name": {"type": "string", "maxLength": 10}, "price": {"type": "number", "minimum": 1, "maximum": 60},
    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}, "stock": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["new", "sale"]}, "uniqueItems": True}}}


@pytest.mark.parametrize(("answer", "reason"), [
    ({"name": "Kettle", "price": 112}, "price: 112 is greater than the maximum of 60"),
    ('{"name": "Kettle", "price": 0.5}', "price: 0.5 is less than the minimum of 1"),
    ({"name": "Kettle", "price": 20, "sku": "kt-1"}, "sku: 'kt-1' does not match '^[A-Z]{3}-[0-9]+$'"),
    ({"name": "Electric kettle", "price": 20}, "name: expected at most 10 characters, got 15"),
    ({"name": "Kettle", "price": 20, "tags": ["sale", "sale"]},
     "tags: ['sale', 'sale'] has non-unique elements"),
    ({"name": "Kettle", "price": 20, "tags": ["old"]}, "tags[0]: 'old' is not one of 'new', 'sale'"),
    ({"name": "Kettle", "price": 20, "colour": "red"},
     "colour: not allowed by the schema (allowed: name, price, sku, stock, tags)"),
    ({"name": "Kettle", "price": "20"}, "price: expected number, got '20'"),
    ({"price": 112}, "name: missing (required)"),  # the answer's own problem before its fields'
    ([1], "the answer: expected object, got [1]"),
])
def test_the_json_schema_scorer_checks_every_keyword(answer: Any, reason: str) -> None:
    """jsonschema judges: a limit (maximum, pattern, ...) fails the answer, the reason naming
    the field, in the answer's words (no tool, no arguments)."""
    score = JsonSchema(PRODUCT)(_result(answer))
    assert (score.passed, score.value, score.reason) == (False, 0.0, reason)


def test_the_json_schema_scorer_reads_the_standard() -> None:
    # 3.0 is an integer (to the standard; a tool's int argument is an int)
    answer = '{"name": "Kettle", "price": 60, "sku": "KTL-7", "stock": 3.0}'
    assert JsonSchema(PRODUCT)(_result(answer)).passed
    with pytest.raises(ValueError, match="json-schema scorer: the schema is not valid: .*'nope'"):
        JsonSchema({"type": "nope"})
    with pytest.raises(ValueError, match=r"not valid: properties.sku.pattern: '\[' is not a 'regex'"):
        JsonSchema({"properties": {"sku": {"pattern": "["}}})
    dangling = JsonSchema({"properties": {"a": {"$ref": "#/$defs/Gone"}}})(_result({"a": 1}))
    assert not dangling.passed and dangling.reason.startswith("the schema cannot be applied: ")


def test_every_scorer_flag(tmp_path: Path) -> None:
    from eddies.connectors.evaluation.config import EvalConfigError, scorer_flag
    from eddies.eval import Similar

    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}')
    got = {flag: scorer_flag(flag) for flag in (
        "equals", "contains:Porto", "icontains:porto", "regex:^The result \\d+", "is-json",
        f"json-schema:{schema}", "python:tests.unit.connectors.test_evaluation:grader", "similar",
        "similar:0.7", "max:cost_usd=0.01", "min:tokens=3")}
    assert isinstance(got["contains:Porto"], Contains) and got["contains:Porto"].text == "Porto"
    assert got["icontains:porto"].name == "icontains"
    assert isinstance(got["regex:^The result \\d+"], Regex)
    assert got["regex:^The result \\d+"](_result("The result 42")).passed
    assert isinstance(got["similar:0.7"], Similar) and got["similar:0.7"].threshold == 0.7
    assert isinstance(got["max:cost_usd=0.01"], Threshold) and got["max:cost_usd=0.01"].max == 0.01
    assert [s.name for s in got.values()][:5] == ["equals", "contains", "icontains", "regex", "is-json"]
    with pytest.raises(EvalConfigError, match="similar:x: expected a number"):
        scorer_flag("similar:x")
