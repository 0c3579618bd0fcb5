"""The campaign's five invariants, each over a round's :class:`~chaos.evidence.Evidence`.

Pure functions (no broker, no files), so that crafted evidence tests them: a check that
could not fail would make every campaign pass. Each returns a JSON-able report whose
``ok`` says whether the invariant held.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .agents import expected_output
from .evidence import Call, Effect, Evidence, Run

#: A started mark written this long after its claimant was killed cannot be that claimant's
#: (the kill's time is taken just before the signal; a mark's time is the broker's).
MARK_AFTER_KILL_S = 1.0
#: A pause or cut shorter than this cannot have cost a process its group membership.
AWAY_AT_LEAST_S = 1.0
#: How long after a pause or cut a process may still be out of its groups, rejoining: a
#: claim it makes meanwhile (under an assignment the group has moved on from) may be taken
#: for a dead process's by the partition's new owner.
REJOIN_S = 5.0


def exactly_one_answer(ev: Evidence) -> dict[str, Any]:
    """Every input has exactly one final OutputEvent (one event id), and it is the expected
    answer unless one of its run's calls failed or was unknown."""
    missing = sorted(set(ev.inputs) - set(ev.answers))
    extra = sorted(set(ev.answers) - set(ev.inputs))
    distinct = {f"{r[0]} run {r[1]}": sorted(ids) for r, ids in ev.answers.items() if len(ids) > 1}
    statuses = _statuses_by_run(ev)
    wrong: list[dict[str, Any]] = []
    degraded: list[dict[str, Any]] = []
    for r, ids in ev.answers.items():
        body = ev.inputs.get(r)
        if body is None:
            continue
        answer = next(iter(ids.values()))
        expected = expected_output(body)
        if answer.error is None and answer.output == expected:
            continue
        item = {"session": r[0], "run": r[1], "kind": body["kind"], "expected": expected,
                "output": answer.output, "error": answer.error, "call_statuses": dict(statuses[r])}
        (degraded if statuses[r]["UNKNOWN"] or statuses[r]["ERROR"] else wrong).append(item)
    return {
        "ok": not missing and not extra and not distinct and not wrong,
        "expected": len(ev.inputs), "answered": len(set(ev.inputs) & set(ev.answers)),
        "missing": missing[:50], "n_missing": len(missing), "extra": extra[:50],
        "distinct_output_ids_for_one_run": distinct,
        "same_id_rewrites": sum(n - len(ev.answers.get(r, {})) for r, n in ev.output_records.items()),
        "wrong_without_failed_call": wrong[:30], "n_wrong": len(wrong),
        "degraded_by_failed_call": len(degraded), "degraded": degraded[:40],
        "other_output_types": dict(ev.other_output_types),
    }


def side_effects_once(ev: Evidence) -> dict[str, Any]:
    """No side effect ran twice; every call that completed OK ran; every UNKNOWN outcome
    is explained by a kill (its claimant was killed after its started mark, and journaled
    no outcome)."""
    execs: dict[str, list[Effect]] = defaultdict(list)
    dones: dict[str, list[Effect]] = defaultdict(list)
    for effect in ev.effects:
        (execs if effect.tag == "EXEC" else dones)[effect.key].append(effect)
    calls_by_key = {c.effect_key: c for c in ev.calls.values()}
    repeated = [{"effect": key, "call_id": calls_by_key[key].call_id if key in calls_by_key else None,
                 "executions": [(e.pid, e.t) for e in runs],
                 "marks": calls_by_key[key].marks if key in calls_by_key else []}
                for key, runs in execs.items() if len(runs) > 1]
    by_incarnation = {p["incarnation"]: p for p in ev.processes if p["incarnation"]}
    unknown: list[dict[str, Any]] = []
    ran_without_effect: list[dict[str, str]] = []
    non_idempotent = completed = 0
    for call in ev.calls.values():
        if call.idempotent:
            continue
        non_idempotent += 1
        if "OK" in call.applied or "OK" in call.outcomes:
            completed += 1
            if not execs.get(call.effect_key):
                ran_without_effect.append({"call_id": call.call_id, "target": call.target})
        if "UNKNOWN" in call.applied or "UNKNOWN" in call.sent:
            verdict = unknown_verdict(call, by_incarnation, execs.get(call.effect_key, []),
                                      dones.get(call.effect_key, []))
            unknown.append({"call_id": call.call_id, "attempt": call.attempt, "target": call.target,
                            "session": call.session, "run": call.run, "marks": call.marks,
                            "verdict": verdict, "applied": call.applied, "sent": call.sent})
    unjustified = [u for u in unknown if not str(u["verdict"]).startswith("justified")]
    return {
        "ok": not repeated and not ran_without_effect and not unjustified,
        "effect_executions": sum(len(v) for v in execs.values()), "effects_distinct": len(execs),
        "non_idempotent_calls": non_idempotent, "completed_ok": completed,
        "repeated": repeated, "ok_without_execution": ran_without_effect[:20],
        "unknown_outcomes": len(unknown), "unknown_justified": len(unknown) - len(unjustified),
        "unknown_verdicts": dict(Counter(u["verdict"] for u in unknown)),
        "unknown": unknown,
        # Calls whose UNKNOWN reached APP.input more than once (a request issued again, the
        # answer sent again from the journal, or decided again), and calls waited for and
        # decided UNKNOWN twice: the latter is wasted waiting, neither is wrong.
        "unknown_sent_twice": sum(1 for u in unknown if u["sent"].count("UNKNOWN") > 1),
        "unknown_waited_twice": sorted(c for c, n in ev.waited_unknown.items() if n > 1),
        "executions_without_request": sorted(k for k in execs if k not in calls_by_key)[:20],
    }


