"""The web view's JSON API (``connectors/inspect/web.py``) and its sessions index over a
real ``APP.events``: LocalRunner histories written there as a worker writes them. The page
itself is looked at in headless Chromium by tests/integration/test_ui.py."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from eddies import LocalRunner, action
from eddies.connectors.inspect import sessions
from eddies.connectors.inspect.sessions import SessionIndex
from eddies.connectors.runtime.client import producer
from eddies.connectors.runtime.client import read_records as real_read_records
from eddies.connectors.runtime.records import HEADERS
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.demo import calculator_agent
from eddies.engine import approval
from eddies.events import AgentEvent, encode, partition_for

pytestmark = pytest.mark.integration


class _Topic:
    """The test app's ``APP.events``, and the reads the sessions index made of it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.reads: list[tuple[list[int], int]] = []
        ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)

    def add(self, events: list[AgentEvent]) -> None:
        prod = producer(self.settings)
        for ev in events:
            prod.produce(TopicNames(self.settings.app).events, encode(ev), ev.session_id.encode(),
                         headers=HEADERS)
        assert prod.flush(30) == 0

    def read_records(self, settings: Any, topic: str, **kw: Any) -> Any:
        self.reads.append((kw["partitions"], kw.get("start") or 0))
        return real_read_records(settings, topic, **kw)


@pytest.fixture
def topic(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> _Topic:
    written = _Topic(settings)
    monkeypatch.setattr(sessions, "read_records", written.read_records)  # a spy: it reads
    runner = LocalRunner(calculator_agent())
    runner.run([("team/a b", '{"a": 2, "b": 3}'), ("x/tree", '{"a": 1, "b": 1}'),
                ("bob", '{"a": 1, "b": 2}')])
    written.add(runner.history)
    return written


def _client(topic: _Topic, **kwargs: Any) -> Any:
    from starlette.testclient import TestClient

    from eddies.connectors.inspect.web import create_app

    return TestClient(create_app(topic.settings, **kwargs), base_url="http://127.0.0.1:8321")


def test_the_index_reads_only_what_came_since(topic: _Topic) -> None:
    index = SessionIndex(topic.settings)
    assert [s.session_id for s in index.refresh().search("A B")] == ["team/a b"]
    assert topic.reads == [([0, 1, 2, 3], 0)]  # one reader for every partition at first
    runner = LocalRunner(calculator_agent())
    runner.run([("carol", '{"a": 5, "b": 5}')])
    topic.add(runner.history)
    assert {s.session_id: s.status for s in index.refresh().search()} == {
        "team/a b": "answered", "x/tree": "answered", "bob": "answered", "carol": "answered"}
    # Then only what came since: a partition with records is read on from where it ended.
    written = {partition_for(sid, topic.settings.partitions) for sid in ("team/a b", "x/tree", "bob")}
    later = topic.reads[1:]
    assert later and all(start > 0 for parts, start in later if set(parts) & written)
    assert all(start == 0 for parts, start in later if not set(parts) & written)


def test_sessions_timeline_tree_and_ids_that_are_not_url_safe(topic: _Topic) -> None:
    client = _client(topic)
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
    client = _client(topic, replay=lambda sid, start, end: calls.append(("replay", sid, start, end))
                     or {"ok": True, "steps": []})
    header = {"X-Eddies-UI": "1"}
    assert client.post("/api/sessions/team%2Fa%20b/replay").status_code == 403  # another site's page
    assert client.post("/api/sessions/team%2Fa%20b/replay", headers=header).json()["ok"] is True
    assert client.post("/api/sessions/bob/replay", headers=header, json={"from_seq": 4}).status_code == 200
    assert client.post("/api/sessions/bob/replay", headers=header,
                       json={"from_seq": 2, "to_seq": 5}).status_code == 200
    assert calls == [("replay", "team/a b", None, None), ("replay", "bob", 4, None), ("replay", "bob", 2, 5)]
    for body, says in [({"from_seq": 0}, "from_seq"), ({"to_seq": "3"}, "to_seq"),
                       ({"from_seq": True}, "from_seq"), ({"from_seq": 5, "to_seq": 4}, "comes before"),
                       ([1], "the body must be")]:
        refused = client.post("/api/sessions/bob/replay", headers=header, json=body)
        assert refused.status_code == 400 and says in refused.json()["error"], body
    assert len(calls) == 3
    no_fork = client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 2, "new_session": "b2"})
    assert no_fork.status_code == 501 and "fork" in no_fork.json()["error"]
    assert client.get("/api/info").json()["fork"] is False

    client = _client(topic, fork=lambda sid, seq, new: calls.append(("fork", sid, seq, new))
                     or {"session": new})
    assert client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 0}).status_code == 400
    forked = client.post("/api/sessions/bob/fork", headers=header, json={"at_seq": 3, "new_session": "b/2"})
    assert forked.json() == {"session": "b/2"} and calls[-1] == ("fork", "bob", 3, "b/2")
    assert client.get("/api/info").json() == {"app": topic.settings.app, "replay": False, "fork": True,
                                              "fork_reason": "", "signal": False, "evaluations": False}


