"""What ``eddies flink run`` says when its job fails (connectors/flink/runner.py): the cause,
read from the job manager's REST API (served here by a local HTTP server in Flink's shape),
once per failure."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from eddies.connectors.flink.runner import Progress

JAVA = "\n".join([
    "java.io.IOException: Failed to deserialize consumer record due to",
    "\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(Emitter.java:56)",
    "Caused by: org.apache.flink.streaming.runtime.tasks.ExceptionInChainedOperatorException: No",
    "\tat org.apache.flink.streaming.runtime.tasks.ChainingOutput.pushToOperator(ChainingOutput.java:112)",
    "Caused by: pemja.core.PythonException: <class 'KeyError'>: 'model'",
    "\tat /work/connectors/flink/job.py.process_element(job.py:131)",
])
PYTHON = "\n".join([
    "org.apache.flink.runtime.taskmanager.AsynchronousException: Caught exception",
    "\tat org.apache.flink.streaming.runtime.tasks.StreamTask.handleAsyncException(StreamTask.java:1)",
    "Caused by: pemja.core.PythonException: <class 'ValueError'>: bad agent",
    "Traceback (most recent call last):",
    '  File "/work/connectors/flink/job.py", line 99, in open',
    "    agent = load_agent(self.settings.agent)",
    "ValueError: bad agent",
    "\tat pemja.core.PythonInterpreter.invokeMethod(Native Method)",
])


@contextmanager
def serving(answer: Callable[[str], Any]) -> Iterator[str]:
    """A job manager's REST API at the address yielded: ``answer(path)`` is the JSON body."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answer(self.path)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def job_manager() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    entries: list[dict[str, Any]] = []

    def answer(path: str) -> Any:
        assert path == "/jobs/j1/exceptions"
        return {"exceptionHistory": {"entries": entries, "truncated": False}}

    with serving(answer) as address:
        yield address, entries


def test_a_failed_job_says_its_cause_once(job_manager: tuple[str, list[dict[str, Any]]]) -> None:
    address, entries = job_manager
    progress = Progress(address, "j1")
    assert progress.failure() == ""  # nothing failed yet

    entries.append({"exceptionName": "java.io.IOException", "stacktrace": JAVA,
                    "timestamp": 1000, "taskName": "session machine (1/1)"})
    said = progress.failure()
    assert said.splitlines() == [
        "job j1 failed in session machine (1/1): java.io.IOException",
        "java.io.IOException: Failed to deserialize consumer record due to",
        "Caused by: org.apache.flink.streaming.runtime.tasks.ExceptionInChainedOperatorException: No",
        "Caused by: pemja.core.PythonException: <class 'KeyError'>: 'model'",
    ]
    assert progress.failure() == ""  # told already

    # A newer failure is told; a Python traceback inside the Java trace is shown whole.
    entries.append({"exceptionName": "AsynchronousException", "stacktrace": PYTHON, "timestamp": 2000})
    said = progress.failure()
    assert said.startswith("job j1 failed: AsynchronousException\n")
    assert "    agent = load_agent(self.settings.agent)" in said and said.endswith("ValueError: bad agent")
    assert "invokeMethod" not in said


def test_no_job_manager_is_no_failure() -> None:
    assert Progress("127.0.0.1:9", "j1").failure() == ""


@pytest.fixture
def running_job() -> Iterator[tuple[str, dict[str, Any]]]:
    """A job manager's REST answers for job j1: its state, checkpoints and the session
    machine's counters, as ``job`` holds them."""
    job: dict[str, Any] = {"state": "RUNNING", "checkpoints": 0,
                           "counts": {"outputs": 0.0, "inputs": 0.0, "events": 0.0}}

    def answer(path: str) -> Any:
        metrics = "/jobs/j1/vertices/v1/subtasks/metrics"
        if path == "/jobs/j1":
            return {"state": job["state"], "vertices": [{"id": "v1", "name": "session machine"}]}
        if path == "/jobs/j1/checkpoints":
            return {"counts": {"completed": job["checkpoints"]}}
        if path == metrics:
            return [{"id": f"0.eddies.{name}"} for name in job["counts"]]
        assert path.startswith(metrics + "?get="), path
        return [{"id": f"0.eddies.{k}", "sum": v} for k, v in job["counts"].items()]

    with serving(answer) as address:
        yield address, job


def test_progress_is_told_when_it_moves(running_job: tuple[str, dict[str, Any]]) -> None:
    import time

    address, job = running_job
    progress = Progress(address, "j1", quiet_s=0.5)
    line, state = progress.poll()
    assert state == "RUNNING" and line.startswith("job running: 0 answers, 0 inputs, 0 events; 0 ch")
    job["checkpoints"] = 1  # a checkpoint alone is no news
    assert progress.poll() == ("", "RUNNING")
    job["counts"].update(outputs=1.0, inputs=1.0, events=6.0)
    line, _ = progress.poll()
    assert line.startswith("job running: 1 answer (") and ", 1 input (" in line and "6 events (" in line
    assert line.endswith("; 1 checkpoint")
    assert progress.poll()[0] == ""
    time.sleep(0.6)  # quiet for quiet_s: the same line again, so a watcher knows it is alive
    assert progress.poll()[0].startswith("job running: 1 answer")
    job["state"] = "RESTARTING"
    assert progress.poll()[0].startswith("job restarting: 1 answer")