def unknown_verdict(call: Call, by_incarnation: dict[str, dict[str, Any]], execs: list[Effect],
                    dones: list[Effect]) -> str:
    """Why ``call`` ended UNKNOWN: "justified: ..." when a kill of its claimant explains it,
    or a pause or network cut long enough for its groups to drop it, after its mark or
    ending less than :data:`REJOIN_S` before it (the claimant's own outcome, journaled when
    it came back, is refused: the first outcome decides); else what is wrong."""
    if not call.marks:
        return "no started mark"
    claimant, marked_at = call.marks[0]
    proc = by_incarnation.get(claimant.rpartition("|")[2])
    if proc is None:
        return f"claimant {claimant} is no process of this round"
    if call.outcomes and call.outcomes[0] != "UNKNOWN":  # the watcher journals its UNKNOWN
        return f"UNJUSTIFIED: an outcome was journaled first ({', '.join(call.outcomes)})"
    if any(e.pid != proc["pid"] for e in execs):
        return "UNJUSTIFIED: the effect ran in another process than the claimant"
    away = [(t, d) for t, d in _away(proc) if d >= AWAY_AT_LEAST_S and t + d + REJOIN_S >= marked_at]
    if away and (proc["end"] != "killed" or away[0][0] < (proc["killed_at"] or 0)):
        return "justified: claimant paused or cut off while it held the call"
    if proc["end"] != "killed":
        return (f"UNJUSTIFIED: claimant {proc['slot']} pid {proc['pid']} was neither killed "
                f"({proc['end']}) nor paused or cut off after its mark")
    if marked_at > (proc["killed_at"] or 0) + MARK_AFTER_KILL_S:
        return "UNJUSTIFIED: its mark was written after the claimant's kill"
    if any(status != "UNKNOWN" for status in call.outcomes):
        return f"UNJUSTIFIED: an outcome is journaled ({', '.join(call.outcomes)})"
    if not execs:
        return "justified: claimant killed after its mark, before the effect ran"
    if not dones:
        return "justified: claimant killed while the effect ran"
    return "justified: claimant killed after the effect, before its outcome was journaled"


def _away(proc: dict[str, Any]) -> list[tuple[float, float]]:
    """(start, seconds) of the process's pauses and network cuts."""
    cuts = [(t, d) for t, d, _ in proc.get("cuts", [])]
    return [(t, d) for t, d in proc.get("pauses", [])] + cuts


def no_stuck_session(ev: Evidence) -> dict[str, Any]:
    """Every session's last input was answered, and by the end of the drain."""
    last: dict[str, int] = {}
    for session, run in ev.inputs:
        last[session] = max(last.get(session, 0), run)
    stuck = {s: run for s, run in last.items() if (s, run) not in ev.answers}
    return {"ok": not stuck and not ev.missing_after_drain, "sessions": len(last), "stuck": stuck,
            "missing_when_drain_ended": ev.missing_after_drain[:50]}


