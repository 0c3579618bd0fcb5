"""Layer rules: engine/ and events/ stay pure; `import eddies` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "confluent_kafka", "kafka", "aiokafka", "requests", "httpx", "aiohttp", "urllib", "http",
    "socket", "threading", "asyncio", "concurrent", "multiprocessing", "subprocess", "litellm",
    "mcp", "a2a", "pyflink", "eddies.connectors",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_engine_and_events_import_no_io_modules() -> None:
    for layer in ("engine", "events"):
        for path in (ROOT / layer).rglob("*.py"):
            for name in _imports(path):
                top = name.split(".")[0]
                assert top not in FORBIDDEN and not name.startswith("eddies.connectors"), (
                    f"{path.relative_to(ROOT)} imports {name}")


def test_events_does_not_import_the_engine() -> None:
    for path in (ROOT / "events").rglob("*.py"):
        assert not any(n.startswith("eddies.engine") for n in _imports(path)), path


def test_import_eddies_is_light() -> None:
    code = ("import sys, eddies, eddies.engine, eddies.events; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'asyncio','threading','confluent_kafka','litellm','pyflink','mcp','a2a','socket',"
            "'eddies.connectors'} or m.startswith('eddies.connectors')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_every_package_directory_is_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    listed = set(config["packages"])
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            package = ".".join([name, *rel.parts]) if rel.parts else name
            assert package in listed, f"{package} ({init.parent}) missing from pyproject packages"


def test_a_worker_imports_no_model_library_before_it_joins() -> None:
    """A (re)started worker joins its groups fast: an agent on litellm is built and compiled
    into a worker without importing litellm (it takes seconds; first use imports it)."""
    code = ("import os, sys; os.environ['TEST_OPENAI_BASE'] = 'http://127.0.0.1:9/v1'; "
            "from eddies.connectors.kafka.settings import load_settings; "
            "from eddies.connectors.kafka.worker import Worker; "
            "from tests.integration.agents import http_calculator; "
            "Worker(load_settings(env={}, overrides={'bootstrap_servers': '127.0.0.1:9'}), "
            "http_calculator()); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'openai', 'tiktoken'}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"


def _runtime_relative_imports(path: Path) -> set[str]:
    """Modules of its own package that ``path`` imports when it runs (not under
    ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    return {node.module or "" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in typing_only}


def test_the_built_in_actions_use_only_the_public_context() -> None:
    """The chat and tool loop is written as a user could write it: no private attribute
    of the context, and no import of the machine, the plan or the context (so no circle)."""
    chat = ROOT / "engine" / "chat.py"
    private = [node.attr for node in ast.walk(ast.parse(chat.read_text()))
               if isinstance(node, ast.Attribute) and node.attr.startswith("_")
               and isinstance(node.value, ast.Name) and node.value.id == "ctx"]
    assert private == []
    assert not _runtime_relative_imports(chat) & {"context", "machine", "plan", "calls", "handles"}
    assert "chat" not in _runtime_relative_imports(ROOT / "engine" / "context.py")
