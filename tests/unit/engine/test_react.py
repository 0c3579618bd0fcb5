"""ReActAgent on the LocalRunner: a tool loop to its answer, max_iterations, structured
output (fenced, and a parse failure shown to the model), CONTINUE against FAIL (a halted
session resumed), options checked, replays that call nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from eddies import ChatModelSetup, LocalRunner, ReActAgent, ReActOptions, ResourceType
from eddies.connectors.inspect.replay import replay
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.engine import PlanError
from eddies.events import CallKind, ChatMessage, DurableCallRequest, MessageRole, OutputEvent, ToolCall

CALLS: list[str] = []


def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLS.append(f"add {a}+{b}")
    return a + b


class Sum(BaseModel):
    total: int
    note: str = ""


def _tool_results(messages: list[ChatMessage]) -> list[str]:
    return [m.content for m in messages if m.role is MessageRole.TOOL]


def adds_twice(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    done = _tool_results(messages)
    if len(done) < 2:
        call = ToolCall(f"c{len(done)}", "add", {"a": len(done), "b": 10})
        return ChatMessage(MessageRole.ASSISTANT, "", [call])
    return ChatMessage(MessageRole.ASSISTANT, f"results {' and '.join(done)}")


def runaway(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    return ChatMessage(MessageRole.ASSISTANT, "", [ToolCall(f"c{len(messages)}", "add", {"a": 1, "b": 1})])


def structured(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
    """First a prose answer, then (told why) a fenced JSON one."""
    if not any(m.role is MessageRole.USER and "cannot be used" in m.content for m in messages):
        return ChatMessage(MessageRole.ASSISTANT, "The total is twelve.")
    return ChatMessage(MessageRole.ASSISTANT, 'Here:\n```json\n{"total": 12, "note": "ok"}\n```')


class Flaky:
    """A connection that fails until ``fixed``."""

    def __init__(self) -> None:
        self.fixed = False

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not self.fixed:
            raise ConnectionError("the provider is down")
        return ChatMessage(MessageRole.ASSISTANT, f"answer to {messages[-1].content}")


def agent(responder: Any = adds_twice, connection: Any = None, **kwargs: Any) -> ReActAgent:
    a = ReActAgent("react", model="llm", prompt="You add numbers.", **kwargs)
    a.add_resource("add", ResourceType.TOOL, add)
    a.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   connection if connection is not None else ScriptedChatModel(responder))
    a.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", tools=["add"]))
    return a


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def _replays(runner: LocalRunner, session: str) -> None:
    history = [(n, e) for n, e in enumerate(runner.history) if e.session_id == session]
    report = replay(runner.plan, history, session)
    assert report.ok and not report.extra


def _first_model_request(runner: LocalRunner) -> str:
    return next(p.args for e in runner.history if isinstance(p := e.payload, DurableCallRequest)
                and p.kind is CallKind.CHAT_MODEL)


def _errors(runner: LocalRunner, session: str) -> list[str]:
    return [f"{p.error.type}: {p.error.message}" for e in runner.outputs if e.session_id == session
            and isinstance(p := e.payload, OutputEvent) and p.error is not None]


def test_a_tool_loop_runs_to_its_answer() -> None:
    runner = LocalRunner(agent())
    assert runner.run([("s1", "add things")]) == ["results 10 and 11"]
    assert CALLS == ["add 0+10", "add 1+10"]
    assert '"You add numbers."' in _first_model_request(runner)  # the prompt opens it
    _replays(runner, "s1")


def test_a_runaway_loop_stops_at_max_iterations() -> None:
    runner = LocalRunner(agent(runaway, options=ReActOptions(max_iterations=3)))
    runner.submit("s1", "go")
    runner.run_until_idle()
    assert _errors(runner, "s1") == ["MaxIterationsError: no final answer from model 'llm' within "
                                     "max_iterations=3 model calls"]
    assert len(CALLS) == 3  # a tool round after each of the three model calls
    _replays(runner, "s1")


def test_structured_output_from_a_fenced_block_after_a_parse_failure() -> None:
    runner = LocalRunner(agent(structured, output_schema=Sum,
                               options=ReActOptions(max_consecutive_failures=2)))
    assert runner.run([("s1", "sum it")]) == [{"total": 12, "note": "ok"}]
    prompt = _first_model_request(runner)
    assert "JSON schema" in prompt and "total" in prompt  # the model is told the shape
    _replays(runner, "s1")


def test_a_parse_failure_counts_as_a_failure() -> None:
    runner = LocalRunner(agent(structured, output_schema=Sum,
                               options=ReActOptions(handle_exception="CONTINUE")))
    runner.submit("s1", "sum it")
    runner.run_until_idle()
    [error] = _errors(runner, "s1")
    assert error.startswith("OutputParseError: not a valid Sum:")


def test_continue_fails_the_input_and_the_session_goes_on() -> None:
    conn = Flaky()
    runner = LocalRunner(agent(connection=conn, options=ReActOptions(handle_exception="CONTINUE"),
                               config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}}))
    runner.submit("s1", "first")
    runner.run_until_idle()
    [error] = _errors(runner, "s1")
    assert error.startswith("ModelFailedError: model 'llm' failed 1 time(s) in a row")
    conn.fixed = True
    runner.submit("s1", "second")
    runner.run_until_idle()
    assert runner.outputs_for("s1")[1] == "answer to second"


def test_fail_halts_the_session_until_it_is_resumed() -> None:
    conn = Flaky()
    runner = LocalRunner(agent(connection=conn, config={"retry": {"CHAT_MODEL": {"max_attempts": 1}},
                                                         "request_timeout_ms": 1_000}))
    runner.submit("s1", "first")
    runner.submit("s1", "second")
    runner.submit("s2", "other")
    runner.run_until_idle()  # the runs' deadlines pass too: a halted run waits on
    [halt] = runner.outputs_for("s1")
    assert halt["halted"] is True and halt["resume"].startswith("resume:s1:r1:")
    [error] = _errors(runner, "s1")
    assert error.startswith("SessionHaltedError: session s1 halted on ModelFailedError")
    assert "eddies resume s1" in error
    assert len(runner.outputs_for("s2")) == 1  # halted on its own
    conn.fixed = True
    runner.resume("s1")
    runner.run_until_idle()
    # The failed input is tried again, then the one that waited behind it.
    assert runner.outputs_for("s1")[1:] == ["answer to first", "answer to second"]
    assert len(runner.outputs_for("s2")) == 1  # still halted: only s1 was resumed
    with pytest.raises(ValueError, match="not halted"):
        runner.resume("s1")
    _replays(runner, "s1")


@pytest.mark.parametrize(("options", "message"), [
    ({"max_iterations": 0}, "max_iterations: expected a positive integer"),
    ({"request_timeout": "1m"}, "request_timeout: expected a positive number"),
    ({"handle_exception": "RETRY"}, "handle_exception: 'RETRY' is not one of FAIL, CONTINUE"),
    ({"summarization_prompt": "SHORT"}, "summarization_prompt: 'SHORT' is not one of"),
    ({"tokens_management_strategy": "SHRINK"}, "'SHRINK' is not one of NONE, TRIM, SUMMARIZE"),
    ({"max_tokens_threshold": -5}, "max_tokens_threshold: expected a positive integer"),
])
def test_options_are_checked_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReActOptions(**options)


def test_the_model_must_be_a_chat_model_and_the_schema_a_pydantic_model() -> None:
    broken = ReActAgent("react", model="nope")
    with pytest.raises(PlanError, match="model 'nope' is not a CHAT_MODEL resource"):
        LocalRunner(broken)
    with pytest.raises(TypeError, match="output_schema must be a pydantic model class"):
        ReActAgent("react", model="llm", output_schema=dict)
    assert ReActOptions(handle_exception="continue").handle_exception == "CONTINUE"


def test_options_from_a_declarative_definition() -> None:
    opts = ReActOptions.from_mapping({"max_iterations": "5", "request-timeout": "30",
                                      "handle_exception": "continue", "tokens_management_strategy": "trim"})
    assert opts == ReActOptions(max_iterations=5, request_timeout=30.0, handle_exception="CONTINUE",
                                tokens_management_strategy="TRIM")
    with pytest.raises(ValueError, match=r"unknown option 'max_iteration' "
                                         r"\(did you mean 'max_iterations'\?\) \(options: max_iterations, "):
        ReActOptions.from_mapping({"max_iteration": "5"})
    with pytest.raises(ValueError, match=r"unknown option 'colour' \(options: "):  # nothing near it
        ReActOptions.from_mapping({"colour": "blue"})
    with pytest.raises(ValueError, match=r"ReActOptions.max_iterations: '5.5' is not a number"):
        ReActOptions.from_mapping({"max_iterations": "5.5"})


def test_a_halt_notice_quotes_the_session_id_for_the_shell() -> None:
    import shlex

    from eddies.engine import halts
    from eddies.events import ErrorInfo

    for sid in ("s1", "order 42", "it's", "a;rm -rf x"):
        notice = halts.notice(sid, "resume:x", ErrorInfo("ModelError", "down"))
        assert notice.error is not None
        command = notice.error.message.split("Fix the cause, then: ", 1)[1]
        assert shlex.split(command) == ["eddies", "resume", sid]  # pasted, it names the session


def test_remember_turns_puts_the_sessions_last_turns_before_a_new_question() -> None:
    seen: dict[str, list[tuple[str, str]]] = {}  # what the model saw, by the question

    def echo(messages: list[ChatMessage], tools: list[Any]) -> ChatMessage:
        seen[messages[-1].content] = [(m.role.value, m.content) for m in messages]
        return ChatMessage(MessageRole.ASSISTANT, f"answer to {messages[-1].content}")

    runner = LocalRunner(agent(echo, options=ReActOptions(remember_turns=2)))
    runner.run([("s1", "one"), ("s1", "two"), ("s1", "three"), ("s2", "other")])
    system = ("system", "You add numbers.")
    assert seen["one"] == [system, ("user", "one")]
    assert seen["two"] == [system, ("user", "one"), ("assistant", "answer to one"), ("user", "two")]
    assert seen["three"] == [system, ("user", "one"), ("assistant", "answer to one"), ("user", "two"),
                             ("assistant", "answer to two"), ("user", "three")]
    assert seen["other"] == [system, ("user", "other")]  # another session has its own
    runner.run([("s1", "four")])
    assert seen["four"][1:3] == [("user", "two"), ("assistant", "answer to two")]  # the last two kept
    _replays(runner, "s1")  # the turns are state: a replay sees what the run saw
    seen.clear()
    LocalRunner(agent(echo)).run([("s1", "one"), ("s1", "two")])
    assert seen["two"] == [system, ("user", "two")]  # the default: none
    with pytest.raises(ValueError, match="remember_turns: expected a whole number, 0 or more"):
        ReActOptions(remember_turns=-1)
