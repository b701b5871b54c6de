"""Config: defaults, ${VAR}, and refusals that name the key path and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import (
    Config,
    ConfigError,
    load_config,
    missing_llm_key_message,
    parse_config,
    resolve_api_key,
)


def refusal(raw: dict, env: dict | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, env or {})
    return str(caught.value)


def test_defaults_need_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config()
    assert config.source is None
    assert config.compression.threshold == 0.5
    assert config.compression.hygiene_hard_message_limit == 5000
    assert config.console_enabled
    assert config.database_path == tmp_path / ".nightowl" / "state.db"


def test_the_example_config_is_valid_and_matches_the_defaults() -> None:
    example = Path(__file__).parents[2] / "config.yaml.example"
    env = {"OPENAI_API_KEY": "sk-test", "TELEGRAM_BOT_TOKEN": "1:x", "DISCORD_BOT_TOKEN": "d"}
    config = load_config(example, environ=env)
    defaults = parse_config({}, env)
    assert config.compression == defaults.compression
    assert config.model.name == defaults.model.name
    assert config.platforms.telegram.enabled is False


def test_wrong_type_names_the_key_path_and_reason() -> None:
    message = refusal({"compression": {"threshold": "high"}})
    assert message == 'compression.threshold: expected a number between 0 and 1, got "high"'


def test_out_of_range_number() -> None:
    assert refusal({"compression": {"threshold": 1.5}}) == (
        "compression.threshold: expected a number between 0 and 1, got 1.5"
    )
    assert "expected a whole number" in refusal({"compression": {"protect_last_n": 2.5}})


def test_unknown_key_is_refused_with_a_suggestion() -> None:
    assert refusal({"compresion": {}}) == "compresion: unknown key (did you mean 'compression'?)"
    assert refusal({"model": {"nmae": "x"}}).startswith("model.nmae: unknown key")


def test_nested_and_list_paths() -> None:
    assert refusal({"platforms": {"telegram": {"enabled": "yes"}}}) == (
        'platforms.telegram.enabled: expected true or false, got "yes"'
    )
    assert refusal({"hooks": [{"events": ["x"], "handler": "no_colon"}]}).startswith("hooks:")
    assert refusal({"hooks": [{"handler": "m:f"}]}) == "hooks[0].events: required"
    assert "model_thresholds.glm" in refusal({"compression": {"model_thresholds": {"glm": "x"}}})


def test_choices_are_listed() -> None:
    assert refusal({"compression": {"tail_mode": "fat"}}) == (
        'compression.tail_mode: expected one of lean, legacy, got "fat"'
    )


def test_variables_come_from_the_environment() -> None:
    config = parse_config(
        {"model": {"api_key": "${MY_KEY}", "name": "m-${SUFFIX}"}}, {"MY_KEY": "k1", "SUFFIX": "x"}
    )
    assert config.model.api_key == "k1"
    assert config.model.name == "m-x"


def test_a_missing_variable_for_an_enabled_platform_is_a_clear_error() -> None:
    message = refusal(
        {"platforms": {"telegram": {"enabled": True, "token": "${TELEGRAM_BOT_TOKEN}"}}}
    )
    assert message == "platforms.telegram.token: environment variable TELEGRAM_BOT_TOKEN is not set"


def test_a_missing_variable_for_a_disabled_platform_is_fine() -> None:
    config = parse_config({"platforms": {"telegram": {"token": "${TELEGRAM_BOT_TOKEN}"}}}, {})
    assert not config.platforms.telegram.enabled


def test_dotenv_beside_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model:\n  api_key: ${SECRET_KEY}\ndata_dir: data\n")
    (tmp_path / ".env").write_text("# comment\nexport SECRET_KEY='from-dotenv'\n")
    config = load_config(tmp_path / "config.yaml", environ={})
    assert config.model.api_key == "from-dotenv"
    assert config.data_dir == tmp_path / "data"  # relative to the config file
    # The real environment wins over .env
    assert (
        load_config(tmp_path / "config.yaml", environ={"SECRET_KEY": "env"}).model.api_key == "env"
    )


def test_bad_yaml_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "config.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_ids_written_as_numbers_become_text() -> None:
    config = parse_config({"platforms": {"telegram": {"allowed_users": [12345, "67"]}}}, {})
    assert config.platforms.telegram.allowed_users == ("12345", "67")


def test_config_is_frozen() -> None:
    config = parse_config({}, {})
    with pytest.raises(AttributeError):
        config.model = None  # type: ignore[misc]
    assert isinstance(config, Config)


def test_llm_key_resolution_and_the_missing_key_sentence() -> None:
    assert resolve_api_key("openai", None, None, {}) is None
    assert resolve_api_key("openai", None, None, {"OPENAI_API_KEY": "sk-1"}) == "sk-1"
    assert resolve_api_key("openai", None, "http://127.0.0.1:11434/v1", {}) == "not-needed"
    assert resolve_api_key("anthropic", "configured", None, {}) == "configured"
    sentence = missing_llm_key_message(parse_config({"model": {"provider": "anthropic"}}, {}))
    assert "ANTHROPIC_API_KEY" in sentence and sentence.endswith(".") and ". " not in sentence


def test_time_zone_must_be_a_real_one() -> None:
    assert (
        parse_config({"agent": {"timezone": "Europe/Berlin"}}, {}).agent.timezone == "Europe/Berlin"
    )
    assert refusal({"agent": {"timezone": "Mars/Olympus"}}) == (
        'agent.timezone: expected an IANA time zone like "Europe/Berlin", got "Mars/Olympus"'
    )
