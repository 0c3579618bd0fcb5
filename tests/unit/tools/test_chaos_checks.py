"""The chaos campaign's invariants catch what they exist for: a campaign whose checks could
not fail would pass whatever the workers did."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

from chaos import checks
from chaos.evidence import Answer, Call, Effect, Evidence

KILLED_AT = 1000.0


def body(run: int) -> dict[str, Any]:
    return {"kind": "effects", "key": f"s#{run - 1}", "a": 40, "b": run - 1}


def evidence(**changes: Any) -> Evidence:
    """A clean round: two inputs of session s answered; run 1 charged once by w0, which was
    killed later; w1 stopped by SIGTERM."""
    ev = Evidence(
        inputs={("s", 1): body(1), ("s", 2): body(2)},
        answers={("s", 1): {"out-1": Answer("The result is 40.", None)},
                 ("s", 2): {"out-2": Answer("The result is 41.", None)}},
        output_records=Counter({("s", 1): 1, ("s", 2): 1}),
        other_output_types=Counter(),
        calls={("s:r1:i1:c0", 1): Call("s:r1:i1:c0", 1, "s", 1, "chaos.agents:charge", False, "s#0",
                                       applied=["OK"], sent=["OK"], marks=[("w0|aa", 990.0)],
                                       outcomes=["OK"])},
        effects=[Effect("EXEC", "fn", "s#0", 11, 990.1), Effect("DONE", "fn", "s#0", 11, 990.5)],
        processes=[
            {"slot": "w0", "pid": 11, "incarnation": "aa", "end": "killed", "rc": -9, "killed_at": KILLED_AT,
             "name": "001-w0-all"},
            {"slot": "w1", "pid": 12, "incarnation": "bb", "end": "term", "rc": 0, "killed_at": None,
             "name": "002-w1-all"},
        ],
        crashes=[], missing_after_drain=[], dlq_reasons=Counter(), log_lines={},
    )
    for name, value in changes.items():
        setattr(ev, name, value)
    return ev


def failed(ev: Evidence) -> list[str]:
    return [name for name, report in checks.check(ev).items() if not report["ok"]]


def test_a_clean_round_passes_every_invariant() -> None:
    assert failed(evidence()) == []


def test_an_unanswered_input_fails_the_answer_and_stuck_checks() -> None:
    ev = evidence(answers={("s", 1): {"out-1": Answer("The result is 40.", None)}},
                  missing_after_drain=[("s", 2)])
    assert failed(ev) == ["exactly_one_answer", "no_stuck_session"]
    assert checks.no_stuck_session(ev)["stuck"] == {"s": 2}


def test_two_answers_for_one_input_or_a_wrong_one_fail() -> None:
    two = evidence()
    two.answers[("s", 2)]["out-2b"] = Answer("The result is 41.", None)
    assert failed(two) == ["exactly_one_answer"]
    wrong = evidence()
    wrong.answers[("s", 2)] = {"out-2": Answer("The result is 42.", None)}
    assert failed(wrong) == ["exactly_one_answer"]


def test_a_wrong_answer_explained_by_an_unknown_call_is_degraded_not_wrong() -> None:
    ev = evidence()
    ev.answers[("s", 2)] = {"out-2": Answer(None, "ToolError: unknown outcome")}
    ev.calls[("s:r2:i1:c0", 1)] = Call("s:r2:i1:c0", 1, "s", 2, "chaos.agents:charge", False, "s#1",
                                       applied=["UNKNOWN"], sent=["UNKNOWN"],
                                       marks=[("w0|aa", KILLED_AT - 0.5)])
    assert failed(ev) == []
    assert checks.exactly_one_answer(ev)["degraded_by_failed_call"] == 1


def test_a_side_effect_run_twice_fails() -> None:
    ev = evidence()
    ev.effects.append(Effect("EXEC", "fn", "s#0", 12, 1001.0))
    assert failed(ev) == ["side_effects_once"]
    assert checks.side_effects_once(ev)["repeated"][0]["call_id"] == "s:r1:i1:c0"


def test_a_completed_call_that_left_no_effect_fails() -> None:
    assert failed(evidence(effects=[])) == ["side_effects_once"]


def unknown_call(marked_at: float, outcomes: list[str], claimant: str = "w0|aa") -> Evidence:
    ev = evidence()
    ev.calls[("s:r1:i1:c0", 1)] = Call("s:r1:i1:c0", 1, "s", 1, "chaos.agents:charge", False, "s#0",
                                       applied=["UNKNOWN"], sent=["UNKNOWN", "UNKNOWN"],
                                       marks=[(claimant, marked_at)], outcomes=outcomes)
    ev.answers[("s", 1)] = {"out-1": Answer(None, "ToolError: unknown outcome")}
    return ev


def test_an_unknown_outcome_is_justified_only_by_its_claimants_kill() -> None:
    justified = unknown_call(KILLED_AT - 5, outcomes=["UNKNOWN"])  # the watcher journals its answer
    assert failed(justified) == []
    assert checks.side_effects_once(justified)["unknown_justified"] == 1
    # Its claimant lived on (stopped by SIGTERM): its call should have had an outcome.
    assert failed(unknown_call(KILLED_AT - 5, [], claimant="w1|bb")) == ["side_effects_once"]
    # The mark came after the kill: not that process's.
    assert failed(unknown_call(KILLED_AT + 5, [])) == ["side_effects_once"]
    # The claimant journaled an outcome: nobody should have answered UNKNOWN.
    assert failed(unknown_call(KILLED_AT - 5, ["OK"])) == ["side_effects_once"]


def test_an_unknown_outcome_is_justified_by_its_claimant_paused_or_cut_off_after_its_mark() -> None:
    """Out of its groups long enough, the claimant was taken for dead; what it journaled
    when it came back (OK here) came second and does not count."""
    def away(pauses: list[Any], cuts: list[Any], outcomes: list[str]) -> Evidence:
        ev = unknown_call(KILLED_AT - 5, outcomes, claimant="w1|bb")
        ev.processes[1] = {**ev.processes[1], "pauses": pauses, "cuts": cuts}
        ev.effects = [Effect("EXEC", "fn", "s#0", 12, KILLED_AT - 4.9)]  # w1 ran it
        return ev

    assert failed(away([(KILLED_AT - 4, 6.0)], [], ["UNKNOWN", "OK"])) == []
    assert failed(away([], [(KILLED_AT - 3, 8.0, "blackhole")], ["UNKNOWN"])) == []
    # A cut over 0.3 s before the mark: the claimant was still rejoining its groups (a chaos
    # round saw a worker claim under an assignment the group had moved on from).
    assert failed(away([], [(KILLED_AT - 8.3, 3.0, "blackhole")], ["UNKNOWN", "OK"])) == []
    # A pause over before the call was started, or too short to leave the group: no excuse.
    assert failed(away([(KILLED_AT - 30, 6.0)], [], ["UNKNOWN"])) == ["side_effects_once"]
    assert failed(away([(KILLED_AT - 4, 0.5)], [], ["UNKNOWN"])) == ["side_effects_once"]
    # Its own outcome came first: the UNKNOWN should never have been answered.
    assert failed(away([(KILLED_AT - 4, 6.0)], [], ["OK", "UNKNOWN"])) == ["side_effects_once"]
    # Paused (and its late outcome refused), then killed later: the pause explains it.
    paused_then_killed = unknown_call(KILLED_AT - 20, ["UNKNOWN", "OK"])
    paused_then_killed.processes[0] = {**paused_then_killed.processes[0],
                                       "pauses": [(KILLED_AT - 19, 7.0)]}
    assert failed(paused_then_killed) == []


def test_a_worker_that_died_on_its_own_or_a_dead_letter_fails() -> None:
    ev = evidence()
    ev.processes[1] = {**ev.processes[1], "end": "crash", "rc": 1}
    assert failed(ev) == ["no_crash_no_dead_letter"]
    assert failed(evidence(dlq_reasons=Counter({"undecodable": 1}))) == ["no_crash_no_dead_letter"]


def test_a_call_waited_for_and_answered_unknown_twice_is_reported_not_failed() -> None:
    ev = unknown_call(KILLED_AT - 5, outcomes=["UNKNOWN"])
    ev.waited_unknown = Counter({"s:r1:i1:c0": 2, "s:r2:i1:c0": 1})
    report = checks.side_effects_once(ev)
    assert report["ok"] and report["unknown_waited_twice"] == ["s:r1:i1:c0"]
    assert report["unknown_sent_twice"] == 1


W0, W1 = "001-w0-all", "002-w1-all"


def slow_round(requests: list[tuple[float, str, int, str]]) -> Evidence:
    """A +slow round's evidence: slow input p run 1, its model call's OK outcome journaled at
    1010.0 by a worker that was killed before it (w1 asked again at 1008.0), and the
    provider's log of requests ``requests``."""
    slow = {"kind": "slow", "ref": "p/0"}
    ev = evidence()
    ev.inputs[("p", 1)] = slow
    ev.answers[("p", 1)] = {"out-p": Answer(f"The result is {json.dumps(slow)}.", None)}
    ev.calls[("p:r1:i1:c0", 1)] = Call("p:r1:i1:c0", 1, "p", 1, "slow", True, "p:r1:i1:c0",
                                       applied=["OK"], sent=["OK"], marks=[("w0|aa", 999.0)],
                                       outcomes=["OK"], outcome_times=[1010.0], kind="CHAT_MODEL")
    ev.provider_requests = requests
    return ev


