"""The ``eddies`` command fails fast and in a line or two, with exit code 2 and no traceback:
every command with the broker down, and the commands that need an existing app with the
app missing. Each runs as the real command, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from eddies.connectors.kafka.broker import free_port
from eddies.connectors.kafka.worker import Worker
from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import load_settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from eddies.demo import Calculator, add, calculator_agent
from eddies.engine import ResourceType
from eddies.events import OutputEvent, partition_for
from tests.integration.test_worker import outputs

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 2  # EDDIES_CONNECT_TIMEOUT_MS of every command here
SLACK_S = 5  # the most a command may take beyond it (start-up included)


def broken_agent() -> None:
    """An agent factory with a bug (the CLI loads it by name)."""
    raise RuntimeError("boom in the agent factory")


def eddies(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``eddies ARGS`` with only ``env`` among the EDDIES_ settings (a developer's
    EDDIES_APP or EDDIES_BOOTSTRAP_SERVERS stays out); the result and the seconds it took."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("EDDIES_") or k == "EDDIES_RESULT_KEY"}  # a key, no setting
    base.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
                EDDIES_CONNECT_TIMEOUT_MS=str(TIMEOUT_S * 1000),
                # `flink run` checks its REST port first: 8081 may be some other program's.
                EDDIES_FLINK_REST_PORT=str(free_port()))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "eddies", *args], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - start


def assert_short_error(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit code 2, no traceback, a few lines on stderr that contain ``expected``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


EVERY_COMMAND = [
    ["demo"],
    ["worker"],
    ["send", "alice", "hi"],
    ["tail"],
    ["replay", "--session", "alice"],
    ["topics", "create"],
    ["topics", "describe"],
    ["flink", "run"],
]
NEEDS_AN_APP = [
    ["send", "alice", "hi"],
    ["tail", "--no-follow"],
    ["replay", "--session", "alice"],
    ["topics", "describe"],
]


def test_no_arguments_prints_the_usage() -> None:
    proc, _ = eddies()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Usage:" in proc.stdout and "worker" in proc.stdout  # the help, as with --help


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=" ".join)
def test_a_down_broker_fails_within_the_connect_timeout(args: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    proc, took = eddies(*args, "-b", address)
    assert took < TIMEOUT_S + SLACK_S
    # Named with what to check; librdkafka's connection errors are not printed.
    if args[0] in ("demo", "worker", "flink"):  # a runner waits for a broker that is starting
        assert_short_error(proc, f"waiting for the broker at {address}",
                           f"cannot reach the Kafka broker at {address} within {TIMEOUT_S} s",
                           "Connection refused", "check the address")
    else:  # a command fails at once (test_cli_waits.py)
        assert_short_error(proc, f"cannot reach the Kafka broker at {address}: ",
                           "Connection refused", "(still refused after", "check the address")


def test_the_traceback_and_client_log_are_there_when_debugging() -> None:
    address = f"127.0.0.1:{free_port()}"
    proc, _ = eddies("send", "alice", "hi", "-b", address, EDDIES_LOG_LEVEL="DEBUG")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "BrokerUnreachableError" in proc.stderr
    assert "eddies.kafka.client" in proc.stderr  # librdkafka's lines
    assert proc.stderr.rstrip().endswith("security settings in [kafka]")


@pytest.mark.parametrize("args", NEEDS_AN_APP, ids=" ".join)
def test_an_app_without_topics_is_named_with_what_to_run(bootstrap: str, args: list[str]) -> None:
    app = f"t{uuid.uuid4().hex[:10]}"
    proc, took = eddies(*args, "--app", app, "-b", bootstrap)
    assert took < TIMEOUT_S + SLACK_S
    assert_short_error(proc, f"app {app} has no topics on {bootstrap}",
                       f"eddies topics create --app {app}")


@pytest.mark.parametrize("args", NEEDS_AN_APP, ids=" ".join)
def test_without_a_configured_broker_an_app_is_missing(args: list[str]) -> None:
    # The embedded broker would start empty: refused before it is started.
    proc, took = eddies(*args)
    assert took < SLACK_S
    assert_short_error(proc, "no bootstrap servers configured", "EDDIES_BOOTSTRAP_SERVERS")


def test_a_worker_with_another_partition_count_is_refused(bootstrap: str) -> None:
    app = f"t{uuid.uuid4().hex[:10]}"
    settings = load_settings(env={}, overrides={"bootstrap_servers": bootstrap, "app": app})
    ensure_topics(AdminClient(settings.client_config()), TopicNames(app), 4)
    proc, _ = eddies("worker", "--app", app, "--partitions", "8", "-b", bootstrap)
    assert_short_error(proc, f"topic {app}.input has 4 partitions, expected 8")


def test_an_agent_that_does_not_import_is_a_configuration_error() -> None:
    proc, _ = eddies("replay", "--session", "alice", "--agent", "no_such_module:agent")
    assert_short_error(proc, "configuration error: agent: cannot import module 'no_such_module'")


def test_a_bug_is_one_line_and_exit_code_1() -> None:
    proc, _ = eddies("replay", "--session", "alice",
                     "--agent", "tests.integration.test_cli_errors:broken_agent")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "internal error: RuntimeError: boom in the agent factory",
        "run with EDDIES_LOG_LEVEL=DEBUG for the traceback",
    ]


def twice_agent() -> Calculator:
    """The calculator with its tool added twice (the CLI loads it by name)."""
    return calculator_agent().add_resource("add", ResourceType.TOOL, add)


@pytest.mark.parametrize("command", [["worker"], ["replay", "--session", "alice"]], ids=" ".join)
def test_an_agent_definition_error_is_a_configuration_error_naming_the_agent(
        bootstrap: str, command: list[str]) -> None:
    proc, _ = eddies(*command, "--agent", "tests.integration.test_cli_errors:twice_agent",
                     "--app", f"t{uuid.uuid4().hex[:10]}", "-b", bootstrap)
    assert_short_error(proc, "configuration error: agent 'calculator': resource 'add': defined twice")
    assert "internal error" not in proc.stderr and "EDDIES_LOG_LEVEL" not in proc.stderr


def test_replay_reads_the_partition_count_of_the_topic(bootstrap: str) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"t{uuid.uuid4().hex[:10]}", "partitions": 8})
    assert partition_for("alice", 8) != partition_for("alice", 4)  # the default would miss it
    worker = Worker(settings, calculator_agent()).start()
    try:
        assert worker.wait_assigned(60)
        send_input(settings, "alice", {"a": 2, "b": 3})
        [out] = outputs(settings, 1)
        assert isinstance(out.payload, OutputEvent) and out.payload.output == "The result is 5."
    finally:
        worker.stop()
    proc, _ = eddies("replay", "--session", "alice", "--app", settings.app, "-b", bootstrap)
    assert proc.returncode == 0, proc.stderr
    assert "replay of alice: 12 events, every id recomputed identically" in proc.stdout


def test_flink_run_without_the_jars_or_java_says_what_to_install(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # checked after what a JVM needs
    proc, _ = eddies("flink", "run", "-b", address, EDDIES_FLINK_JARS=str(tmp_path))
    assert_short_error(proc, f"flink-connector-kafka.jar and kafka-clients.jar not found in {tmp_path}",
                       "make install-flink", "flink_jars")
    proc, _ = eddies("flink", "run", "-b", address, PATH=str(tmp_path), JAVA_HOME="")
    assert_short_error(proc, "the Flink runner needs Java 11 or newer")


def test_flink_run_on_a_taken_rest_port_names_the_setting() -> None:
    import socket

    with socket.socket() as taken:  # another job's mini-cluster, or a Flink cluster
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, _ = eddies("flink", "run", "-b", f"127.0.0.1:{free_port()}",
                         EDDIES_FLINK_REST_PORT=str(port))
    assert_short_error(proc, "configuration error: flink_rest_port (EDDIES_FLINK_REST_PORT): "
                       f"port {port} is taken", "--jobmanager")


def test_a_json_logging_worker_writes_only_json_lines_on_the_embedded_broker() -> None:
    """With no broker configured, even the notice that the embedded one started is JSON."""
    import json
    import signal

    base = {k: v for k, v in os.environ.items() if not k.startswith("EDDIES_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "eddies", "worker", "--log-format", "json", "--app", "jsonlogs"],
        cwd=ROOT, env={**base, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"the worker exited: {lines}"
            lines.append(line)
            if "worker for app jsonlogs" in line:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    lines += rest.splitlines()
    records = [json.loads(line) for line in lines if line.strip()]  # each line is JSON
    assert any("started the embedded broker" in r["message"] for r in records), records
    assert any("worker stopped" in r["message"] for r in records), records


def test_a_tool_server_that_cannot_serve_as_declared_is_a_configuration_error(tmp_path: Path) -> None:
    """Found when the worker asks its MCP server (a real one) and its A2A server, before
    it joins: each a fixable error (exit 2) naming the resource, not an internal one."""
    mcp = tmp_path / "clock.yaml"
    mcp.write_text(f"""agents:
  - name: clock
    type: react
    model: llm
    chat_model_connections: [{{name: offline, clazz: scripted}}]
    chat_model_setups: [{{name: llm, connection: offline, tools: [clock]}}]
    tools: [{{name: clock, type: mcp, server: time, allowed_tools: [get_time]}}]
    mcp_servers: [{{name: time, command: {sys.executable}, args: [-m, mcp_server_time]}}]
