"""Layer rules: engine/ and events/ stay pure; `import eddies` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.unit.import_graph import PACKAGES, assert_no_cycles, module_graph

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
            "from eddies.connectors.runtime.settings import load_settings; "
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


#: ``connectors/`` by role, outermost first. A folder imports only folders of the rows
#: below its own (type-only and function-local imports count too); the runners of the first
#: row never import each other, and nothing imports a runner.
CONNECTOR_LAYERS: tuple[tuple[str, ...], ...] = (
    ("kafka", "flink", "local"),   # the runners: the worker, the Flink job, in-process
    ("evaluation", "gateway"),     # cases, scorers and reports of an evaluation; the HTTP door
    ("observability",),            # metrics and live spans of a running worker
    ("inspect",),                  # reading sessions back from the topics and showing them
    ("journal",),                  # the journal topic's records and the fold that reads them
    ("runtime",),                  # the per-record path, settings, topics, the Kafka client
    ("declarative", "execution"),  # agents from YAML and SQL; performing calls
    ("models", "stores", "skills", "streaming", "guardrails"),  # chat and embedding models;
    # vector stores; skills; a call's deltas and progress, and how a reader follows them;
    # built-in hooks
    ("remote",),                   # MCP, A2A, HTTP sub-agents, environment secrets
)


def test_connectors_folders_import_only_the_layers_below_them() -> None:
    rank = {folder: row for row, folders in enumerate(CONNECTOR_LAYERS) for folder in folders}
    folders = {p.name for p in (ROOT / "connectors").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(rank), f"every connectors/ folder has a row: {folders ^ set(rank)}"
    loose = sorted(p.name for p in (ROOT / "connectors").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules belong in a folder by role, not at connectors/: {loose}"
    wrong = []
    for module, imported in module_graph(PACKAGES).items():
        own = module.split(".")
        if own[:2] != ["eddies", "connectors"] or len(own) < 4:
            continue
        for name in imported:
            other = name.split(".")
            if other[:2] == ["eddies", "connectors"] and len(other) > 2 and other[2] != own[2] \
                    and other[2] in rank and rank[other[2]] <= rank[own[2]]:
                wrong.append(f"{module} imports {name} ({own[2]} may not import {other[2]})")
    assert wrong == [], "\n".join(sorted(wrong))


def test_no_import_circle_anywhere_in_the_project() -> None:
    """Every package, the chaos campaign's too, counting type-only and function-local
    imports (see tests/unit/import_graph.py)."""
    assert_no_cycles({**PACKAGES, "chaos": ROOT / "tools" / "chaos"})


#: eddies/cli/'s modules every command module may use; the rest hold one command group each.
CLI_SHARED = {"output", "errors", "options", "settings", "agents", "follow", "listening"}


def test_cli_command_modules_import_only_the_shared_ones() -> None:
    """Nothing is imported back from the package root (which assembles the commands), and
    no command module imports another."""
    wrong = []
    for module, imported in module_graph(PACKAGES).items():
        own = module.split(".")
        if own[:2] != ["eddies", "cli"] or len(own) != 3 or own[2] == "__main__":
            continue
        for name in imported:
            other = name.split(".")
            if other[:2] == ["eddies", "cli"] and (len(other) == 2 or other[2] not in CLI_SHARED):
                wrong.append(f"{module} imports {name}")
    assert wrong == [], "\n".join(sorted(wrong))