def no_crash_no_dead_letter(ev: Evidence) -> dict[str, Any]:
    """No worker exited on its own (each was SIGKILLed by the campaign or stopped by
    SIGTERM), and no record was dead-lettered (the feeder sends only good ones)."""
    bad = [p for p in ev.processes
           if not ((p["end"] == "killed" and p["rc"] == -9) or (p["end"] == "term" and p["rc"] == 0))]
    return {"ok": not bad and not ev.crashes and not ev.dlq_reasons,
            "processes": len(ev.processes), "bad_exits": bad, "crashes": ev.crashes,
            "suspicious_log_lines": ev.log_lines, "dlq_reasons": dict(ev.dlq_reasons)}


#: How soon after a worker's pause or cut ends a request it decided before may arrive.
WOKEN_ASK_S = 2.0
#: An ask this close after its outcome was first read is as good as at once: a worker's
#: journal tail and the campaign's read a record at different instants (each fetch waits up
#: to fetch_wait_ms, 10 ms, for more).
AT_ONCE_S = 0.05


def model_calls_not_asked_after_outcome(ev: Evidence) -> dict[str, Any]:
    """In a ``+slow`` round, against the slow provider's log of requests: no model call was
    asked (made by a worker: each request says when) after its OK outcome could be read in
    the journal (when the campaign's own tail of
    the journal first read it: a record's timestamp is when its producer took it, seconds
    before the brokers had it if that worker was cut off; a call without one may be asked again, by
    whoever took it over from a worker killed, paused or cut off while it waited: model
    calls are idempotent; a call with one is answered from the journal), and every slow
    input answered as expected was asked at least once (the answer came from the provider).

    One ask after the outcome is not the engine's to prevent: a worker that decided the call,
    then stood still (paused, or cut off) before its request left, while the call's new
    owner made it and journaled the outcome, sends that request when it wakes. Such an ask,
    arriving within :data:`WOKEN_ASK_S` of the end of a pause or cut of the process that
    sent it (each request names its process), begun before the outcome, is counted apart
    (``asked_on_waking``), not as a failure; so is an ask made within :data:`AT_ONCE_S` of
    the outcome (``asked_as_it_came``: no reader sees a record the instant another does),
    and one made within WOKEN_ASK_S of an outcome delivered by a process that stood apart
    (``answered_from_afar``: the call's previous asker, paused or cut off, whose partition
    had moved to the asker).
    Each late ask is reported with its process's
    partition moves and pauses or cuts of the seconds before it (``story``).
    Vacuous (ok) in a round without the provider."""
    done: dict[Run, float] = {}  # the first OK outcome of each run's model calls, journaled at
    for call in ev.calls.values():
        # Only an attempt's first outcome decides it: an OK journaled after a watcher's
        # UNKNOWN (its claimant taken for dead) is refused, and the run asks again.
        if call.kind != "CHAT_MODEL" or not call.outcomes or call.outcomes[0] != "OK":
            continue
        r, t = (call.session, call.run), call.outcome_times[0]
        done[r] = min(done.get(r, t), t)
    asked = Counter((session, run) for _, session, run, _ in ev.provider_requests)
    late: list[dict[str, Any]] = [
        {"session": session, "run": run, "asked_at": t, "outcome_at": done[(session, run)], "caller": caller}
        for t, session, run, caller in ev.provider_requests
        if (session, run) in done and t > done[(session, run)]]
    procs = {p.get("name", ""): p for p in ev.processes}
    woken = [a for a in late if _woke_to_ask(a, procs)]
    at_once = [a for a in late if a not in woken and a["asked_at"] - a["outcome_at"] <= AT_ONCE_S]
    asks: dict[Run, list[tuple[float, str]]] = defaultdict(list)
    for t, session, run, caller in ev.provider_requests:
        asks[(session, run)].append((t, caller))
    afar = [a for a in late if a not in woken and a not in at_once and _from_afar(a, asks, procs)]
    after = [a for a in late if a not in woken and a not in at_once and a not in afar]
    for a in after:
        a["story"] = _story(procs.get(a["caller"]), a["asked_at"])
    slow = {r for r, body in ev.inputs.items() if body.get("kind") == "slow"}
    unasked = sorted(r for r in slow & set(ev.answers) if r not in asked and any(
        a.error is None and a.output == expected_output(ev.inputs[r]) for a in ev.answers[r].values()))
    again = {f"{r[0]} run {r[1]}": n for r, n in asked.items() if n > 1}
    return {
        "ok": not after and not unasked,
        "requests": len(ev.provider_requests), "slow_inputs": len(slow), "calls_asked": len(asked),
        "asked_with_ok_outcome": sum(1 for r in asked if r in done),
        # Asked more than once before an outcome: the price of a crash for an idempotent call.
        "asked_again": sum(n - 1 for n in asked.values()), "runs_asked_again": len(again),
        "asked_again_most": max(again.values(), default=0),
        "asked_after_outcome": after[:30], "n_asked_after_outcome": len(after),
        "asked_after_outcome_by": dict(Counter(a["caller"] for a in after)),
        "asked_after_outcome_bursts": _bursts(after),
        "asked_on_waking": len(woken), "asked_as_it_came": len(at_once),
        "answered_from_afar": len(afar),
        "answered_without_request": unasked[:30], "n_answered_without_request": len(unasked),
    }


