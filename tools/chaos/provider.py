"""The slow provider of a ``+slow`` round: a local OpenAI-compatible server
(``tests/openai_server.py``) in a process of its own, whose every answer takes a random
0.5-3 s (drawn from the round's seed), as real providers' do.

The workers' model calls of the "slow" kind (``chaos.agents``) go to it through litellm's
``acompletion``, so they run as tasks on each executor's event loop: hundreds at once,
which is what the kills, pauses and cuts of the round then hit. Its own process, not a
thread of the campaign: hundreds of held requests would take the campaign's interpreter
from the feeder, the output monitor and the network relay.

Example::

    provider = SlowProvider(rdir / "provider-arrivals.jsonl", (0.5, 3.0), seed=7)
    env = {PROVIDER_ENV: provider.base_url}     # what the workers are given
    provider.stats()                            # {"requests": .., "in_flight": .., "peak": ..}
    provider.stop()
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from .agents import CALLER_HEADER, PROVIDER_ENV
from .fleet import ROOT

__all__ = ["PROVIDER_ENV", "SlowProvider", "read_arrivals"]


class SlowProvider:
    """The server's process, its ``api_base`` and its counts."""

    def __init__(self, arrivals: Path, delay: tuple[float, float], seed: int) -> None:
        self.arrivals = arrivals
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.openai_server", "0", "--delay-range", str(delay[0]),
             str(delay[1]), "--seed", str(seed), "--arrivals", str(arrivals),
             "--caller-header", CALLER_HEADER],
            cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the slow provider did not start: {line!r}")
        #: ``http://127.0.0.1:PORT/v1``: litellm's ``api_base``.
        self.base_url = line
        self.port = int(line.rsplit(":", 1)[1].split("/", 1)[0])

    def stats(self) -> dict[str, int]:
        """Requests received, held now and held at most at once ({} if it does not answer)."""
        root = self.base_url.rsplit("/v1", 1)[0]
        try:
            with urllib.request.urlopen(f"{root}/stats", timeout=5) as answer:
                counts: dict[str, int] = json.loads(answer.read())
                return counts
        except OSError:
            return {}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def read_arrivals(path: Path) -> list[tuple[float, str, int, str]]:
    """(time asked, session, run, caller) of each request the provider received, from the
    input the slow kind sends as its user message (``{"kind": "slow", "ref": "SESSION/N"}``,
    run N + 1); the caller is the name of the worker process that asked ("" if unnamed),
    and the time when it made the call (the provider's arrival time, if it does not say)."""
    rows: list[tuple[float, str, int, str]] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        item: dict[str, Any] = json.loads(line)
        user = next((m for m in item["messages"] if m.get("role") == "user"), None)
        try:
            body = json.loads(user["content"]) if user else {}
        except (TypeError, ValueError):
            body = {}
        ref = str(body.get("ref", ""))
        session, _, n = ref.rpartition("/")
        if body.get("kind") == "slow" and session and n.isdigit():
            caller, _, sent = str(item.get("caller") or "").partition("@")
            rows.append((float(sent or item["t"]), session, int(n) + 1, caller))
    return rows