def test_signal_approve_and_reject_send_what_the_commands_send(topic: _Topic) -> None:
    sent: list[tuple[str, str, Any]] = []
    header = {"X-Eddies-UI": "1"}
    none = _client(topic).post("/api/sessions/bob/signal", headers=header, json={"name": "go"})
    assert none.status_code == 501  # no signal function: the page only shows the wait
    client = _client(topic, signal=lambda sid, name, value: sent.append((sid, name, value)))
    assert client.get("/api/info").json()["signal"] is True
    assert client.post("/api/sessions/bob/signal", json={"name": "go"}).status_code == 403  # the header
    assert client.post("/api/sessions/team%2Fa%20b/signal", headers=header,
                       json={"name": "go", "value": {"by": "ana"}}).status_code == 200
    # bob waits on no approval: as eddies approve, refused unless kept on purpose.
    for part in ("approve", "reject"):
        refused = client.post(f"/api/sessions/bob/{part}", headers=header,
                              json={"name": "approval:bob:r1:i1:c2"})
        assert refused.status_code == 409
        assert refused.json()["error"] == ("no approval is pending with that id: approval:bob:r1:i1:c2 "
                                           "(pending: none)")
    assert client.post("/api/sessions/bob/approve", headers=header,
                       json={"name": "approval:bob:r1:i1:c2", "reason": "", "keep": True}).status_code == 200
    assert client.post("/api/sessions/bob/reject", headers=header, json={
        "name": "approval:bob:r1:i1:c2", "reason": " too big ", "keep": True}).status_code == 200
    assert sent == [("team/a b", "go", {"by": "ana"}),
                    ("bob", "approval:bob:r1:i1:c2", approval.answer(True)),
                    ("bob", "approval:bob:r1:i1:c2", approval.answer(False, "too big"))]
    for part, body, says in [("signal", {}, "the body must be"),
                             ("signal", {"name": " "}, "the body must be"),
                             ("approve", {"name": "go"}, "is not an approval signal"),
                             ("reject", {"name": "approval:x", "reason": 3}, "reason")]:
        refused = client.post(f"/api/sessions/bob/{part}", headers=header, json=body)
        assert refused.status_code == 400 and says in refused.json()["error"], body
    assert len(sent) == 3


def test_the_page_and_the_hosts_it_answers(topic: _Topic) -> None:
    client = _client(topic)
    page = client.get("/")
    assert page.status_code == 200 and "<title>Eddies</title>" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    # A DNS-rebinding page names its own host: refused.
    assert client.get("/api/sessions", headers={"Host": "evil.example:8321"}).status_code == 400


def test_evaluations_are_listed_and_shown_as_pages_of_their_own(topic: _Topic) -> None:
    listed = [{"id": "e1", "title": "new vs recorded", "cases": 2, "pass_rates": {"new": 0.5}}]
    client = _client(topic, evaluations=lambda: listed,
                     evaluation_page=lambda i: "<h1>new vs recorded</h1>" if i == "e 1" else None)
    assert client.get("/api/info").json()["evaluations"] is True
    assert client.get("/api/evaluations").json() == {"evaluations": listed}
    page = client.get("/evaluations/e%201")
    assert page.status_code == 200 and page.text == "<h1>new vs recorded</h1>"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'self'" in policy  # shown in the tab's frame
    assert client.get("/evaluations/e2").status_code == 404
    bare = _client(topic)
    assert bare.get("/api/info").json()["evaluations"] is False
    assert bare.get("/api/evaluations").status_code == 501
    assert bare.get("/favicon.ico").status_code == 204


def test_replay_view_every_id_and_what_differs(topic: _Topic) -> None:
    from eddies.engine import AgentPlan
    from eddies.events import ChatResponseEvent, OutputEvent

    settings = topic.settings
    same = sessions.replay_view(settings, AgentPlan.compile(calculator_agent()), "team/a b")
    assert same["ok"] is True and same["mismatches"] == 0
    assert [s["seq"] for s in same["steps"]] == list(range(1, len(same["steps"]) + 1))
    last = len(same["steps"])
    middle = sessions.replay_view(settings, AgentPlan.compile(calculator_agent()), "team/a b", 3, last - 1)
    assert middle["ok"] is True and [s["seq"] for s in middle["steps"]] == list(range(3, last))
    beyond = sessions.replay_view(settings, AgentPlan.compile(calculator_agent()), "team/a b", last + 5)
    assert beyond["ok"] is False and f"from step {last + 5}" in beyond["error"]

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
