"""Tool servers (MCP, A2A) for integration tests: a server module of tests/ in a
subprocess on a free port of 127.0.0.1, and a model that calls one of its tools."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(module: str, kind: str, *args: str, port: int | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``python -m MODULE KIND PORT ARGS...`` on ``port`` (a free one), once it accepts
    connections; the process and its port."""
    port = port or free_port()
    proc = subprocess.Popen([sys.executable, "-m", module, kind, str(port), *args], cwd=ROOT,
                            env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{module} {kind} exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{module} {kind} did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(10)


def calls_then_answers(tool: str, arguments: dict[str, Any]) -> Any:
    """A model (an OpenAIServer responder) that calls ``tool`` once, then answers with
    what it returned (a user message of the tool's media may follow the tool's)."""
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        since = body["messages"][len(body["messages"]) - 2:]
        results = [m for m in since if m["role"] == "tool"]
        if results:
            return {"role": "assistant", "content": f"Got: {results[-1]['content']}"}
        n = sum(1 for m in body["messages"] if m["role"] == "user")
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{n}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(arguments)}}]}
    return reply
