"""Resources warmed before a worker joins its groups (connectors/execution/warming.py): each
object's warm() once, sub-agents' too; one that fails is logged and skipped."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eddies import Agent, ResourceType
from eddies.connectors.execution.warming import warm
from eddies.connectors.models.litellm import LiteLLMChatModel
from eddies.engine import AgentPlan


class Connection:
    def __init__(self, fails: bool = False) -> None:
        self.warmed = 0
        self.fails = fails

    def warm(self) -> None:
        self.warmed += 1
        if self.fails:
            raise ConnectionError("model server down")

    def chat(self, messages: list[Any], *, model: str, tools: list[Any], **arguments: Any) -> Any:
        raise AssertionError("warming calls no model")


class Helper(Agent):
    """A sub-agent (an agent of another class: agents of one class would be a cycle)."""

    subagent_compatible = True


class Plain:
    def chat(self, messages: list[Any], *, model: str, tools: list[Any], **arguments: Any) -> Any:
        raise AssertionError("warming calls no model")


def test_every_resource_with_warm_is_warmed_once_sub_agents_included(
        caplog: pytest.LogCaptureFixture) -> None:
    shared, own, down = Connection(), Connection(), Connection(fails=True)
    child = Helper()
    child.add_resource("shared", ResourceType.CHAT_MODEL_CONNECTION, shared)
    child.add_resource("own", ResourceType.CHAT_MODEL_CONNECTION, own)
    parent = Agent()
    parent.add_resource("llm", ResourceType.CHAT_MODEL_CONNECTION, shared)
    parent.add_resource("down", ResourceType.CHAT_MODEL_CONNECTION, down)
    parent.add_resource("plain", ResourceType.CHAT_MODEL_CONNECTION, Plain())  # no warm()
    parent.add_resource("helper", ResourceType.AGENT, child)

    with caplog.at_level(logging.WARNING, logger="eddies.worker"):
        names = warm(AgentPlan.compile(parent))

    assert (shared.warmed, own.warmed, down.warmed) == (1, 1, 1)
    assert sorted(names) == ["llm", "own"]  # the failed one is not said to be warm
    assert "'down' could not be warmed" in caplog.text and "model server down" in caplog.text


def test_a_litellm_model_is_imported_by_warm_and_not_before() -> None:
    # In a process of its own: this one may have imported litellm already.
    code = ("import sys\n"
            "from eddies.connectors.models.litellm import LiteLLMChatModel\n"
            "conn = LiteLLMChatModel(api_base='http://127.0.0.1:9/v1', api_key='x')\n"
            "assert 'litellm' not in sys.modules\n"
            "conn.warm()\n"
            "assert 'litellm' in sys.modules\n"
            "import litellm\n"
            "assert litellm.suppress_debug_info\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert hasattr(LiteLLMChatModel, "warm")


#: Run in a process of its own: warm a chat and an embedding model, then make each one's
#: first call to a local OpenAI-compatible server, and print what that call still imported
#: of FIRST_CALL_MODULES, which of FIRST_CALL_MODELS' schemas it built and which programs
#: it ran (the openai client's platform header asks `uname -p` once per process).
FIRST_CALLS = """
import importlib, json, subprocess, sys
from eddies import ChatMessage, MessageRole
from eddies.connectors.models.embeddings import LiteLLMEmbeddingModel
from eddies.connectors.models.litellm import FIRST_CALL_MODELS, FIRST_CALL_MODULES, LiteLLMChatModel
from tests.openai_server import OpenAIServer

server = OpenAIServer().start()
chat = LiteLLMChatModel(api_base=server.base_url, api_key="x")
embed = LiteLLMEmbeddingModel(api_base=server.base_url, api_key="x")
chat.warm()
embed.warm()

def models():
    found = {}
    for path in FIRST_CALL_MODELS:
        module, _, name = path.partition(":")
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None:
            found[path] = bool(cls.__dict__.get("__pydantic_complete__"))
    return found

spawned = []
popen = subprocess.Popen.__init__
def spy(self, args, *rest, **kw):
    spawned.append(str(args))
    popen(self, args, *rest, **kw)
subprocess.Popen.__init__ = spy

before, complete = set(sys.modules), models()
chat.chat([ChatMessage(MessageRole.USER, "hi")], model="openai/m", tools=[])
embed.embed(["hi"], model="openai/e", dimensions=None)
after = models()
print(json.dumps({
    "requests": len(server.requests),
    "imported": sorted(set(FIRST_CALL_MODULES) & (set(sys.modules) - before)),
    "built": sorted(p for p, done in after.items() if done and not complete.get(p)),
    "known_models": len(after),
    "spawned": spawned,
}))
"""


def test_after_warm_a_first_call_imports_and_builds_nothing_warm_names() -> None:
    done = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[3],
                          env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["requests"] == 2  # both calls really went to the server
    assert seen["known_models"] > 0, "none of FIRST_CALL_MODELS exists in this litellm/openai"
    assert seen["imported"] == [], "imported by the first call, not by warm()"
    assert seen["built"] == [], "schemas built by the first call, not by warm()"
    assert seen["spawned"] == [], "programs run by the first call, not by warm()"


_IMPORT = """
import os, time
from eddies.connectors.models.litellm import load_litellm
start = time.monotonic()
litellm = load_litellm()
print(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"), round(time.monotonic() - start, 1))
"""


@pytest.mark.parametrize("remote", [False, True])
def test_litellm_is_imported_offline_unless_the_environment_asks_for_its_prices(remote: bool) -> None:
    """No variable set (a worker on an air-gapped host): litellm's import tries no download
    of its price map (no proxy is reached, nothing warned). Asked for (False), it tries,
    through the unreachable proxy here, and falls back, warning: the user's choice wins."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               **({"LITELLM_LOCAL_MODEL_COST_MAP": "False"} if remote else {}))
    done = subprocess.run([sys.executable, "-c", _IMPORT], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    fetched = "model cost map" in done.stderr  # litellm's warning of a failed fetch
    assert fetched is remote, done.stderr
    assert done.stdout.split()[0] == ("False" if remote else "True")
