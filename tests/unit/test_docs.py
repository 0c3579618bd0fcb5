"""The docs' Python snippets (README.md and every page under docs/) and the docstring
examples run as written; the README stays short, every page is in the site's nav, and the
site (mkdocs.yml) builds without a warning."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import eddies.events.ids
import eddies.events.partitioner
import eddies.events.values

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 260


def _doc_files() -> list[Path]:
    """README.md, then every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _fences(pattern: str) -> list[tuple[str, str]]:
    """(file, body) of every fence whose opening line matches ``pattern``, in every doc file."""
    return [(path.relative_to(ROOT).as_posix(), body) for path in _doc_files()
            for body in re.findall(pattern + r"\n(.*?)```", path.read_text(), flags=re.S)]


def _python_blocks() -> list[tuple[str, str]]:
    """Fences opened with exactly ```python run; one with more on its line (the downstream
    client's ```python title="downstream.py"`) does not."""
    return _fences(r"```python")


def _block_ids() -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for name, _ in _python_blocks():
        seen[name] = seen.get(name, 0) + 1
        ids.append(f"{name}:{seen[name]}")
    return ids


def downstream_snippet() -> str:
    """The docs' plain confluent-kafka + fastavro client (docs/guide/downstream.md), run
    against a worker by an integration test."""
    [(_, block)] = _fences(r'```python title="downstream.py"')
    return block


@pytest.mark.parametrize(("name", "block"), _python_blocks(), ids=_block_ids())
def test_doc_python_blocks_run(name: str, block: str, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # From a folder of the reader's, not the repository's root: a path into the repository
    # would work here and fail for them. The skills guide's folder is theirs to have.
    import shutil

    shutil.copytree(ROOT / "tests" / "skills", tmp_path / "skills")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, name, "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    # A printed result in the snippet is documented as a comment right after print().
    for expected in re.findall(r"^# (\[.*\])$", block, flags=re.M):
        assert expected in out


def test_readme_and_docs_have_snippets() -> None:
    files = {name for name, _ in _python_blocks()}
    assert "README.md" in files
    assert any(name.startswith("docs/") for name in files)


@pytest.mark.parametrize("module", [eddies.events.values, eddies.events.partitioner, eddies.events.ids])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0


def test_compose_file_runs_kafka_and_a_worker() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft
    env = services["worker"]["environment"]
    assert env["EDDIES_BOOTSTRAP_SERVERS"] == "kafka:9092"
    from eddies.connectors.runtime.settings import load_agent, load_settings

    settings = load_settings(env={k: str(v) for k, v in env.items()})  # every key is known
    load_agent(settings.agent)


def test_compose_file_runs_the_flink_job_on_a_cluster() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    from eddies.connectors.runtime.settings import load_agent, load_settings

    # The cluster runs PyFlink's own Flink (same version as the job), whose scripts exist.
    pyflink = pytest.importorskip("pyflink", reason="eddies[flink] is not installed")
    scripts = Path(pyflink.__file__).parent / "bin"
    for name, script in (("jobmanager", "jobmanager.sh"), ("taskmanager", "taskmanager.sh")):
        assert script in " ".join(services[name]["entrypoint"]) and (scripts / script).is_file()
        assert "flink-checkpoints:/checkpoints" in services[name]["volumes"]
    job = services["flink-job"]
    command = job["command"]
    assert command[:2] == ["flink", "run"]
    assert command[command.index("--jobmanager") + 1] == "jobmanager:8081"
    assert command[command.index("--checkpoint-dir") + 1] == "/checkpoints"
    assert "flink-checkpoints:/checkpoints" in job["volumes"]
    executor = services["flink-executor"]
    assert executor["command"] == ["worker", "--role", "executor"]
    for env in (job["environment"], executor["environment"]):
        settings = load_settings(env={k: str(v) for k, v in env.items()})  # every key is known
        load_agent(settings.agent)
        assert settings.app == "flinkdemo"
    # Task managers check call results with the key the executor signs them with.
    key = executor["environment"]["EDDIES_RESULT_KEY"]
    assert services["taskmanager"]["environment"]["EDDIES_RESULT_KEY"] == key


def test_doc_agent_definitions_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The docs' YAML and SQL agents are valid as written (their tool module, secrets and
    skills folder stood in)."""
    import sys
    import types

    from eddies.connectors.declarative.sql_agents import load_sql_text
    from eddies.connectors.declarative.yaml_agents import load_yaml_text

    def refund(order: str, account: str) -> str:
        return f"refunded {order} for {account}"

    pkg, tools = types.ModuleType("my_pkg"), types.ModuleType("my_pkg.tools")
    tools.refund = refund  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_pkg", pkg)
    monkeypatch.setitem(sys.modules, "my_pkg.tools", tools)
    monkeypatch.setenv("OPENAI_KEY", "sk-readme-0000")
    [(yaml_file, yaml_block)] = _fences(r"```yaml(?=\nagents:)")
    assert load_yaml_text(yaml_block, yaml_file).name == "support"
    [(sql_file, sql_block), (knowing_file, knowing)] = _fences(r"```sql")
    assert load_sql_text(sql_block, sql_file, "support").name == "support"
    assert load_sql_text(sql_block, sql_file, "taglines").name == "taglines"
    import shutil

    shutil.copytree(ROOT / "tests" / "skills", tmp_path / "skills")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KB_DSN", "postgresql://eddies@127.0.0.1:9/kb")  # connects on first use
    assert load_sql_text(knowing, knowing_file, "planner").name == "planner"
    assert load_sql_text(knowing, knowing_file, "guide").name == "guide"


def test_readme_stays_short() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the rest into docs/"


def test_readme_links_resolve() -> None:
    """Relative links of the README (into docs/) name files that exist, so they work on GitHub."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        assert not link.startswith("/"), f"{link}: not relative"
        assert (ROOT / link.split("#")[0]).is_file(), f"README.md links to {link}, which does not exist"


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    return []


def test_every_docs_page_is_in_the_nav() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(set(nav)) == pages
    assert len(nav) == len(set(nav)), "a page is listed twice"


def test_docs_site_builds_without_warnings(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs-material is not installed (pip install -e '.[dev]')")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", NO_COLOR="1")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    warnings = [line for line in log.splitlines() if re.match(r"\s*WARNING\b", line)]
    assert out.returncode == 0 and not warnings, "\n".join(warnings) or log[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
