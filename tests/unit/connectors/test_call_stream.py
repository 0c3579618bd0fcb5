"""What a call writes to APP.stream (connectors/streaming): deltas batched over a window,
the first one at once; progress records in order with the deltas; a reader that keeps the
newest execution of a call; the records' Avro form; models that stream (the scripted one,
litellm over HTTP), and only when their setup asks."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from eddies.connectors.execution.calls import CallPerformer
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.connectors.models.scripted import ScriptedChatModel
from eddies.connectors.streaming.call_stream import StreamBatcher
from eddies.connectors.streaming.following import StreamFollower, line
from eddies.engine import Agent, AgentPlan, ChatModelSetup, ResourceType
from eddies.events import CallKind, ChatMessage, DecodeError, DurableCallRequest, encode_value
from eddies.events.stream import StreamEvent, StreamKind, ToolCallDelta, decode_stream, encode_stream
from tests.openai_server import OpenAIServer


class Published:
    """A batcher's records, each batch with the time it was published."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, list[StreamEvent]]] = []
        self.lock = threading.Lock()

    def __call__(self, records: list[StreamEvent]) -> None:
        with self.lock:
            self.batches.append((time.monotonic(), list(records)))

    @property
    def records(self) -> list[StreamEvent]:
        with self.lock:
            return [r for _, batch in self.batches for r in batch]

    def wait(self, count: int, timeout: float = 5.0) -> list[StreamEvent]:
        deadline = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.records


def _stream(batcher: StreamBatcher, call_id: str = "c1") -> Any:
    return batcher.stream(session_id="s1", run=1, scope=(), call_id=call_id, attempt=1,
                          call_kind=CallKind.CHAT_MODEL, target="llm")


def test_the_first_delta_goes_at_once_and_the_next_ones_are_gathered_over_the_window() -> None:
    out = Published()
    batcher = StreamBatcher(out, window_s=0.2)
    stream = _stream(batcher)
    began = time.monotonic()
    stream.text("Hel")
    [first] = out.wait(1)
    assert first.text == "Hel" and first.seq == 0 and time.monotonic() - began < 0.15
    stream.text("lo")
    stream.text(" wor")
    stream.text("ld")
    time.sleep(0.05)
    assert len(out.records) == 1  # held: the window since the last record has not passed
    records = out.wait(2)
    assert [r.text for r in records] == ["Hel", "lo world"] and records[1].seq == 1
    gap = out.batches[1][0] - out.batches[0][0]
    assert 0.18 <= gap < 0.4  # sent once the window was over, not before, not much after
    batcher.close()


def test_progress_goes_at_once_after_the_deltas_before_it_in_order() -> None:
    out = Published()
    batcher = StreamBatcher(out, window_s=5.0)  # a window no test waits for
    stream = _stream(batcher)
    began = time.monotonic()
    stream.started()
    stream.text("a")
    stream.text("b")
    stream.tool_call(0, "call_1", "add", '{"a":')
    stream.tool_call(0, None, None, "1}")
    stream.ended()  # takes the deltas held for the window with it
    while not out.records or out.records[-1].kind is not StreamKind.ENDED:
        assert time.monotonic() - began < 2.0, out.records
        time.sleep(0.005)
    records = out.records
    assert records[0].kind is StreamKind.STARTED and records[-1].kind is StreamKind.ENDED
    deltas = records[1:-1]
    assert {r.kind for r in deltas} == {StreamKind.DELTA}
    assert "".join(r.text for r in deltas) == "ab"
    assert [t for r in deltas for t in r.tool_calls] == [
        ToolCallDelta(0, "call_1", "add", '{"a":'), ToolCallDelta(0, None, None, "1}")]
    assert [r.seq for r in records] == list(range(len(records)))
    assert len({r.execution for r in records}) == 1
    batcher.close()


def test_closing_sends_what_is_pending_and_each_making_of_a_call_is_a_new_execution() -> None:
    out = Published()
    batcher = StreamBatcher(out, window_s=5.0)
    one, two = _stream(batcher), _stream(batcher)
    one.text("x")
    out.wait(1)
    one.text("y")
    two.text("z")
    batcher.close()
    records = out.records
    assert sorted(r.text for r in records) == ["x", "y", "z"]
    assert one.execution != two.execution
    one.text("after")  # a closed batcher takes nothing more
    time.sleep(0.05)
    assert len(out.records) == 3


