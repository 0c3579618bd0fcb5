"""A worker against a provider that answers the way real ones do, after a second: its model
calls (litellm's acompletion) are tasks on the executor's event loop, so it holds many
more at once than it has call threads (executor_concurrency, 8)."""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.inspect.replay import load_history
from eddies.connectors.runtime.client import producer, read_records, send_input
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.connectors.runtime.topics import TopicNames
from eddies.events import CallKind, DurableCallResult, decode
from tests.integration.workers import answers, eddies_command, start_worker, stop_worker, wait_until
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

SESSIONS = 120
DELAY_S = 1.0


def _one_call_worker(settings: Settings, server: OpenAIServer, log: Path, slot: str) -> Any:
    """A worker of the one-call agent at ``server``, in worker slot ``slot``."""
    return start_worker(settings, "tests.integration.provider_agents:one_call_agent", log,
                        TEST_OPENAI_BASE=server.base_url, EDDIES_INSTANCE_ID=slot)


def _hundreds_in_flight(settings: Settings, server: OpenAIServer, worker: Any, log: Path) -> None:
    """MANY sessions sent, each one model call; back once the server holds half of them."""
    prod = producer(settings)
    for n in range(MANY):
        send_input(settings, f"s{n}", f"question {n}", prod=prod)
    prod.flush(30)
    wait_until("hundreds of calls in flight", lambda: server.in_flight >= MANY // 2, worker, log)


def _every_answer(settings: Settings, worker: Any, log: Path) -> None:
    """Back once every one of the MANY sessions is answered (``worker`` watched meanwhile)."""
    wait_until("every answer", lambda: len({a.session_id for a in answers(settings)}) >= MANY,
               worker, log, timeout=180)


def _settings(bootstrap: str, partitions: int = 4) -> Settings:
    """A fresh app on the test's broker."""
    return load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"p{uuid.uuid4().hex[:10]}", "partitions": partitions})


def test_a_worker_holds_many_slow_model_calls_at_once(bootstrap: str, tmp_path: Path) -> None:
    settings = _settings(bootstrap)
    server = OpenAIServer(delay=DELAY_S).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.provider_agents:one_call_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        # One answered first: the worker has started and warmed up.
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), worker, log)
        prod = producer(settings)
        start = time.monotonic()
        for n in range(SESSIONS):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(30)
        wait_until(f"{SESSIONS} answers", lambda: len(answers(settings)) >= SESSIONS + 1, worker, log,
                   timeout=120)
        took = time.monotonic() - start  # (shown if the peak is short)
    finally:
        stop_worker(worker)
        server.stop()
    # With a thread per call, 8 at once: 120 calls of 1 s take 15 s and more.
    assert server.peak >= SESSIONS // 2, (server.peak, took)
    said = {a.session_id: a.payload.output for a in answers(settings)}
    assert said == {"warm": "The result is hello.",
                    **{f"s{n}": f"The result is question {n}." for n in range(SESSIONS)}}


def test_a_workers_embeddings_wait_on_its_call_loop_not_a_thread_each(bootstrap: str, tmp_path: Path) -> None:
    """32 sessions each embed a text the server holds 2 s: the worker's 4 call threads
    would send them in eight waves; on the call loop (aembedding) they are all held at once."""
    from tests.openai_server import vector_of

    said, peak = _texts_at_a_slow_provider(bootstrap, tmp_path, "embedding_agent")
    assert said == {f"s{n}": f"{vector_of(f'text {n}')[0]:.6f}/8" for n in range(TEXTS)}
    assert peak >= TEXTS * 3 // 4, peak  # on 4 threads: 4


def test_a_workers_vector_store_calls_embed_on_its_call_loop(bootstrap: str, tmp_path: Path) -> None:
    """32 sessions each keep a text in a vector store and find it again: each operation
    embeds its text at a server that holds it 2 s. On the call loop they wait together
    (on the worker's 4 call threads: 4 at once), and each finds its own text."""
    said, peak = _texts_at_a_slow_provider(bootstrap, tmp_path, "keeping_agent")
    assert said == {f"s{n}": f"text {n}" for n in range(TEXTS)}
    assert peak >= TEXTS * 3 // 4, peak


#: Sessions of the tests that send one text each to an agent at a slow provider.
TEXTS = 32


def _texts_at_a_slow_provider(bootstrap: str, tmp_path: Path, agent: str) -> tuple[dict[str, Any], int]:
    """Session ``sN`` sends ``text N`` to ``agent`` of provider_agents on a worker with 4
    call threads, at a server that holds each request 2 s: each session's answer, and the
    most requests the server held at once."""
    settings = _settings(bootstrap)
    server = OpenAIServer(delay=2.0).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, f"tests.integration.provider_agents:{agent}", log,
                          TEST_OPENAI_BASE=server.base_url, EDDIES_EXECUTOR_CONCURRENCY="4")
    try:
        prod = producer(settings)
        for n in range(TEXTS):
            send_input(settings, f"s{n}", f"text {n}", prod=prod)
        prod.flush(30)
        wait_until(f"{TEXTS} answers", lambda: len(answers(settings)) >= TEXTS, worker, log, timeout=120)
    finally:
        stop_worker(worker)
        server.stop()
    return {a.session_id: a.payload.output for a in answers(settings)}, server.peak


