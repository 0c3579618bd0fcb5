"""The web view's data, no broker: sessions' statuses folded from LocalRunner histories,
and the JSON API (``connectors/inspect/web.py``) over a fake ``APP.events``. The page
itself is looked at in headless Chromium by tests/integration/test_ui.py."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from eddies import Agent, ChatModelSetup, InputEvent, LocalRunner, ReActAgent, ResourceType, action
from eddies.connectors.kafka import sessions
from eddies.connectors.kafka.sessions import SessionIndex, summarize
from eddies.connectors.kafka.settings import Settings
from eddies.demo import calculator_agent
from eddies.events import (
    AgentEvent,
    ChatMessage,
    DurableCallRequest,
    DurableCallResult,
    MessageRole,
    encode,
    partition_for,
)
from tests.agents import shop_agent


def _status(runner: LocalRunner, session: str) -> str:
    return summarize(session, [e for e in runner.history if e.session_id == session]).status


def test_answered_and_waiting_for_approval_then_answered() -> None:
    runner = LocalRunner(shop_agent())
    runner.submit("s1", "look up and refund o-1")
    runner.run_until_waiting()
    assert _status(runner, "s1") == "waiting for approval"
    [ask] = runner.approval_requests("s1")
    runner.approve("s1", ask.signal)
    runner.run_until_idle()
    summary = summarize("s1", [e for e in runner.history if e.session_id == "s1"])
    assert (summary.status, summary.runs) == ("answered", 1)
    assert summary.last_seq == max(e.seq for e in runner.history if e.session_id == "s1")


def test_waiting_for_a_signal_and_queued_inputs_behind_it() -> None:
    runner = LocalRunner(shop_agent())
    runner.submit("s1", {"signal": "go"})
    runner.submit("s1", {"sleep_s": 1})  # accepted as run 2, waits behind run 1
    runner.run_until_waiting()
    assert _status(runner, "s1") == "waiting for a signal"
    runner.signal("s1", "go", "now")
    runner.run_until_idle()
    assert _status(runner, "s1") == "answered"


class _Flaky:
    def __init__(self) -> None:
        self.fixed = False

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if not self.fixed:
            raise ConnectionError("the provider is down")
        return ChatMessage(MessageRole.ASSISTANT, f"answer to {messages[-1].content}")


def test_halted_until_resumed() -> None:
    conn = _Flaky()
    agent = ReActAgent("react", model="llm", prompt="Answer.",
                       config={"retry": {"CHAT_MODEL": {"max_attempts": 1}}})
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, conn)
    agent.add_resource("llm", ResourceType.CHAT_MODEL, ChatModelSetup("conn"))
    runner = LocalRunner(agent)
    runner.submit("s1", "first")
    runner.run_until_idle()
    assert _status(runner, "s1") == "halted"  # its notice is a failed output, yet not "failed"
    conn.fixed = True
    runner.resume("s1")
    runner.run_until_idle()
    assert _status(runner, "s1") == "answered"


class _Failing(Agent):
    @action(InputEvent)
    def start(event: InputEvent, ctx: Any) -> None:
        raise ValueError("no")


def test_failed_and_a_copy_of_an_event_folded_once() -> None:
    runner = LocalRunner(_Failing("failing"))
    runner.submit("s1", "x")
    runner.run_until_idle()
    history = list(runner.history)
    assert summarize("s1", history).status == "failed"
    twice = summarize("s1", history + history)  # a worker that crashed writes them again
    assert (twice.events, twice.runs) == (len(history), 1)


# --- the JSON API, over a fake APP.events ---------------------------------------------------

class _Msg:
    def __init__(self, ev: AgentEvent, partition: int, offset: int) -> None:
        self.ev, self._partition, self._offset = ev, partition, offset

    def key(self) -> bytes:
        return self.ev.session_id.encode()

    def value(self) -> bytes:
        return encode(self.ev)

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_700_000_000_000 + 10 * self._offset


class _Topic:
    """``APP.events`` of 4 partitions, read as read_records reads it."""

    def __init__(self) -> None:
        self.parts: dict[int, list[_Msg]] = {p: [] for p in range(4)}
        self.reads: list[tuple[list[int], int]] = []

    def add(self, events: list[AgentEvent]) -> None:
        for ev in events:
            part = partition_for(ev.session_id, 4)
            self.parts[part].append(_Msg(ev, part, len(self.parts[part])))

    def read_records(self, settings: Any, topic: str, *, partitions: list[int], start: int | None = None,
                     ends: dict[int, int] | None = None, reread_gaps: bool = False,
                     **kw: Any) -> Iterator[_Msg]:
        assert reread_gaps  # on the embedded broker, a fetch may skip records
        self.reads.append((partitions, start or 0))
        for p in partitions:
            yield from self.parts[p][start or 0:]
            if ends is not None:
                ends[p] = len(self.parts[p])


@pytest.fixture
def topic(monkeypatch: pytest.MonkeyPatch) -> _Topic:
    fake = _Topic()
    monkeypatch.setattr(sessions, "read_records", fake.read_records)
    monkeypatch.setattr("eddies.connectors.kafka.preflight.check_broker",
                        lambda settings: SimpleNamespace(cluster_id="tansu_cluster"))
    monkeypatch.setattr("eddies.connectors.kafka.preflight.require_topics",
                        lambda settings, topics, meta=None: {t: 4 for t in topics})
    runner = LocalRunner(calculator_agent())
    runner.run([("team/a b", '{"a": 2, "b": 3}'), ("x/tree", '{"a": 1, "b": 1}'),
                ("bob", '{"a": 1, "b": 2}')])
    fake.add(runner.history)
    return fake


def _client(**kwargs: Any) -> Any:
    from starlette.testclient import TestClient

    from eddies.connectors.inspect.web import create_app

    return TestClient(create_app(Settings(app="t", bootstrap_servers="x:1"), **kwargs),
                      base_url="http://127.0.0.1:8321")


def test_the_index_reads_only_what_came_since(topic: _Topic) -> None:
    index = SessionIndex(Settings(app="t", bootstrap_servers="x:1"))
    assert [s.session_id for s in index.refresh().search("A B")] == ["team/a b"]
    assert topic.reads == [([0, 1, 2, 3], 0)]  # one reader for every partition at first
    runner = LocalRunner(calculator_agent())
    runner.run([("carol", '{"a": 5, "b": 5}')])
    topic.add(runner.history)
    assert {s.session_id: s.status for s in index.refresh().search()} == {
        "team/a b": "answered", "x/tree": "answered", "bob": "answered", "carol": "answered"}
    assert all(start > 0 or not topic.parts[p[0]] for p, start in topic.reads[1:])


def test_sessions_timeline_tree_and_ids_that_are_not_url_safe(topic: _Topic) -> None:
    client = _client()
    listed = client.get("/api/sessions", params={"q": "b"}).json()["sessions"]
    assert sorted(s["id"] for s in listed) == ["bob", "team/a b"]
    assert {s["status"] for s in listed} == {"answered"}

    one = client.get("/api/sessions/team%2Fa%20b").json()
    assert (one["id"], one["status"], one["runs"]) == ("team/a b", "answered", 1)
    types = [r["type"] for r in one["rows"]]
    assert types[0] == "InputEvent" and types[-1] == "OutputEvent" and "DurableCallRequest" in types
    tool = next(r for r in one["rows"] if r["summary"].startswith("TOOL"))
    assert tool["summary"] == "TOOL add(a=2, b=3)"
    assert tool["payload"]["args"] == {"args": [], "kwargs": {"a": 2, "b": 3}}  # decoded
    assert one["rows"][-1]["payload"]["output"] == "The result is 5."

    # "x/tree" is a session, not the tree of session "x".
    assert client.get("/api/sessions/x%2Ftree").json()["id"] == "x/tree"
    tree = client.get("/api/sessions/x%2Ftree/tree").json()
    [run] = tree["roots"]
    assert run["kind"] == "run" and run["status"] == "ok"
    assert [c["kind"] for c in run["children"]][:2] == ["event", "model"]
    assert client.get("/api/sessions/nobody").status_code == 404
    assert client.get("/api/sessions/bob/else").status_code == 404


def test_replay_and_fork_are_the_commands_and_need_the_header(topic: _Topic) -> None:
    calls: list[tuple[Any, ...]] = []
    client = _client(replay=lambda sid: calls.append(("replay", sid)) or {"ok": True, "steps": []})
    header = {"X-Eddies-UI": "1"}
    assert client.post("/api/sessions/team%2Fa%20b/replay").status_code == 403  # another site's page
    assert client.post("/api/sessions/team%2Fa%20b/replay", headers=header).json()["ok"] is True
    assert calls == [("replay", "team/a b")]
    no_fork = client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 2, "new_session": "b2"})
    assert no_fork.status_code == 501 and "fork" in no_fork.json()["error"]
    assert client.get("/api/info").json()["fork"] is False

    client = _client(fork=lambda sid, seq, new: calls.append(("fork", sid, seq, new)) or {"session": new})
    assert client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 0}).status_code == 400
    forked = client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 3, "new_session": "b/2"})
    assert forked.json() == {"session": "b/2"} and calls[-1] == ("fork", "bob", 3, "b/2")
    assert client.get("/api/info").json() == {"app": "t", "replay": False, "fork": True, "fork_reason": ""}


def test_the_page_and_the_hosts_it_answers(topic: _Topic) -> None:
    client = _client()
    page = client.get("/")
    assert page.status_code == 200 and "<title>Eddies</title>" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    # A DNS-rebinding page names its own host: refused.
    assert client.get("/api/sessions", headers={"Host": "evil.example:8321"}).status_code == 400


def test_payload_data_decodes_what_travels_as_json_text() -> None:
    from eddies.connectors.inspect.web import payload_data

    assert payload_data(DurableCallResult(call_id="c1", value='{"x": [1]}'))["value"] == {"x": [1]}
    assert payload_data(DurableCallRequest(call_id="c1", args="not json"))["args"] == "not json"
    assert payload_data(InputEvent('{"a": 1}'))["input"] == '{"a": 1}'  # a text stays a text


def test_replay_view_every_id_and_what_differs(topic: _Topic) -> None:
    from eddies.engine import AgentPlan
    from eddies.events import ChatResponseEvent, OutputEvent

    settings = Settings(app="t", bootstrap_servers="x:1")
    same = sessions.replay_view(settings, AgentPlan.compile(calculator_agent()), "team/a b")
    assert same["ok"] is True and same["mismatches"] == 0
    assert [s["seq"] for s in same["steps"]] == list(range(1, len(same["steps"]) + 1))

    class Reworded(type(calculator_agent())):  # type: ignore[misc]
        @action(ChatResponseEvent)
        def answer(event: ChatResponseEvent, ctx: Any) -> None:
            ctx.send_event(OutputEvent(output=f"Answer: {event.response.content}"))

    agent = Reworded("calculator")
    agent.resources = list(calculator_agent().resources)
    changed = sessions.replay_view(settings, AgentPlan.compile(agent), "team/a b")
    assert changed["ok"] is False and changed["mismatches"] >= 1
    [last] = [s for s in changed["steps"] if not s["matches"]][-1:]
    assert last["type"] == "OutputEvent"
    assert any("output" in path for path, _, _ in last.get("differences", []))