def test_a_model_call_asked_again_before_its_outcome_passes_after_it_fails() -> None:
    again = slow_round([(999.1, "p", 1, W0), (1008.0, "p", 1, W1)])
    assert failed(again) == []
    report = checks.model_calls_not_asked_after_outcome(again)
    assert (report["asked_again"], report["asked_with_ok_outcome"]) == (1, 1)
    late = slow_round([(999.1, "p", 1, W0), (1011.5, "p", 1, W1)])
    late.processes[1]["moves"] = [(1000.0, "executor", "assigned", [0, 1]),
                                  (1009.0, "executor", "gone", [1]), (1011.0, "executor", "assigned", [1])]
    assert failed(late) == ["model_calls_not_asked_after_outcome"]
    report = checks.model_calls_not_asked_after_outcome(late)
    assert report["asked_after_outcome"] == [
        {"session": "p", "run": 1, "asked_at": 1011.5, "outcome_at": 1010.0, "caller": W1,
         "story": ["-2.5 s executor gone [1]", "-0.5 s executor assigned [1]"]}]
    assert report["asked_after_outcome_by"] == {W1: 1}
    assert report["asked_after_outcome_bursts"] == [
        {"caller": W1, "n": 1, "asked_from": 1011.5, "asked_to": 1011.5, "after_outcome_s": [1.5, 1.5],
         "story": ["-2.5 s executor gone [1]", "-0.5 s executor assigned [1]"]}]


