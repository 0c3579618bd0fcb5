"""The README's tutorial and the guide pages' shell, YAML and SQL examples, run as a newcomer
runs them: from a new, empty folder, with only the virtualenv's bin on PATH (no PYTHONPATH,
no repository in sight), through real ``eddies`` commands against the broker ``eddies
broker`` starts. The commands are read from the pages, so a page that changes changes what
runs here.

One broker and one folder serve the whole module; each app's worker starts once. What a
page leaves to the reader (their module, their cases, the broker's port, a model server
the YAML agent names) is written here, and said so where it is.
"""

from __future__ import annotations

import ast
import importlib.resources
import json
import math
import re
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.kafka.broker import free_port
from tests.integration.docs_terminal import (
    ANSWER_S,
    BIN,
    DOCS,
    README,
    ROOT,
    Terminal,
    fences,
    lines_of,
    option,
    page,
    report,
    spans,
    tutorial,
    uncommented,
    words,
)
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminal]:
    terminal = Terminal(tmp_path_factory.mktemp("newcomer"))
    assert (BIN / "eddies").exists(), f"no eddies script in {BIN}: run with the venv's pytest"
    try:
        yield terminal
    finally:
        terminal.close()


@pytest.fixture(scope="module")
def broker(term: Terminal) -> str:
    """The README's first two lines: ``eddies broker`` prints the address, the second
    terminal exports it (the README's ``PORT`` is the one it printed)."""
    start, export = lines_of(fences(tutorial(), "sh")[0])[:2]
    assert words(start)[:2] == ["eddies", "broker"] and words(export)[0] == "export", (start, export)
    proc = term.start(start, "broker.log")
    address = term.wait_log(proc, r"export EDDIES_BOOTSTRAP_SERVERS=(\S+)").group(1)
    name, _, placeholder = words(export)[1].partition("=")
    assert name == "EDDIES_BOOTSTRAP_SERVERS" and placeholder.split(":")[0] == address.split(":")[0]
    term.run(export.replace(placeholder, address))
    return address


@pytest.fixture(scope="module")
def skills(term: Terminal) -> Path:
    """The reader's skills folder, as the skills guide lays it out (its example skill)."""
    return Path(shutil.copytree(ROOT / "tests" / "skills", term.folder / "skills"))


# --- the README --------------------------------------------------------------------------------

def walk(term: Terminal, lines: list[str], tail_shows: str) -> tuple[dict[str, str], list[str]]:
    """Run the tutorial's lines after the broker's: a background line starts its worker;
    ``tail --no-follow`` runs again until it shows ``tail_shows``. Each command's output
    by its subcommand, and what went wrong (every command runs, so one failure does not
    hide the next)."""
    shown: dict[str, str] = {}
    wrong: list[str] = []
    serving: list[subprocess.Popen[bytes]] = []
    for line in lines:
        ws = words(line)
        if ws[-1] == "&":
            serving.append(term.start(line, f"{ws[1]}-{option(line, '--app')}.log"))
            continue
        if ws[1] == "tail":
            try:
                shown[ws[1]] = term.until(line, tail_shows)
            except AssertionError as err:
                wrong.append(str(err))
            continue
        proc = term.run(line)
        shown[ws[1]] = proc.stdout
        if proc.returncode != 0:
            wrong.append(report(line, proc))
    wrong += [f"a background command stopped (exit {proc.returncode}) while the tutorial ran{term.logs()}"
              for proc in serving if proc.poll() is not None]
    return shown, wrong


