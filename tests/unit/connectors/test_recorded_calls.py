"""A re-run's report counts calls, not attempts: a retried call is one call."""

from __future__ import annotations

from eddies.connectors.execution.calls import result_event
from eddies.connectors.execution.recorded_calls import RecordedCalls
from eddies.events import AgentEvent, CallKind, CallStatus, DurableCallRequest, ErrorInfo


def request(call_id: str, attempt: int) -> AgentEvent:
    return AgentEvent.external("s", DurableCallRequest(call_id, CallKind.TOOL, "add", args="{}",
                                                       attempt=attempt),
                               event_id=f"{call_id}#{attempt}", timestamp=0)


def test_each_call_is_listed_once_however_many_attempts_it_made() -> None:
    failed = ErrorInfo("ConnectionError", "down")
    outcomes = {(cid, n): result_event(request(cid, n), CallStatus.ERROR, "null", failed)
                for cid, attempts in (("s:r1:i1:c0", 3), ("s:r1:i1:c1", 1)) for n in range(1, attempts + 1)}
    recorded = RecordedCalls(outcomes)
    for n in (1, 2, 3):  # every attempt of c0 answered from the recording
        assert recorded.answer(request("s:r1:i1:c0", n)) is not None
    assert recorded.answer(request("s:r1:i1:c1", 1)) is not None
    assert recorded.answer(request("s:r1:i1:c1", 2)) is None  # the recording stopped there: live
    assert recorded.answer(request("s:r1:i1:c2", 1)) is None
    assert recorded.reused == ["s:r1:i1:c0"]
    assert recorded.live == ["s:r1:i1:c1", "s:r1:i1:c2"]


def test_a_forks_calls_taken_over_count_once_and_not_if_retried_live() -> None:
    taken = RecordedCalls({})  # a fork offers no outcomes: its history is taken over
    for cid in ("s:r1:i1:c0", "s:r1:i1:c0", "s:r1:i1:c1"):  # c0: two attempts recorded
        taken.reused_from_record(cid)
    assert taken.answer(request("s:r1:i1:c1", 2)) is None  # retried after the fork's step
    assert taken.reused == ["s:r1:i1:c0"] and taken.live == ["s:r1:i1:c1"]