def test_a_model_call_asked_as_its_outcome_came_is_counted_apart() -> None:
    """Asked 20 ms after its outcome was first read: no reader sees a record the instant
    another does. 100 ms after, the worker could have read it: a failure."""
    at_once = slow_round([(999.1, "p", 1, W0), (1010.02, "p", 1, W1)])
    assert failed(at_once) == []
    assert checks.model_calls_not_asked_after_outcome(at_once)["asked_as_it_came"] == 1
    assert failed(slow_round([(999.1, "p", 1, W0), (1010.1, "p", 1, W1)])) == [
        "model_calls_not_asked_after_outcome"]


def test_a_model_call_asked_after_an_outcome_from_a_worker_cut_off_is_counted_apart() -> None:
    """w0 asked at 999.1 and was cut off from 1005 to 1012; its answer, journaled late, was
    read at 1010.0, and w1 (the partition's new owner) asked at 1010.6: counted apart. The
    same ask 3 s after, or after an outcome from a worker that was not cut off, fails."""
    afar = slow_round([(999.1, "p", 1, W0), (1010.6, "p", 1, W1)])
    cut = [{**p, "cuts": [(1005.0, 7.0, "drop")]} if p["slot"] == "w0" else p for p in afar.processes]
    afar.processes = cut
    assert failed(afar) == []
    assert checks.model_calls_not_asked_after_outcome(afar)["answered_from_afar"] == 1
    later = slow_round([(999.1, "p", 1, W0), (1013.0, "p", 1, W1)])
    later.processes = cut
    assert failed(later) == ["model_calls_not_asked_after_outcome"]
    assert failed(slow_round([(999.1, "p", 1, W0), (1010.6, "p", 1, W1)])) == [
        "model_calls_not_asked_after_outcome"]


