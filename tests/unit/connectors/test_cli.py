"""The command line: errors are clear and exit non-zero; help works without Kafka."""

from __future__ import annotations

import pytest

from eddies.cli import main


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "eddies" in capsys.readouterr().out
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "broker", "worker", "send", "tail", "replay", "topics"):
        assert command in out


def test_configuration_errors_name_the_key(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDIES_PARTITONS", "3")
    assert main(["topics", "describe"]) == 2
    assert "EDDIES_PARTITONS: unknown setting 'partitons'" in capsys.readouterr().err
    monkeypatch.delenv("EDDIES_PARTITONS")
    assert main(["worker", "--agent", "eddies.demo:nothing_here"]) == 2
    assert "has no attribute 'nothing_here'" in capsys.readouterr().err


def test_send_rejects_bad_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", "s1", "{not json", "--json"]) == 2
    assert "not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_http_clients_log_each_request_only_when_debugging(
        level: str, shown: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    monkeypatch.setenv("EDDIES_LOG_LEVEL", level)
    # What basicConfig does in a fresh process (here pytest's handlers keep it from it).
    monkeypatch.setattr(logging.getLogger(), "level", getattr(logging, level))
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore", "LiteLLM")]
    for logger in loggers:
        monkeypatch.setattr(logger, "level", logging.NOTSET)
    assert main(["--version"]) == 0
    # httpx logs "HTTP Request: POST <url>" at INFO for every model, MCP and A2A call;
    # litellm "LiteLLM completion() model= ..." for every model call.
    for logger in loggers:
        assert (logger.getEffectiveLevel() <= logging.INFO) is shown, logger.name