def check_walk(shown: dict[str, str], app: str, session: str, answer: str) -> list[str]:
    """What the README says each command shows, for ``session``'s one run answered
    ``answer`` in ``app``."""
    expected = {  # regular expressions
        "send": [re.escape(f"sent to {session}")],
        "tail": [re.escape(f"{session} run 1: {answer}")],
        "sessions": [rf"(?m)^{session}\s+answered\s+1\s"],  # its status
        "replay": [rf"replay of {session}: \d+ events, every id recomputed identically"],
        "trace": [re.escape(f"run 1 {session}: "), re.escape(f"-> {answer}")],  # the session as a tree
        "topics": [rf"\b{app}\.{t}\b" for t in ("input", "events", "requests", "output", "journal", "dlq")],
    }
    return [f"eddies {cmd} does not show {pattern!r}:\n{shown.get(cmd, '(not run)')}"
            for cmd, patterns in expected.items() for pattern in patterns
            if not re.search(pattern, shown.get(cmd, ""))]


@pytest.fixture(scope="module")
def demo(term: Terminal, broker: str) -> tuple[dict[str, str], list[str], str]:
    """The README's "Run it on Kafka" block, as written: what each command printed, what
    failed, and the answer the tail showed."""
    lines = lines_of(fences(tutorial(), "sh")[0])[2:]
    [send] = [line for line in lines if words(line)[1] == "send"]
    numbers = json.loads(words(send)[3])  # the calculator adds them
    answer = json.dumps(f"The result is {sum(numbers.values())}.")
    shown, wrong = walk(term, lines, f"{words(send)[2]} run 1: {answer}")
    return shown, wrong, answer


def test_readme_run_it_on_kafka(demo: tuple[dict[str, str], list[str], str]) -> None:
    shown, wrong, answer = demo
    assert json.loads(answer) == "The result is 5."  # {"a": 2, "b": 3}
    problems = wrong + check_walk(shown, "demo", "alice", answer)
    assert problems == [], "\n\n".join(problems)


def test_readme_with_your_own_agent(term: Terminal, broker: str) -> None:
    """The tutorial again with step 2's agent in my_module.py (``--agent
    my_module:my_agent``, as the README says): checked, served, answered, replayed with the
    same --agent (without it, refused: the recording names another agent), traced."""
    text = tutorial()
    [block] = fences(text, "python")
    assert "`--agent my_module:my_agent`" in text
    [cls] = re.findall(r"^class (\w+)\(Agent\):", block, flags=re.M)
    term.write("my_module.py", f"{block}\nmy_agent = {cls}()\n")
    [(session_input, printed)] = re.findall(r'run\(\[\("\w+", "([^"]+)"\).*\n# (\[.*\])', block)
    answer = json.dumps(ast.literal_eval(printed)[0])  # what step 2 prints for that input

    plan = term.ok("eddies check my_module:my_agent", f"agent {cls} (version 1): valid")
    assert re.search(r"action \w+: on InputEvent", plan), plan

    def own(line: str) -> str:
        ws = words(line)
        if "--agent" in ws:
            ws[ws.index("--agent") + 1] = "my_module:my_agent"
        if "--app" in ws:
            ws[ws.index("--app") + 1] = "pay"
        if ws[1] == "send":  # step 2's first input, a text
            ws[3] = session_input
            ws = [w for w in ws if w != "--json"]
        return shlex.join(ws[:-1]) + " &" if ws[-1] == "&" else shlex.join(ws)

    lines = [own(line) for line in lines_of(fences(text, "sh")[0])[2:]]
    assert "eddies replay --session alice --app pay --agent my_module:my_agent" in lines
    shown, wrong = walk(term, lines, f"alice run 1: {answer}")
    problems = wrong + check_walk(shown, "pay", "alice", answer)
    assert problems == [], "\n\n".join(problems)
    # Without --agent, the default (the demo's calculator) does not check another's session.
    refused = term.run("eddies replay --session alice --app pay")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"recorded by agent {cls!r}" in refused.stderr and "--agent" in refused.stderr


# --- replay, trace, fork and reprocess -----------------------------------------------------

def tree_line(line: str) -> str:
    """A trace line without what differs between two runs: clock times, latency, tokens."""
    return re.sub(r"\d\d:\d\d", "HH:MM", re.sub(r"\s+\[[^\]]*\]$", "", line.rstrip()))