def test_a_model_call_asked_again_after_an_outcome_that_came_second_passes() -> None:
    """Attempt 1's first outcome is a watcher's UNKNOWN (its claimant taken for dead); the
    claimant's OK, journaled after it, decides nothing, and the run asks again (attempt 2):
    not an ask after the outcome. Attempt 2's own OK counts."""
    ev = slow_round([(999.1, "p", 1, W0), (1011.5, "p", 1, W1)])
    first = ev.calls[("p:r1:i1:c0", 1)]
    ev.calls[("p:r1:i1:c0", 1)] = dataclasses.replace(first, outcomes=["UNKNOWN", "OK"],
                                                      outcome_times=[1009.0, 1010.0])
    ev.calls[("p:r1:i1:c0", 2)] = dataclasses.replace(first, attempt=2, outcome_times=[1013.0])
    assert failed(ev) == []
    ev.provider_requests.append((1014.0, "p", 1, W1))  # after attempt 2's OK: late
    assert failed(ev) == ["model_calls_not_asked_after_outcome"]


def test_a_slow_answer_the_provider_was_never_asked_for_fails() -> None:
    ev = slow_round([])
    assert failed(ev) == ["model_calls_not_asked_after_outcome"]
    assert checks.model_calls_not_asked_after_outcome(ev)["answered_without_request"] == [("p", 1)]


def test_a_model_call_asked_by_a_worker_waking_after_its_outcome_is_counted_apart() -> None:
    """w1 stood still from 1005 to 1011 (a pause): a request it decided before sends when
    it wakes, after the outcome its session's new owner journaled at 1010. Counted apart;
    the same request from no waking worker, or long after the wake, or sent by another
    process than the one that woke, fails."""
    late = [(999.1, "p", 1, W0), (1011.5, "p", 1, W1)]
    ev = slow_round(late)
    paused = [{**p, "pauses": [(1005.0, 6.0)]} if p["slot"] == "w1" else p for p in ev.processes]
    woke = slow_round(late)
    woke.processes = paused
    assert failed(woke) == []
    assert checks.model_calls_not_asked_after_outcome(woke)["asked_on_waking"] == 1
    too_late = slow_round([(999.1, "p", 1, W0), (1014.0, "p", 1, W1)])  # 3 s after the wake
    too_late.processes = paused
    assert failed(too_late) == ["model_calls_not_asked_after_outcome"]
    after_it = slow_round(late)  # a pause that began after the outcome excuses nothing
    after_it.processes = [{**p, "pauses": [(1010.5, 0.8)]} if p["slot"] == "w1" else p for p in ev.processes]
    assert failed(after_it) == ["model_calls_not_asked_after_outcome"]
    someone_else = slow_round([(999.1, "p", 1, W0), (1011.5, "p", 1, W0)])  # w1 woke, w0 asked
    someone_else.processes = paused
    assert failed(someone_else) == ["model_calls_not_asked_after_outcome"]
    story = checks.model_calls_not_asked_after_outcome(after_it)["asked_after_outcome"][0]["story"]
    assert story == ["-1.0 s away 0.8 s"]
