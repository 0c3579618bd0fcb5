"""The README's downstream program (confluent-kafka + fastavro only) gets its answer."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.settings import Settings
from eddies.demo import calculator_agent
from tests.unit.test_docs import downstream_snippet

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_snippet_imports_nothing_from_eddies() -> None:
    tree = ast.parse(downstream_snippet())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.startswith("eddies") for m in modules), modules


def test_downstream_program_sends_a_prompt_and_reads_the_answer(settings: Settings, tmp_path: Path) -> None:
    script = tmp_path / "downstream.py"
    script.write_text(downstream_snippet())
    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        env = dict(os.environ, EDDIES_BOOTSTRAP_SERVERS=settings.bootstrap_servers,
                   EDDIES_APP=settings.app)
        out = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
    finally:
        worker.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "The result is 42."
