"""The result key's variable among the settings, and the limits derived from max_record_bytes."""

from __future__ import annotations

import pytest

from eddies.connectors.runtime.settings import ConfigError, Settings, load_settings


def test_the_result_key_variable_is_expected_but_a_misspelling_is_not() -> None:
    settings = load_settings(env={"EDDIES_RESULT_KEY": "x" * 40})
    assert settings.result_key_env == "EDDIES_RESULT_KEY"
    with pytest.raises(ConfigError, match="environment variable EDDIES_RESULT_KEYS: unknown setting "
                                          "'result_keys'"):
        load_settings(env={"EDDIES_RESULT_KEYS": "x" * 40})


def test_a_renamed_result_key_variable_is_the_one_expected() -> None:
    env = {"EDDIES_RESULT_KEY_ENV": "EDDIES_MY_KEY", "EDDIES_MY_KEY": "x" * 40}
    assert load_settings(env=env).result_key_env == "EDDIES_MY_KEY"
    # Once renamed, the default variable is no longer the key's: a leftover is named.
    with pytest.raises(ConfigError, match="EDDIES_RESULT_KEY: unknown setting 'result_key'"):
        load_settings(env={**env, "EDDIES_RESULT_KEY": "x" * 40})
    assert load_settings(env={}, overrides={"result_key_env": "EDDIES_MY_KEY"}).result_key_env == (
        "EDDIES_MY_KEY")


def test_result_key_env_names_a_variable_not_a_key() -> None:
    with pytest.raises(ConfigError, match="result_key_env: .* is not an environment variable name"):
        load_settings(env={"EDDIES_RESULT_KEY_ENV": "s3cr3t-k3y/with+symbols="})
    with pytest.raises(ConfigError, match="result_key_env"):
        load_settings(env={}, overrides={"result_key_env": ""})


def test_limits_follow_max_record_bytes() -> None:
    default = Settings()
    assert default.write_limit == default.max_record_bytes + 65_536 == 1_114_112
    assert default.max_memory_bytes == default.max_record_bytes // 2 == 524_288
    small = load_settings(env={"EDDIES_MAX_RECORD_BYTES": "100001"})
    assert (small.write_limit, small.max_memory_bytes) == (165_537, 50_000)


def test_the_doors_tokens_variable_is_named_by_a_setting_and_is_no_setting_itself() -> None:
    assert load_settings(env={"EDDIES_SERVE_TOKENS": "t"}).serve_tokens_env == "EDDIES_SERVE_TOKENS"
    env = {"EDDIES_SERVE_TOKENS_ENV": "EDDIES_DOOR", "EDDIES_DOOR": "t"}
    assert load_settings(env=env).serve_tokens_env == "EDDIES_DOOR"
    with pytest.raises(ConfigError, match="serve_tokens_env: .* is not an environment variable name"):
        load_settings(env={}, overrides={"serve_tokens_env": "tok en"})