""")
    proc, _ = eddies("worker", "--yaml", str(mcp), "-b", f"127.0.0.1:{free_port()}")
    assert_short_error(proc, "configuration error: tool 'clock': allowed_tools 'get_time' not offered "
                             "by MCP server 'time'", "it offers: convert_time, get_current_time")
    a2a = tmp_path / "helper.yaml"
    a2a.write_text("""agents:
  - name: helped
    type: react
    model: llm
    chat_model_connections: [{name: offline, clazz: scripted}]
    chat_model_setups: [{name: llm, connection: offline, tools: [helper]}]
    tools: [{name: helper, type: a2a, server: helpers, agent_card_path: /.well-known/agent-card.json}]
    a2a_servers: [{name: helpers, endpoint: "http://127.0.0.1:9", api_key_env: NO_SUCH_KEY_SET}]
""")
    proc, _ = eddies("worker", "--yaml", str(a2a), "-b", f"127.0.0.1:{free_port()}")
    assert_short_error(proc, "configuration error:", "NO_SUCH_KEY_SET is not set")


def _clock_agent(path: Path, command: str, args: str) -> Path:
    path.write_text(f"""agents:
  - name: clock
    type: react
    model: llm
    chat_model_connections: [{{name: offline, clazz: scripted}}]
    chat_model_setups: [{{name: llm, connection: offline, tools: [clock]}}]
    tools: [{{name: clock, type: mcp, server: time, allowed_tools: [get_current_time]}}]
    mcp_servers: [{{name: time, command: "{command}", args: {args}}}]
