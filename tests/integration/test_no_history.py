"""``eddies trace`` of a session with no history says why there may be none: its input
waiting in APP.input with no worker up, or no input for it at all."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from eddies.connectors.runtime.client import send_input
from eddies.connectors.runtime.settings import Settings, load_settings
from eddies.connectors.runtime.topics import TopicNames, ensure_topics
from tests.integration.workers import ROOT

pytestmark = pytest.mark.integration


def _trace(settings: Settings, session: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eddies", "trace", "--session", session, "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))


def test_an_input_no_worker_took_is_named_and_so_is_the_missing_worker(bootstrap: str) -> None:
    settings = load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap, "app": f"w{uuid.uuid4().hex[:10]}", "partitions": 2})
    ensure_topics(AdminClient(settings.client_config()), TopicNames(settings.app), settings.partitions)
    send_input(settings, "bob", "hello")
    send_input(settings, "bob", "again")
    done = _trace(settings, "bob")
    assert done.returncode == 1
    assert "no history for session 'bob'" in done.stderr
    assert f"2 inputs for it waiting in {settings.app}.input: no worker of the app is up" \
        in " ".join(done.stderr.split())
    nobody = _trace(settings, "nobody")
    assert nobody.returncode == 1
    assert f"no input for it in {settings.app}.input either" in " ".join(nobody.stderr.split())
