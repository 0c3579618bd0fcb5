"""The broker-free benchmark drives real sessions end to end (else it would time nothing)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_worker_cpu_bench_runs_every_session_to_its_output() -> None:
    spec = importlib.util.spec_from_file_location("worker_cpu", BENCH / "worker_cpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    times, outputs = module.measure(sessions=60, rounds=2)
    assert outputs == 120
    assert len(times) == 2 and all(t > 0 for t in times)


def test_engine_bench_workloads_answer_every_input() -> None:
    spec = importlib.util.spec_from_file_location("bench_engine", BENCH / "engine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in module.WORKLOADS:
        assert module.per_input_us(name, 20, 5) > 0  # it asserts an output per input
    from eddies import LocalRunner

    for name in ("react-3-tools", "ReActAgent-3-tools"):
        make_agent, make_input = module.WORKLOADS[name]
        assert LocalRunner(make_agent()).run([("s", make_input(0))]) == ["sums: 1, 2, 3"], name
    make_agent, make_input = module.WORKLOADS["reflection-2-drafts"]
    [out] = LocalRunner(make_agent()).run([("s", make_input(0))])
    assert out["status"] == "APPROVED" and out["iterations"] == 2


def test_retrieval_bench_answers_every_question_directly_and_durably(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_retrieval", BENCH / "retrieval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(str(tmp_path), 300)
    questions = module.texts(20, 2)
    for measured in (module.direct(str(tmp_path), questions), module.in_process(str(tmp_path), questions)):
        assert measured["calls_s"] > 0 and measured["p50_ms"] > 0


def _load(name: str) -> Any:
    """bench/NAME.py, loaded as a module of its own."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_providers_bench_serves_its_agents_and_the_plain_loop(monkeypatch: Any) -> None:
    """The slow provider asks for two tools at once, then answers from their results; the
    worker's agents and the plain loop both get every session answered, and it counts them."""
    spec = importlib.util.spec_from_file_location("bench_providers", BENCH / "providers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools = {"tools": [{"type": "function", "function": {"name": n}} for n in ("add", "multiply")]}
    first = module.completion({"messages": [{"role": "user", "content": "go"}], **tools}, 1)
    calls = first["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["add", "multiply"]
    assert first["usage"]["total_tokens"] > 0
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "13"} for c in calls]
    final = module.completion({"messages": [{"role": "user", "content": "go"}, *results], **tools}, 2)
    assert final["choices"][0]["message"]["content"] == "results: 13, 13"

    provider = module.Provider(0.2)
    try:
        monkeypatch.setenv("BENCH_PROVIDER_BASE", provider.base_url)
        from bench.provider_agents import one_call_agent, react_agent
        from eddies import LocalRunner

        assert LocalRunner(react_agent()).run([("s", "add and multiply")]) == ["results: 13, 42"]
        assert LocalRunner(one_call_agent()).run([("s", "hello")]) == ["answer to: hello"]
        row, said = module.run_plain_loop(provider, "react", 6)
        assert (row.answered, row.failed, row.calls) == (6, 0, 12)
        assert row.peak == 6 and said["limit_per_host"] > 0
    finally:
        provider.stop()


def test_provider_limits_bench_counts_windows_and_its_provider_storms() -> None:
    """The limits bench counts the requests of each 10 s window; its provider notes when
    each came, and answers 429 with Retry-After during a storm."""
    import json
    import urllib.error
    import urllib.request

    limits = _load("provider_limits")
    assert limits.windows([100.0, 101.0, 109.9, 110.0, 125.0, 131.0], 100.0, 30) == [3, 1, 1]
    provider = _load("providers").Provider(0.0)
    try:
        ask = {"model": "test", "messages": [{"role": "user", "content": "hi"}]}
        limits._get(provider.base_url, "/chat/completions", ask)
        limits._get(provider.root, "/storm", {"seconds": 5, "retry_after": 2})
        try:
            limits._get(provider.base_url, "/chat/completions", ask)
            raise AssertionError("not refused")
        except urllib.error.HTTPError as err:
            assert err.code == 429 and err.headers["Retry-After"] == "2"
        said = limits._get(provider.root, "/arrivals")
        assert len(said["arrivals"]) == 2 and said["refused"] == 1
        assert json.dumps(said)  # plain data
    finally:
        provider.stop()


def test_streaming_bench_provider_streams_tokens_apart_and_notes_when_each_went(tmp_path: Path) -> None:
    """The streaming bench's provider streams an answer a token at a time, the first one
    the request's text (how the bench finds each answer), and notes each token's send time;
    its percentiles are the usual ones."""
    from eddies.connectors.models.litellm import LiteLLMChatModel
    from eddies.events import ChatMessage

    bench = _load("streaming")
    assert bench.pct([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    provider = bench.Provider(6, 10.0, tmp_path / "sent.jsonl")
    try:
        texts: list[str] = []

        class Deltas:
            def text(self, delta: str) -> None:
                texts.append(delta)

            def tool_call(self, *args: Any) -> None:
                raise AssertionError("no tool calls")

        reply = LiteLLMChatModel(api_base=provider.base_url, api_key="x").chat(
            [ChatMessage(content="tag-1")], model="openai/test", tools=[], deltas=Deltas())
        assert reply.content == "tag-1 t1 t2 t3 t4 t5" == "".join(texts)
        times = provider.sent()["tag-1"]
        assert len(times) == 6 and all(0.008 < b - a < 0.1 for a, b in itertools.pairwise(times))
    finally:
        provider.stop()