#: How far back a late ask's story looks, in seconds.
STORY_S = 10.0


def _bursts(late: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Late asks by process and burst (asks of one process within 2 s of the one before):
    how many, when, how long after their outcomes, and the first one's story."""
    bursts: list[dict[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    for ask in sorted(late, key=lambda a: a["asked_at"]):
        gap = round(ask["asked_at"] - ask["outcome_at"], 2)
        burst = last.get(ask["caller"])
        if burst is None or ask["asked_at"] - burst["asked_to"] > 2.0:
            burst = last[ask["caller"]] = {"caller": ask["caller"], "n": 0, "asked_from": ask["asked_at"],
                                           "asked_to": ask["asked_at"], "after_outcome_s": [gap, gap],
                                           "story": ask["story"]}
            bursts.append(burst)
        burst["n"] += 1
        burst["asked_to"] = ask["asked_at"]
        low, high = burst["after_outcome_s"]
        burst["after_outcome_s"] = [min(low, gap), max(high, gap)]
    return bursts


def _from_afar(ask: dict[str, Any], asks: dict[Run, list[tuple[float, str]]],
               procs: dict[str, dict[str, Any]]) -> bool:
    """Whether the outcome came, within :data:`WOKEN_ASK_S` before the ask, from a process
    that stood apart: the call's last ask before the outcome was another process's, paused
    or cut off when the outcome came (or woken less than WOKEN_ASK_S before). Its partition
    had moved; the answer it got, delivered late, no new owner could wait for."""
    if ask["asked_at"] - ask["outcome_at"] > WOKEN_ASK_S:
        return False
    before = [(t, caller) for t, caller in asks[(ask["session"], ask["run"])]
              if t < ask["outcome_at"] and caller != ask["caller"]]
    if not before or max(before)[1] not in procs:
        return False
    writer = procs[max(before)[1]]
    return any(start <= ask["outcome_at"] <= start + seconds + WOKEN_ASK_S
               for start, seconds in _away(writer))


def _woke_to_ask(ask: dict[str, Any], procs: dict[str, dict[str, Any]]) -> bool:
    """Whether the process that asked (any process, if the request does not name one) stood
    still from before the outcome until at most :data:`WOKEN_ASK_S` before the ask."""
    callers = [procs[ask["caller"]]] if ask["caller"] in procs else list(procs.values())
    return any(start <= ask["outcome_at"] and end <= ask["asked_at"] <= end + WOKEN_ASK_S
               for proc in callers for start, end in
               ((start, start + seconds) for start, seconds in _away(proc)))


def _story(proc: dict[str, Any] | None, t: float) -> list[str]:
    """What happened to a process in the :data:`STORY_S` seconds before ``t``: its partition
    moves and its pauses or cuts, as "-2.3 s executor assigned [1, 3]"."""
    if proc is None:
        return ["unnamed process"]
    lines = [(when, f"{role} {move} {parts}") for when, role, move, parts in proc.get("moves", [])
             if t - STORY_S <= when <= t]
    lines += [(start, f"away {seconds:.1f} s") for start, seconds in _away(proc)
              if start <= t and start + seconds >= t - STORY_S]
    return [f"{when - t:+.1f} s {what}" for when, what in sorted(lines)]


INVARIANTS = {"exactly_one_answer": exactly_one_answer, "side_effects_once": side_effects_once,
              "no_stuck_session": no_stuck_session, "no_crash_no_dead_letter": no_crash_no_dead_letter,
              "model_calls_not_asked_after_outcome": model_calls_not_asked_after_outcome}


def check(ev: Evidence) -> dict[str, dict[str, Any]]:
    """Every invariant's report, by name."""
    return {name: invariant(ev) for name, invariant in INVARIANTS.items()}


def _statuses_by_run(ev: Evidence) -> dict[Run, Counter[str]]:
    statuses: dict[Run, Counter[str]] = defaultdict(Counter)
    for call in ev.calls.values():
        statuses[(call.session, call.run)].update(call.applied)
    return statuses