""")
    return path


def test_an_mcp_server_that_cannot_start_is_a_configuration_error_saying_why(tmp_path: Path) -> None:
    """A stdio server that exits at start (a module it imports is missing, as with a
    `python` that is not the one it was installed in): exit 2, naming the server, its
    command line and the end of its stderr, where its own error is."""
    clock = _clock_agent(tmp_path / "clock.yaml", sys.executable, '[-c, "import no_such_mcp_module"]')
    proc, _ = eddies("worker", "--yaml", str(clock), "-b", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    first, *rest = proc.stderr.splitlines()
    assert first.startswith(f"configuration error: tool 'clock': MCP server 'time': cannot start "
                            f"`{sys.executable} -c 'import no_such_mcp_module'`"), proc.stderr
    # The server's traceback, quoted: the worker's own is not printed.
    assert rest[-1].strip() == "ModuleNotFoundError: No module named 'no_such_mcp_module'", proc.stderr
    assert "internal error" not in proc.stderr and "EDDIES_LOG_LEVEL" not in proc.stderr


def test_an_mcp_server_command_that_does_not_exist_is_named(tmp_path: Path) -> None:
    clock = _clock_agent(tmp_path / "clock.yaml", "no-such-mcp-server", "[--stdio]")
    proc, _ = eddies("worker", "--yaml", str(clock), "-b", f"127.0.0.1:{free_port()}")
    assert_short_error(proc, "configuration error: tool 'clock': MCP server 'time': cannot start "
                             "`no-such-mcp-server --stdio`: command 'no-such-mcp-server' not found "
                             "(it is not on PATH)")


def test_send_right_after_a_worker_starts_waits_for_its_topics(bootstrap: str) -> None:
    # The README's `eddies worker ... & eddies send ...`, with the send a second ahead:
    # it waits (up to the connect timeout) for the topics the worker creates.
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"t{uuid.uuid4().hex[:10]}"})
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDDIES_")},
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
    send = subprocess.Popen(
        [sys.executable, "-m", "eddies", "send", "alice", '{"a": 2, "b": 3}', "--json",
         "--app", settings.app, "-b", bootstrap], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    assert send.poll() is None, send.communicate()  # still waiting, not failed
    worker = Worker(settings, calculator_agent()).start()
    try:
        out, err = send.communicate(timeout=60)
        assert send.returncode == 0, err
        assert err.startswith(f"waiting for topic {settings.app}.input... "), err  # said, not silent
        # One line on a pipe (rich's 80 columns), where a script or grep reads it.
        [line] = out.splitlines()
        assert line.startswith("sent to alice (partition ") and line.endswith("Java client does)")
        [answer] = outputs(settings, 1)
        assert isinstance(answer.payload, OutputEvent) and answer.payload.output == "The result is 5."
    finally:
        worker.stop()
        if send.poll() is None:
            send.kill()
