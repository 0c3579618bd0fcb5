"""Worker settings: file, environment, flags; every error names the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eddies.connectors.runtime.settings import ConfigError, load_agent, load_settings


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "eddies.toml"
    cfg.write_text('[eddies]\napp = "from-file"\npartitions = 12\n\n'
                   '[kafka]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanisms" = "PLAIN"\n')
    s = load_settings(cfg, env={"EDDIES_PARTITIONS": "6", "EDDIES_KAFKA_SASL_USERNAME": "key"},
                      overrides={"app": "from-flag", "role": None})
    assert (s.app, s.partitions, s.role) == ("from-flag", 6, "all")
    conf = s.client_config(**{"group.id": "g"})
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.username"] == "key"
    assert conf["group.id"] == "g"


@pytest.mark.parametrize(("text", "message"), [
    ('[eddies]\nparttions = 3\n', r"unknown key eddies.parttions \(did you mean eddies.partitions\?\)$"),
    ('[eddies]\ncolour = 3\n', r"unknown key eddies.colour$"),  # nothing near: no guess
    ('[kafkaa]\nx = 1\n', r"unknown section \[kafkaa\]"),
    ('[eddies]\npartitions = "many"\n', "partitions: 'many' is not a valid int"),
    ('[eddies]\npartitions = 0\n', "partitions: must be positive"),
    ('[eddies]\nrole = "boss"\n', "role: 'boss' is not one of"),
    ('[eddies]\nagent = "no_colon"\n', "agent: 'no_colon' is not 'module:attribute'"),
    ('[eddies\n', "config file"),
])
def test_bad_file_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, env={})


def test_bad_environment_and_flags_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"EDDIES_PARTITION: unknown setting 'partition' "
                                          r"\(did you mean EDDIES_PARTITIONS\?\)$"):
        load_settings(env={"EDDIES_PARTITION": "3"})
    with pytest.raises(ConfigError, match=r"unknown setting 'bootstrap_server' \(did you mean "
                                          r"'bootstrap_servers'\?\)$"):
        load_settings(env={}, overrides={"bootstrap_server": "x"})
    with pytest.raises(ConfigError, match="exactly_once: 'perhaps' is not a valid bool"):
        load_settings(env={"EDDIES_EXACTLY_ONCE": "perhaps"})
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_settings(env={}, overrides={"colour": "red"})
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml", env={})


def test_missing_or_wrong_agent_is_named() -> None:
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module'"):
        load_agent("no_such_module:agent")
    with pytest.raises(ConfigError, match="has no attribute 'nope'"):
        load_agent("eddies.demo:nope")
    with pytest.raises(ConfigError, match="is n(ot|either) an Agent"):
        load_agent("eddies.demo:add")
    assert load_agent("eddies.demo:calculator_agent").name == "calculator"
    assert load_agent("eddies.demo:Calculator").name == "Calculator"


def test_membership_and_wait_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="static_membership: 'maybe'"):
        load_settings(env={}, overrides={"static_membership": "maybe"})
    with pytest.raises(ConfigError, match="static_membership: true needs instance_id"):
        load_settings(env={}, overrides={"static_membership": "true"})
    with pytest.raises(ConfigError, match="outcome_wait_ms: must be positive"):
        load_settings(env={}, overrides={"outcome_wait_ms": 0})
    anonymous = load_settings(env={}, overrides={})
    assert anonymous.instance_id == "" and anonymous.slot.endswith(f"-{os.getpid()}")
    assert load_settings(env={"EDDIES_INSTANCE_ID": "w7"}).slot == "w7"