def get(url: str) -> Any:
    deadline = time.monotonic() + ANSWER_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = resp.read().decode()
                return json.loads(body) if "json" in resp.headers.get("content-type", "") else body
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_replay_and_fork_page(term: Terminal, demo: tuple[dict[str, str], list[str], str]) -> None:
    """docs/operations/replay-and-fork.md on the tutorial's app ``demo`` and the planner the
    page starts; ``my_agents:v2`` (the reader's next version) names another model."""
    text = page("operations/replay-and-fork.md")
    [start_planner] = spans(text, "eddies worker --app planner")
    [send_erin] = spans(text, "eddies send erin")
    planner = term.start(start_planner, "worker-planner.log")
    term.ok(send_erin)  # it waits for the planner's topics
    term.write("my_agents.py", '"""The next version: the same calculator, another model named."""\n'
               "from eddies.demo import calculator_agent\n\n\n"
               "def v2():\n    return calculator_agent(model_name=\"openai/gpt-5-mini\")\n")
    events_per_run = int(re.search(r"replay of alice: (\d+) events", demo[0]["replay"]).group(1))  # type: ignore[union-attr]
    [block, ui_block] = fences(text, "sh")
    lines = lines_of(block)
    # The steps the page's lines name, so that alice has them: more prompts, as they come.
    steps = max(int(n) for n in re.findall(r"--(?:from|to|at)-seq (\d+)", block))
    runs = math.ceil(steps / events_per_run)
    [tree] = fences(text, "", indent="  ")
    try:
        for line in lines:
            ws = words(line)
            if ws[1] == "tail":  # follows: started, then alice's next prompts come in
                follow = term.start(line, "tail-events.log")
                time.sleep(2)  # the tail skips records older than its own start
                for n in range(2, runs + 1):
                    term.ok(f"eddies send alice '{{\"a\": {n}, \"b\": 1}}' --json --app demo")
                term.wait_log(follow, rf"^alice:#{runs * events_per_run}\s+run {runs}\s+OutputEvent")
                term.stop(follow)
                printed = (term.folder / "tail-events.log").read_text().splitlines()
                assert printed and all(p.startswith("alice:") for p in printed), printed
            elif ws[1] == "trace":  # the planner's tree, once erin is answered
                out = term.until(line, '└─ output "Packing: Tokyo')
                got = {tree_line(p) for p in out.splitlines()}
                missing = [p for p in tree.splitlines()
                           if p.strip() != "..." and tree_line(p.strip()) not in got]
                assert missing == [], f"the page's tree lines not printed: {missing}\n{out}"
            elif ws[1] == "replay":
                out = term.ok(line, "every id recomputed identically")
                if "--from-seq" in ws:
                    assert re.search(r"^from the snapshot at step \d+", out, flags=re.M), out
            elif ws[1] == "fork":
                term.ok(line, f"forked alice at step {option(line, '--at-seq')} into {option(line, '--to')}")
                term.ok(f"eddies trace --session {option(line, '--to')} --app demo",
                        f"{option(line, '--to')} is a fork of session alice")  # says whose first
            elif ws[1] == "reprocess":
                # The page's offsets are a busy app's; the tutorial's start at 0.
                offsets = ",".join(f"{p.split(':')[0]}:0" for p in option(line, "--from-offset").split(","))
                out = term.ok(line.replace(option(line, "--from-offset"), offsets),
                              "calls answered from the recording")
                assert re.search(r"reprocessed \d+ sessions of demo into demo-v2", out), out
            else:
                raise AssertionError(f"a command this test does not know yet: {line}")
        [ui_line] = lines_of(ui_block)
        port = free_port()  # the page's 8321 may be taken on a shared machine
        ui = term.start(f"{uncommented(ui_line)} --port {port}", "ui.log")
        term.wait_log(ui, rf"http://127\.0\.0\.1:{port}/")
        listed = {s["id"]: s["status"] for s in get(f"http://127.0.0.1:{port}/api/sessions")["sessions"]}
        assert listed.get("alice") == "answered" and listed.get("alice-b") == "answered", listed
        term.stop(ui)
    finally:
        term.stop(planner)


