"""Brokers for integration tests: the embedded Tansu broker always; real Apache Kafka
through testcontainers where a Docker daemon answers (skipped with the reason otherwise).
One broker per test session; each test uses its own application id."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from eddies.connectors.kafka.broker import EmbeddedBroker
from eddies.connectors.runtime.settings import Settings, load_settings
from tests.postgres import postgres_dsn  # noqa: F401  (a fixture)


def _docker_reason() -> str | None:
    try:
        import docker  # type: ignore[import-untyped]
    except ImportError:
        return "the docker client library is not installed"
    try:
        docker.from_env().ping()
    except Exception as err:
        return f"no Docker daemon answers ({type(err).__name__}); real-Kafka tests need one"
    return None


@pytest.fixture(scope="session", params=["tansu", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "tansu":
        with EmbeddedBroker() as broker:
            yield broker.bootstrap
        return
    reason = _docker_reason()
    if reason:
        pytest.skip(reason)
    from testcontainers.kafka import KafkaContainer  # type: ignore[import-untyped]

    # Off the embedded broker a worker needs the key that signs call results (and its
    # subprocesses inherit it).
    os.environ.setdefault("EDDIES_RESULT_KEY", "integration-tests-" + "k" * 32)

    with KafkaContainer("apache/kafka:3.9.1").with_kraft() as kafka:
        yield kafka.get_bootstrap_server()


@pytest.fixture
def settings(bootstrap: str) -> Settings:
    return load_settings(env={}, overrides={
        "bootstrap_servers": bootstrap,
        "app": f"t{uuid.uuid4().hex[:10]}",
        "partitions": 4,
    })