def test_a_model_call_on_the_loop_is_cut_off_at_its_timeout(bootstrap: str, tmp_path: Path) -> None:
    """A task, unlike a thread, is stopped at its timeout_ms: the run has its TimeoutError
    long before the provider's 3 s answer, journaled as the call's outcome."""
    settings = _settings(bootstrap, partitions=2)
    server = OpenAIServer(delay=3.0).start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.provider_agents:impatient_one_call_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "s1", "hello")
        [out] = wait_until("the answer", lambda: answers(settings), worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    assert out.payload.error is not None and "TimeoutError" in out.payload.error.type, out.payload
    [result] = [ev.payload for _, ev in load_history(settings, "s1")
                if isinstance(ev.payload, DurableCallResult) and ev.payload.kind is CallKind.CHAT_MODEL]
    assert result.error is not None and result.error.type == "TimeoutError", result
    assert "timeout_ms=300" in result.error.message, result.error.message


MANY = 400


def _journaled_sessions(settings: Settings, before_ms: float) -> set[str]:
    """The sessions whose model call's outcome the journal holds from a record written
    before ``before_ms``."""
    found = set()
    for m in read_records(settings, TopicNames(settings.app).journal):
        if (m.key() or b"").startswith(b"out/") and m.timestamp()[1] < before_ms:
            ev = decode(m.value())
            if isinstance(ev.payload, DurableCallResult) and ev.payload.kind is CallKind.CHAT_MODEL:
                found.add(ev.session_id)
    return found


def test_a_worker_killed_with_hundreds_of_calls_in_flight_loses_and_repeats_nothing_journaled(
        bootstrap: str, tmp_path: Path) -> None:
    """kill -9 while the provider holds hundreds of the worker's calls: the next worker
    answers every session once; the calls asked again are only those with no journaled
    outcome at the kill (model calls are idempotent: those may be)."""
    settings = _settings(bootstrap)
    server = OpenAIServer(delay=2.0).start()
    log = tmp_path / "worker.log"
    first = _one_call_worker(settings, server, log, "slot-0")
    try:
        _hundreds_in_flight(settings, server, first, log)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed_ms, asked_before = time.time() * 1000, len(server.requests)
        second = _one_call_worker(settings, server, log, "slot-0")
        try:
            _every_answer(settings, second, log)
        finally:
            stop_worker(second)
    finally:
        if first.poll() is None:
            first.kill()
        server.stop()
    unique = {a.event_id: a for a in answers(settings)}
    assert sorted(a.session_id for a in unique.values()) == sorted(f"s{n}" for n in range(MANY))

    def session(request: dict[str, Any]) -> str:
        return "s" + str(request["messages"][-1]["content"]).split()[-1]

    asked_first = Counter(session(r) for r in server.requests[:asked_before])
    asked_again = Counter(session(r) for r in server.requests[asked_before:])
    assert max(asked_first.values()) == 1 and max(asked_again.values()) == 1
    repeated = set(asked_first) & set(asked_again)
    durable = _journaled_sessions(settings, killed_ms)
    assert repeated.isdisjoint(durable), f"journaled calls were repeated: {sorted(repeated & durable)}"
    assert set(asked_first) <= durable | repeated, "a call neither journaled nor asked again"
    assert len(repeated) >= MANY // 4  # the kill did cut calls off


def test_a_worker_joining_while_hundreds_of_calls_are_in_flight_has_none_asked_again(
        bootstrap: str, tmp_path: Path) -> None:
    """A second worker joins while the first holds hundreds of 10 s calls: half the
    partitions move, in order, and the first hands over the calls it is still making (a
    started mark each), so the second waits for their outcomes instead of asking the
    provider again. Every session is answered once, and every call asked once."""
    settings = _settings(bootstrap)
    server = OpenAIServer(delay=10.0).start()
    log = tmp_path / "worker.log"
    first = _one_call_worker(settings, server, log, "slot-0")
    second = None
    try:
        _hundreds_in_flight(settings, server, first, log)
        second = _one_call_worker(settings, server, log, "slot-1")
        _every_answer(settings, second, log)
    finally:
        stop_worker(first)
        if second is not None:
            stop_worker(second)
        server.stop()
    unique = {a.event_id: a for a in answers(settings)}
    assert sorted(a.session_id for a in unique.values()) == sorted(f"s{n}" for n in range(MANY))
    asked = Counter(str(r["messages"][-1]["content"]) for r in server.requests)
    twice = [q for q, n in asked.items() if n > 1]
    assert not twice, f"{len(twice)} calls asked twice, as {twice[:5]}"
    said = log.read_text()  # (each worker's counters as it stops)
    handed = [int(n) for n in re.findall(r"calls_handed_over (\d+)", said)]
    # A handed-over call's outcome is awaited, or found journaled already when the new
    # owner comes to its request (the old owner finished it first).
    taken = [int(n) for n in re.findall(r"results_(?:awaited|resent|recovered) (\d+)", said)]
    assert sum(handed) >= MANY // 4 and sum(taken) >= sum(handed), (handed, taken)


def test_a_worker_paused_past_its_session_timeout_with_hundreds_of_calls_in_flight(
        bootstrap: str, tmp_path: Path) -> None:
    """SIGSTOP of a worker holding hundreds of calls, past its session timeout: another
    worker takes its partitions and asks again the calls with no outcome; the paused one,
    resumed, finishes its own late. Every session is answered once, as it should be."""
    settings = _settings(bootstrap)
    server = OpenAIServer(delay=2.0).start()
    log = tmp_path / "worker.log"
    paused = _one_call_worker(settings, server, log, "slot-0")
    other = None
    try:
        _hundreds_in_flight(settings, server, paused, log)
        paused.send_signal(signal.SIGSTOP)
        other = _one_call_worker(settings, server, log, "slot-1")
        time.sleep(8)  # well past the session timeout: the other worker owns every partition
        paused.send_signal(signal.SIGCONT)
        _every_answer(settings, other, log)
        time.sleep(3)  # what the resumed worker still had to say
    finally:
        paused.send_signal(signal.SIGCONT)
        stop_worker(paused)
        if other is not None:
            stop_worker(other)
        server.stop()
    unique = {a.event_id: a for a in answers(settings)}
    said = Counter(a.session_id for a in unique.values())
    assert said == Counter({f"s{n}": 1 for n in range(MANY)}), said.most_common(3)
    assert len(server.requests) > MANY  # the other worker asked again what had no outcome
    assert {a.session_id: a.payload.output for a in unique.values()} == {
        f"s{n}": f"The result is question {n}." for n in range(MANY)}


def test_a_retry_after_holds_every_call_to_that_provider(bootstrap: str, tmp_path: Path) -> None:
    """A 429 with Retry-After: 2 to one call: the calls to that provider asked after it wait
    those 2 s before they start, not only the call that got it (whose retry waits too)."""
    settings = _settings(bootstrap, partitions=2)
    server = OpenAIServer().start()
    log = tmp_path / "worker.log"
    worker = start_worker(settings, "tests.integration.provider_agents:one_call_agent", log,
                          TEST_OPENAI_BASE=server.base_url)
    try:
        send_input(settings, "warm", "hello")
        wait_until("the first answer", lambda: answers(settings), worker, log)
        server.fail(429, headers={"Retry-After": "2"})
        send_input(settings, "first", "go")
        wait_until("the 429", lambda: len(server.requests) >= 2, worker, log)
        refused = time.monotonic()
        prod = producer(settings)
        for n in range(5):
            send_input(settings, f"s{n}", f"question {n}", prod=prod)
        prod.flush(10)
        wait_until("the next call", lambda: len(server.requests) >= 3, worker, log)
        held = time.monotonic() - refused
        wait_until("every answer", lambda: len(answers(settings)) >= 7, worker, log)
    finally:
        stop_worker(worker)
        server.stop()
    assert held >= 1.5, held  # without the hold, the next call comes within a few ms
    said = {a.session_id: a.payload.output for a in answers(settings)}
    assert said["first"] == "The result is go." and len(said) == 7


def test_a_primary_answering_500_to_everything_is_answered_by_its_fallback(
        bootstrap: str, tmp_path: Path) -> None:
    settings = _settings(bootstrap, partitions=2)
    primary, spare = OpenAIServer().start(), OpenAIServer().start()
    primary.fail(500, times=1000)
    log = tmp_path / "worker.log"
    env = {"TEST_OPENAI_BASE": primary.base_url, "TEST_FALLBACK_BASE": spare.base_url}
    worker = start_worker(settings, "tests.integration.provider_agents:fallback_agent", log, **env)
    try:
        send_input(settings, "s1", "hello")
        [out] = wait_until("the answer", lambda: answers(settings), worker, log)
    finally:
        stop_worker(worker)
    try:
        assert out.payload.output == "The result is hello."
        assert (len(primary.requests), len(spare.requests)) == (2, 1)  # its retry, then the fallback
        trace = eddies_command(settings, "trace", "--session", "s1", env=env)
        assert trace.returncode == 0, trace.stderr
        assert "model backup -> OK" in trace.stdout and "model llm -> ERROR" in trace.stdout, trace.stdout
        replay = eddies_command(settings, "replay", "--session", "s1",
                                "--agent", "tests.integration.provider_agents:fallback_agent", env=env)
        assert replay.returncode == 0 and "every id recomputed identically" in replay.stdout, replay.stdout
        assert (len(primary.requests), len(spare.requests)) == (2, 1)  # replay asked neither
    finally:
        primary.stop()
        spare.stop()

