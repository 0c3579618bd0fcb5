"""The README's Python snippets and the docstring examples run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import eddies.events.ids
import eddies.events.partitioner
import eddies.events.values

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def downstream_snippet() -> str:
    """The README's plain confluent-kafka + fastavro client (run by an integration test)."""
    [block] = re.findall(r"```python downstream\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return block


@pytest.mark.parametrize("block", _python_blocks())
def test_readme_python_blocks_run(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    # A printed result in the snippet is documented as a comment right after print().
    for expected in re.findall(r"^# (\[.*\])$", block, flags=re.M):
        assert expected in out


def test_readme_has_snippets() -> None:
    assert _python_blocks()


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
    from eddies.connectors.kafka.settings import load_agent, load_settings

    settings = load_settings(env={k: str(v) for k, v in env.items()})  # every key is known
    load_agent(settings.agent)


def test_compose_file_runs_the_flink_job_on_a_cluster() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    from eddies.connectors.kafka.settings import load_agent, load_settings

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


def test_readme_agent_definitions_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's YAML and SQL agents are valid as written (their tool module stood in)."""
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
    text = (ROOT / "README.md").read_text()
    [yaml_block] = re.findall(r"```yaml\n(agents:.*?)```", text, flags=re.S)
    assert load_yaml_text(yaml_block, "README.md").name == "support"
    [sql_block] = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    assert load_sql_text(sql_block, "README.md", "support").name == "support"
    assert load_sql_text(sql_block, "README.md", "taglines").name == "taglines"