def test_many_streams_at_once_keep_each_ones_order_and_lose_nothing() -> None:
    out = Published()
    batcher = StreamBatcher(out, window_s=0.002)
    streams = [_stream(batcher, f"c{i}") for i in range(50)]

    def write(stream: Any) -> None:
        for i in range(100):
            stream.text(f"{i} ")

    threads = [threading.Thread(target=write, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    by_call: dict[str, list[StreamEvent]] = {}
    for rec in out.records:
        by_call.setdefault(rec.call_id, []).append(rec)
    assert len(by_call) == 50
    for recs in by_call.values():
        assert [r.seq for r in recs] == list(range(len(recs)))
        assert "".join(r.text for r in recs) == "".join(f"{i} " for i in range(100))


def _record(seq: int, text: str = "", execution: str = "e1", kind: StreamKind = StreamKind.DELTA,
            call_kind: CallKind = CallKind.CHAT_MODEL, target: str = "llm") -> StreamEvent:
    return StreamEvent(session_id="s1", run=1, call_id="c1", execution=execution, seq=seq, kind=kind,
                       call_kind=call_kind, target=target, text=text, timestamp=0)


def test_a_reader_keeps_the_newest_execution_of_a_call_and_drops_what_a_left_one_writes() -> None:
    view = StreamFollower()
    assert view.add(_record(0, "Hel")) is not None
    view.add(_record(1, "lo"))
    assert view.add(_record(1, "lo")) is None  # delivered twice
    assert view.text("c1") == "Hello"
    again = view.add(_record(0, "Hi", execution="e2"))  # asked again after a crash
    assert again is not None and again.restarted and again.text == "Hi"
    assert view.text("c1") == "Hi"
    assert view.add(_record(2, " late", execution="e1")) is None  # the old one woke up
    assert view.text("c1") == "Hi"


def test_a_reader_says_what_the_agent_does() -> None:
    view = StreamFollower()
    change = view.add(_record(0, '"city":"Oslo"', kind=StreamKind.STARTED, call_kind=CallKind.TOOL,
                              target="weather"))
    assert change is not None and change.status == 'calling tool weather "city":"Oslo"...'
    view.add(StreamEvent(session_id="s1", run=1, call_id="c2", execution="e", seq=0,
                         kind=StreamKind.WAITING, call_kind=CallKind.SIGNAL, target="approval:x",
                         text="approval", timestamp=0))
    assert view.status == "waiting for approval"
    assert line(_record(3, "Hi")) == 's1 run 1 c1#1 [e1 3] DELTA "Hi"'


def test_stream_records_round_trip_in_avro_and_garbage_is_a_decode_error() -> None:
    rec = StreamEvent(session_id="s1", run=2, scope=("child@c0",), call_id="c1", attempt=2,
                      execution="ab", seq=7, kind=StreamKind.ENDED, call_kind=CallKind.TOOL, target="add",
                      text="", tool_calls=[ToolCallDelta(1, "id", "add", "{}")], error="ValueError: no",
                      deadline_ms=5, timestamp=1_700_000_000_000)
    assert decode_stream(encode_stream(rec)) == rec
    with pytest.raises(DecodeError):
        decode_stream(b"\x01\x02")


class Deltas:
    def __init__(self) -> None:
        self.parts: list[Any] = []

    def text(self, delta: str) -> None:
        self.parts.append(delta)

    def tool_call(self, index: int, id: str | None = None, name: str | None = None,
                  arguments: str = "") -> None:
        self.parts.append((index, id, name, arguments))


def _plan(conn: Any, stream: bool) -> AgentPlan:
    agent = Agent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn", model="m", stream=stream))
    return AgentPlan.compile(agent)


def _chat(content: str) -> DurableCallRequest:
    messages = [{"role": "user", "content": content}]
    args = encode_value({"args": [], "kwargs": {"messages": messages}}, "a", "b")
    return DurableCallRequest("c1", CallKind.CHAT_MODEL, "llm", args, idempotent=True)


def test_a_model_streams_only_when_its_setup_asks_and_the_executor_gives_a_stream() -> None:
    model = ScriptedChatModel(lambda messages, tools: "one two three")
    for stream, given, parts in ((True, True, ["one", " two", " three"]), (False, True, []),
                                 (True, False, [])):
        deltas = Deltas()
        reply = CallPerformer(_plan(model, stream)).perform(_chat("hi"), (), deltas if given else None)
        assert reply.content == "one two three"
        assert deltas.parts == parts


def test_litellm_streams_text_and_tool_calls_over_http_and_returns_the_whole_answer() -> None:
    server = OpenAIServer(token_delay=0.01).start()
    try:
        conn = LiteLLMChatModel(api_base=server.base_url, api_key="test")
        deltas = Deltas()
        from eddies.engine.resources import ToolSpec

        spec = ToolSpec("add", "Add", {"type": "object", "properties": {"a": {"type": "integer"}}})
        reply = conn.chat([ChatMessage(content='{"a": 2, "b": 3}')], model="openai/m", tools=[spec],
                          deltas=deltas)
        assert reply.tool_calls[0].name == "add" and reply.tool_calls[0].arguments == {"a": 2, "b": 3}
        assert deltas.parts[0][:3] == (0, "call_1", "add")
        assert json.loads("".join(p[3] for p in deltas.parts)) == {"a": 2, "b": 3}
        assert reply.extra_args["usage"]["completion_tokens"] == 5  # the stream's last chunk
        deltas = Deltas()
        import asyncio

        answer = asyncio.run(conn.chat_async(
            [ChatMessage(content="x"), ChatMessage(role="tool", content="5", tool_call_id="call_1")],  # type: ignore[arg-type]
            model="openai/m", tools=[], deltas=deltas))
        assert answer.content == "The result is 5." == "".join(deltas.parts)
        assert deltas.parts == ["The", " result", " is", " 5."]
        assert server.requests[-1]["stream"] is True
    finally:
        server.stop()


def test_an_executor_says_a_call_started_ended_or_waits_for_an_approval() -> None:
    from eddies.connectors.execution.calls import result_event
    from eddies.connectors.streaming.progress import StreamProgress, ended
    from eddies.events import AgentEvent, CallStatus, ErrorInfo

    out = Published()
    progress = StreamProgress(out, window_s=0.001)

    def request(kind: CallKind, target: str, attempt: int = 1, **kwargs: Any) -> AgentEvent:
        args = encode_value({"args": [], "kwargs": kwargs}, "a", "b")
        req = DurableCallRequest(f"c-{target}", kind, target, args, attempt=attempt,
                                 not_before=kwargs.get("due"))
        return AgentEvent(f"e-{target}", "s1", 3, 2, [], DurableCallRequest.event_type, None, None, "", "",
                          0, req)

    tool = request(CallKind.TOOL, "weather", attempt=2, city="Oslo")
    stream = progress.started(tool)
    assert stream is not None
    ended(stream, result_event(tool, CallStatus.ERROR, "null", ErrorInfo("ValueError", "no such city")))
    assert progress.started(request(CallKind.TIMER, "run-deadline")) is None  # not a person's concern
    progress.waiting(request(CallKind.SIGNAL, "approval:c-7", due=1_700_000_000_000))
    progress.waiting(request(CallKind.TIMER, "later", due=5))  # a timer is no wait to tell of
    progress.close()
    started, done, waits = out.records
    assert (started.kind, started.attempt, started.run) == (StreamKind.STARTED, 2, 2)
    assert started.text == '{"city":"Oslo"}'
    assert done.kind is StreamKind.ENDED and done.error == "ValueError: no such city"
    assert (waits.kind, waits.text, waits.deadline_ms) == (StreamKind.WAITING, "approval", 1_700_000_000_000)
    view = StreamFollower()
    assert [view.add(r).status for r in (started, done)] == [  # type: ignore[union-attr]
        'calling tool weather (attempt 2) {"city":"Oslo"}...',
        "tool weather failed: ValueError: no such city"]


def test_a_streamed_call_to_an_openai_compatible_server_is_read_without_litellms_wrapper() -> None:
    from eddies.connectors.models.openai_stream import direct_request

    request = {"model": "openai/m", "messages": [{"role": "user", "content": "hi"}], "tools": [],
               "timeout": 120, "num_retries": 0, "temperature": 0.2, "api_key": "k"}
    asked = direct_request("openai/m", "http://h/v1/", "k", request)
    assert asked is not None and asked.url == "http://h/v1/chat/completions"
    assert asked.headers["Authorization"] == "Bearer k"
    assert asked.body == {"model": "m", "messages": request["messages"], "temperature": 0.2, "stream": True,
                          "stream_options": {"include_usage": True}}
    # Another provider, no api_base, or a parameter litellm would translate: litellm's.
    assert direct_request("anthropic/claude", "http://h/v1", "k", request) is None
    assert direct_request("openai/m", None, "k", request) is None
    assert direct_request("openai/m", "http://h/v1", "k", {**request, "drop_params": True}) is None


def test_a_provider_refusing_a_streamed_call_is_an_error_the_executor_classifies() -> None:
    import asyncio

    from eddies.connectors.remote.error_classes import describe_error
    from eddies.events import ErrorCategory

    server = OpenAIServer().start()
    try:
        conn = LiteLLMChatModel(api_base=server.base_url, api_key="test")
        server.fail(429, headers={"Retry-After": "2"}, message="slow down")
        with pytest.raises(Exception) as caught:
            asyncio.run(conn.chat_async([ChatMessage(content="x")], model="openai/m", tools=[],
                                        deltas=Deltas()))
        error = describe_error(caught.value)
        assert (error.http_status, error.retry_after_ms) == (429, 2000)
        assert error.category is ErrorCategory.TRANSIENT
        assert "slow down" in error.message
        server.fail(401, message="bad key")
        with pytest.raises(Exception) as caught:
            conn.chat([ChatMessage(content="x")], model="openai/m", tools=[], deltas=Deltas())
        assert describe_error(caught.value).category is ErrorCategory.PERMANENT
        # A parameter only litellm knows: the call goes through litellm, and streams as well.
        deltas = Deltas()
        reply = LiteLLMChatModel(api_base=server.base_url, api_key="test", drop_params=True).chat(
            [ChatMessage(content="x"), ChatMessage(role="tool", content="7", tool_call_id="c")],  # type: ignore[arg-type]
            model="openai/m", tools=[], deltas=deltas)
        assert reply.content == "The result is 7." == "".join(deltas.parts)
    finally:
        server.stop()