def test_downstream_client_from_a_copy_of_the_schemas(
        term: Terminal, demo: tuple[dict[str, str], list[str], str]) -> None:
    """The downstream page's client against the tutorial's worker, from the new folder: the
    page's load_schema path points at a copy of the schema files ("or point load_schema at
    a copy"), taken from the installed package as a reader without the repository would."""
    text = page("guide/downstream.md")
    [block] = fences(text, 'python title="downstream.py"')
    copy = term.folder / "schemas" / "avro"
    copy.mkdir(parents=True)
    for res in importlib.resources.files("eddies.schemas.avro").iterdir():
        if res.name.endswith(".avsc"):
            (copy / res.name).write_text(res.read_text())
    term.write("downstream.py", block)
    [printed] = re.findall(r"^print\(answer\)\s+# (.*)$", block, flags=re.M)
    out = term.ok("python downstream.py", EDDIES_APP="demo")
    assert out.strip().splitlines()[-1] == printed


# --- timers and approvals ---------------------------------------------------------------------

def test_approvals_on_kafka(term: Terminal, broker: str) -> None:
    """The approvals example's agent served (its block as module shop.py): the tail line
    the page shows, then its approve and reject commands."""
    text = page("guide/timers-and-approvals.md")
    [block] = [b for b in fences(text, "python") if "requires_approval=True" in b]
    term.write("shop.py", block)
    [(session, prompt)] = re.findall(r"runner\.submit\(\"(\w+)\", '([^']+)'\)", block)
    [expected] = ast.literal_eval(re.search(rf'outputs_for\("{session}"\) == (\[.*\])', block).group(1))  # type: ignore[union-attr]
    shown_tail, approve, reject = lines_of(fences(text, "sh")[0])
    app = option(approve, "--app")
    worker = term.start(f"eddies worker --app {app} --agent shop:agent", "worker-shop.log")
    try:
        term.ok(f"eddies send {session} {shlex.quote(prompt)} --app {app}")
        tail = f"eddies tail --app {app} --from-beginning --no-follow"
        out = term.until(tail, f"{session} run 1: APPROVAL NEEDED")
        # The page's line, its deadline aside, is what the tail printed.
        deadline = re.escape(re.search(r"by (\S+ \S+) UTC", shown_tail).group(1))  # type: ignore[union-attr]
        pattern = re.escape(shown_tail).replace(deadline, r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
        assert re.search(pattern, out), f"{shown_tail}\nnot in\n{out}"
        term.ok(approve, "approved")
        term.until(tail, f"{session} run 1: {json.dumps(expected)}")
        # A second session for the page's reject: the command the tail printed for it.
        other = f"{session}x"
        term.ok(f"eddies send {other} {shlex.quote(prompt)} --app {app}")
        out = term.until(tail, f"{other} run 1: APPROVAL NEEDED")
        printed = re.search(rf"(eddies reject {other} \S+ --app {app}) --reason TEXT", out)
        assert printed, out
        command = reject.replace(f"reject {session} approval:{session}:", f"reject {other} approval:{other}:")
        assert command.startswith(printed.group(1) + " --reason "), (command, printed.group(1))
        term.ok(command, "rejected")
        # The model saw the rejection, with the reason.
        term.until(tail, f"{other} run 1: ", "ApprovalRejected", option(reject, "--reason"))
    finally:
        term.stop(worker)


# --- agents in YAML and SQL ---------------------------------------------------------------------

def model_server(body: dict[str, Any]) -> dict[str, Any]:
    """The model the declarative examples' connection points at, standing in for the
    reader's (an OpenAI-compatible server): the support agent asks for Oslo's time and
    answers with it; the tagline writer drafts, its editor approves."""
    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": f"It is {messages[-1]['content']}"}
    if "get_current_time" in tools:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_current_time", "arguments": json.dumps({"timezone": "Europe/Oslo"})}}]}
    if "APPROVED" in system:
        return {"role": "assistant", "content": "APPROVED: short. confidence: 0.9"}
    return {"role": "assistant", "content": "Pack light, see more."}


# The mistakes declarative.md shows an error for (by the name it quotes), made in the page's
# own files: (what is right, the mistake, the page's names in the message -> ours).
MISTAKES = {
    "'ad'": ("tools: [refund, clock]", "tools: [refnd, clock]", {"'ad'": "'refnd'", "'add'": "'refund'"}),
    "'sub'": ("USING TOOLS refund_tool, clock", "USING TOOLS sub, clock", {}),
    "'allowed_tool'": ("'allowed_tools' = 'get_current_time'", "'allowed_tool' = 'get_current_time'", {}),
}


def test_declarative_agents(term: Terminal, broker: str, skills: Path) -> None:
    """docs/guide/declarative.md: its YAML and SQL files checked offline (and their
    mistakes reported as the page shows), then served by workers. The model connection's
    endpoint is the only outside service; a local stand-in answers there."""
    text = page("guide/declarative.md")
    [yaml_file] = fences(text, "yaml")
    sql_file, knowledge = fences(text, "sql")
    endpoint = "http://127.0.0.1:8000/v1"
    assert endpoint in yaml_file and endpoint in sql_file
    server = OpenAIServer(responder=model_server).start()
    try:
        files = {"agents.yaml": yaml_file, "agents.sql": sql_file, "knowledge.sql": knowledge}
        for name, body in files.items():
            term.write(name, body.replace(endpoint, server.base_url))
        # Their function, my_pkg.tools:refund, and their secrets.
        term.write("my_pkg/__init__.py", "")
        term.write("my_pkg/tools.py", 'def refund(order: str, account: str) -> str:\n'
                   '    """Refund an order."""\n    return f"refunded {order} for {account}"\n')
        secrets = {"OPENAI_KEY": "sk-newcomer-0000", "KB_DSN": "postgresql://eddies@127.0.0.1:9/kb"}
        term.env.update(secrets)

        [check_any] = spans(text, "eddies check FILE")
        out = term.ok(check_any.replace("FILE [--agent NAME]", "agents.yaml"),
                      "agent support (version 1): valid")
        assert "tool clock: McpTool" in out and "tool get_current_time: RemoteTool" in out, out
        [check_sql] = spans(text, "eddies check agents.sql")
        out = term.ok(check_sql, "agent support (version 1): valid", "agent taglines (version 1): valid")
        assert "agent writer" not in out and "agent editor" not in out, out  # used by taglines
        out = term.ok(f"{check_sql} --agent support", "agent support (version 1): valid")
        assert "taglines" not in out, out
        # The skills guide: `eddies check` reads the skills and lists the tools they give.
        term.ok("eddies check knowledge.sql", "agent planner (version 1): valid",
                "agent guide (version 1): valid", "tool load_skill: FunctionTool", "tool bash: FunctionTool")

        # Each mistake the page shows is reported so, file:line:column first (exit code 2),
        # when made in the page's own file.
        files = {"agents.yaml": yaml_file, "agents.sql": sql_file}
        shown = re.findall(r"^(agents\.\w+):\d+:\d+: (.*)$", text, flags=re.M)
        assert len(shown) >= 2, shown
        for name, message in shown:
            [(right, wrong, names)] = [m for key, m in MISTAKES.items() if key in message]
            term.write(f"typo/{name}", files[name].replace(right, wrong))
            for theirs, ours in names.items():
                message = message.replace(theirs, ours)
            proc = term.run(f"eddies check typo/{name}")
            assert proc.returncode == 2 and re.fullmatch(rf"typo/{name}:\d+:\d+: {re.escape(message)}",
                                                         proc.stderr.strip()), \
                report(f"eddies check typo/{name}", proc, (message,))

        [yaml_worker] = spans(text, "eddies worker --yaml FILE")
        support = term.start(f"{yaml_worker.replace('FILE', 'agents.yaml')} --app support",
                             "worker-support.log")
        [sql_worker] = spans(text, "--agent FILE.sql#name")
        taglines = term.start(f"eddies worker {sql_worker.replace('FILE.sql#name', 'agents.sql#taglines')} "
                              "--app taglines", "worker-taglines.log")
        try:
            term.ok("eddies send t1 'What time is it in Oslo?' --app support")
            term.ok("eddies send t1 'A tagline for a trip to Oslo' --app taglines")
            term.until("eddies tail --app support --from-beginning --no-follow", "t1 run 1: ", "Europe/Oslo")
            term.until("eddies tail --app taglines --from-beginning --no-follow",
                       't1 run 1: {"status": "APPROVED", "draft": "Pack light, see more."')
        finally:
            term.stop(support)
            term.stop(taglines)
    finally:
        server.stop()


# --- evaluation ----------------------------------------------------------------------------------

# The reader's module travel.agents: today's planner (the demo's travel helper, offline, no
# clock so that its answers repeat) and version 2 with a prompt for brief answers.
TRAVEL_AGENTS = '''from eddies.demo import BRIEFLY, TRAVEL_PROMPT, travel_agent


def planner():
    return travel_agent(clock=False)


def planner_v2():
    return travel_agent(clock=False, prompt=f"{TRAVEL_PROMPT} {BRIEFLY}")
'''
# Their cases: what version 2 should answer.
CASES = [{"id": "oslo", "input": "I fly to Oslo, then Lisbon. What should I pack?",
          "expected": "Oslo: a raincoat; Lisbon: sunglasses."},
         {"id": "tokyo", "input": "Tokyo next week: what should I bring?",
          "expected": "Tokyo: a light jacket."}]
# Their YAML agent for --on-workers: version 2 declared in YAML.
BRIEF_YAML = '''agents:
  - name: travel
    type: react
    model: llm
    prompt: brief
    options: {max_iterations: 5}
    prompts:
      - name: brief
        text: "You help travellers pack. Check the weather first. Answer briefly: only what to pack."
    chat_model_connections:
      - {name: offline, clazz: scripted, responder: "eddies.demo:travel_model"}
    chat_model_setups:
      - {name: llm, connection: offline, tools: [weather]}
    tools:
      - {name: weather, function: "eddies.demo:weather", idempotent: true}
'''


def joined(block: str) -> list[str]:
    """A shell block's commands, a line continued with a backslash joined to the next."""
    return lines_of(block.replace("\\\n", " "))


def rate(out: str, candidate: str, scorer: str) -> str:
    """A candidate's pass rate of a scorer, as `eddies eval` prints it."""
    part = re.search(rf"^{re.escape(candidate)}\b.*?(?=^\S|\Z)", out, flags=re.M | re.S)
    found = part and re.search(rf"^\s+{re.escape(scorer)}\s+([\d.]+%)", part.group(0), flags=re.M)
    assert found, f"no {scorer} rate of {candidate} in\n{out}"
    return found.group(1)


def test_evaluation_page(term: Terminal, broker: str) -> None:
    """docs/guide/evaluation.md: cases from a file, recorded traffic (kept for the web
    view), a config file with its floor, and the evaluation on workers."""
    text = page("guide/evaluation.md")
    on_cases, on_traffic, on_workers = [joined(b) for b in fences(text, "bash")]
    [config] = fences(text, "yaml")
    term.write("travel/__init__.py", "")
    term.write("travel/agents.py", TRAVEL_AGENTS)
    term.write("cases.jsonl", "".join(json.dumps(c) + "\n" for c in CASES))
    term.write("eval.yaml", config)
    term.write("brief.yaml", BRIEF_YAML)
    app = option(on_traffic[0], "--app")
    recorded_from = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    worker = term.start(f"eddies worker --app {app} --agent travel.agents:planner", "worker-travel.log")
    started: list[subprocess.Popen[bytes]] = [worker]
    try:
        for case in CASES:  # last week's traffic, now
            term.ok(f"eddies send {case['id']} {shlex.quote(str(case['input']))} --app {app}")
        term.until(f"eddies tail --app {app} --from-beginning --no-follow",
                   *(f"{c['id']} run 1: " for c in CASES))

        [line] = on_cases
        proc = term.run(line)
        assert proc.returncode == 0, report(line, proc)  # new passes the floor
        assert rate(proc.stdout, "new", "equals") == "100.0%" and rate(proc.stdout, "old", "equals") == "0.0%"
        assert "vs baseline" in proc.stdout

        def traffic(line: str) -> str:  # the page's week is any week's: from a minute ago
            return line.replace(option(line, "--from-time"), recorded_from)

        [line] = on_traffic
        out = term.ok(traffic(line), "recorded (baseline)", f"in {app}.evaluations")
        assert rate(out, "new", "equals") == "100.0%", out  # the same agent answers the same

        proc = term.run("eddies eval eval.yaml")  # the config's planner answers at length
        assert proc.returncode == 1 and "under the floor: new: equals 0 < 0.8" in proc.stdout + proc.stderr, \
            report("eddies eval eval.yaml", proc)

        evaluating, shown_hint, start_worker = on_workers
        evaluation = term.start(traffic(evaluating), "eval-on-workers.log")
        started.append(evaluation)
        hint = term.wait_log(evaluation, r"^cases sent to app .*$").group(0)
        assert hint.startswith(shown_hint.lstrip("# ").removesuffix("...").rstrip()), (hint, shown_hint)
        started.append(term.start(start_worker, "worker-travel-eval-brief.log"))
        assert evaluation.wait(ANSWER_S) == 0, term.logs()
        out = (term.folder / "eval-on-workers.log").read_text()
        assert rate(out, "brief", "equals") == "0.0%" and f"in {app}.evaluations" in out, out

        [ui_line] = spans(text, f"eddies ui --app {app}")
        port = free_port()
        started.append(ui := term.start(f"{ui_line} --port {port}", "ui-travel.log"))
        term.wait_log(ui, rf"http://127\.0\.0\.1:{port}/")
        kept = get(f"http://127.0.0.1:{port}/api/evaluations")
        assert len(kept["evaluations"] if isinstance(kept, dict) else kept) == 2, kept
    finally:
        for each in started:
            term.stop(each)


# --- the pages' Python, from the new folder ----------------------------------------------------

RUNNER = '''"""Each block of blocks.json run as a file of its own would be, in one interpreter."""
import contextlib, io, json, sys, traceback

failed = []
for name, body in json.load(open("blocks.json")):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(body, name, "exec"), {"__name__": "__main__"})
    except BaseException:
        failed.append(f"{name}:\\n{body[:300]}\\n{traceback.format_exc(limit=3)}")
print(json.dumps(failed))
'''


def test_python_examples_from_a_new_folder(term: Terminal, skills: Path) -> None:
    """Every page's ```python block (as tests/unit/test_docs.py runs them in-process) runs
    from the new folder: no path into the repository, no module only the repository has."""
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    blocks = [(p.relative_to(ROOT).as_posix(), b) for p in pages for b in fences(p.read_text(), "python")]
    assert len(blocks) > 20
    term.write("blocks.json", json.dumps(blocks))
    term.write("run_blocks.py", RUNNER)
    out = term.ok("python run_blocks.py")
    failed: list[str] = json.loads(out.strip().splitlines()[-1])
    assert failed == [], "\n\n".join(failed)
