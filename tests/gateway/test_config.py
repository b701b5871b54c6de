"""Config: defaults, ${VAR}, and refusals that name the key path and the reason."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from adapters.discord_adapter.settings import DiscordSettings
from adapters.telegram.settings import TelegramSettings
from gateway.config.media import transcription_route
from gateway.config.models import model_choices
from gateway.config.platforms import DiscordConfig, TelegramConfig
from gateway.config.schema import (
    Config,
    ConfigError,
    load_config,
    main_model_route,
    missing_llm_key_message,
    parse_config,
    resolve_api_key,
    summary_model_route,
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
    # Every value in the example is the default, except what an example must show:
    # tokens read from the environment, an MCP server left disabled, a home-relative path.
    assert differences(config, defaults) == {
        "data_dir",
        "platforms.telegram.token",
        "platforms.discord.token",
        "tools.mcp_servers",
        "source",
    }
    assert config.platforms.telegram.enabled is False
    assert config.data_dir == defaults.data_dir.expanduser()


def differences(a: object, b: object, path: str = "") -> set[str]:
    """The dotted paths where two configs differ."""
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return set().union(
            *(
                differences(getattr(a, f.name), getattr(b, f.name), f"{path}{f.name}.")
                for f in dataclasses.fields(a)
            )
        )
    return set() if a == b else {path.rstrip(".")}


@pytest.mark.parametrize(
    ("config_class", "settings_class"),
    [(TelegramConfig, TelegramSettings), (DiscordConfig, DiscordSettings)],
)
def test_a_platform_setting_has_one_default_in_config_and_adapter(
    config_class: type, settings_class: type
) -> None:
    """A key the gateway passes on to its adapter defaults to the same value in both, so a
    test or a tool that builds the adapter alone sees what users get (300 s vs 120 s drifted
    once)."""

    def defaults(cls: type) -> dict[str, object]:
        return {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }

    ours, theirs = defaults(config_class), defaults(settings_class)
    shared = set(ours) & set(theirs)
    assert "require_mention" in shared
    assert {k: ours[k] for k in shared} == {k: theirs[k] for k in shared}


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
    assert refusal({"hooks": [{"events": ["x"], "handler": "no_colon"}]}).startswith(
        "hooks[0].handler:"
    )
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
    assert message == "platforms.telegram.token: ${TELEGRAM_BOT_TOKEN} is not set"


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


def test_a_null_key_finds_the_providers_variable_in_dotenv(tmp_path: Path) -> None:
    """The hand-made setup (docs/operations.md#by-hand): config.yaml.example's
    ``api_key: null`` and OPENAI_API_KEY in the .env beside it. A custom endpoint still
    gets no key from it."""
    (tmp_path / "config.yaml").write_text(
        "model:\n  api_key: null\n"
        "models:\n  claude: {name: claude-x, provider: anthropic}\n"
        "  local: {name: qwen, base_url: 'http://127.0.0.1:8080/v1'}\n"
    )
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\nANTHROPIC_API_KEY=sk-ant\n")
    config = load_config(tmp_path / "config.yaml", environ={})
    assert resolve_api_key("openai", config.model.api_key, None, {}) == "sk-from-dotenv"
    assert config.models["claude"].api_key == "sk-ant"
    assert config.models["local"].api_key is None  # a local server is sent no key
    # The real environment wins over .env, as for ${VAR} (it is read when the key is used).
    env = {"OPENAI_API_KEY": "sk-env"}
    config = load_config(tmp_path / "config.yaml", environ=env)
    assert resolve_api_key("openai", config.model.api_key, None, env) == "sk-env"
    (tmp_path / "config.yaml").write_text("model:\n  base_url: http://127.0.0.1:9/v1\n")
    assert load_config(tmp_path / "config.yaml", environ={}).model.api_key is None


@pytest.mark.parametrize(
    "model",
    [
        # A proxy with its own key: the summary model inherits that key, not OpenAI's.
        {"base_url": "https://openrouter.ai/api/v1", "api_key": "${OPENROUTER_API_KEY}"},
        # A local server: neither it nor a summary model on it is sent OpenAI's key.
        {"base_url": "http://127.0.0.1:11434/v1"},
    ],
)
def test_a_dotenv_key_never_goes_to_a_custom_endpoint(tmp_path: Path, model: dict) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "model": {"name": "m"} | model,
                "auxiliary": {"compression": {"model": "cheap-model"}},
                "models": {"other": {"name": "o"}},
                "media": {"transcription": {"enabled": True}},
            }
        )
    )
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-openai\nOPENROUTER_API_KEY=sk-or\n")
    config = load_config(config_file, environ={})
    routes = [main_model_route(config), summary_model_route(config)]
    routes += [choice.route for choice in model_choices(config.model, config.models).values()]
    routes.append(transcription_route(config.media.transcription, routes[0]))
    for route in routes:
        assert route is not None and route.base_url == model["base_url"]
        assert route.api_key in ("sk-or" if "openrouter" in model["base_url"] else None,)


def test_transcription_beside_an_anthropic_model_finds_the_dotenv_openai_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text(
        "model: {provider: anthropic, name: claude-x}\n"
        "media: {transcription: {enabled: true}}\n"  # OpenAI's own API: no base_url
    )
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-openai\nANTHROPIC_API_KEY=sk-ant\n")
    config = load_config(tmp_path / "config.yaml", environ={})
    assert config.model.api_key == "sk-ant"
    route = transcription_route(config.media.transcription, main_model_route(config))
    assert route is not None and route.api_key == "sk-openai"


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
    # No config file: no .env is read, so none is named; init writes both.
    assert "config.yaml" not in sentence and "run `nightowl init`" in sentence


def test_time_zone_must_be_a_real_one() -> None:
    assert (
        parse_config({"agent": {"timezone": "Europe/Berlin"}}, {}).agent.timezone == "Europe/Berlin"
    )
    assert refusal({"agent": {"timezone": "Mars/Olympus"}}) == (
        'agent.timezone: expected an IANA time zone like "Europe/Berlin", got "Mars/Olympus"'
    )


# -- what `nightowl run` prints for a config file with problems -----------------------------


def run_with(config: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`nightowl run -c config` as a user starts it; the lines it printed to stderr."""
    from gateway.ops.cli import main

    assert main(["run", "-c", str(config)]) == 2
    return capsys.readouterr().err.splitlines()


def test_a_file_that_is_not_utf8_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(b"model:\n  name: caf\xe9\n")
    assert run_with(config, capsys) == [
        f"nightowl: {config}:2: not UTF-8 text (byte 0xe9); save the file as UTF-8"
    ]
    config.write_text("model:\n  name: m\n")
    (tmp_path / ".env").write_bytes(b"OPENAI_API_KEY=sk-\xff\n")
    assert run_with(config, capsys) == [
        f"nightowl: {tmp_path / '.env'}:1: not UTF-8 text (byte 0xff); save the file as UTF-8"
    ]


def test_every_problem_is_reported_at_once_with_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  name: m\n"
        "  context_length: 100\n"
        "compresion: {}\n"
        "compression:\n"
        "  threshold: high\n"
        "platforms:\n"
        "  telegram:\n"
        "    enabled: true\n"
        "hooks:\n"
        "  - events: [session:compress]\n"
        "    handler: no_colon\n"
        "  - handler: m:f\n"
        "agent:\n"
        "  timezone: Mars/Olympus\n"
    )
    assert run_with(config, capsys) == [
        "nightowl: 7 problems in the configuration:",
        f"{config}:3: model.context_length: expected a whole number of at least 512, got 100",
        f"{config}:4: compresion: unknown key (did you mean 'compression'?)",
        f'{config}:6: compression.threshold: expected a number between 0 and 1, got "high"',
        f"{config}:8: platforms.telegram.token: required when telegram is enabled",
        f"{config}:12: hooks[0].handler: 'no_colon' must look like 'module:function'",
        f"{config}:13: hooks[1].events: required",
        f'{config}:15: agent.timezone: expected an IANA time zone like "Europe/Berlin", '
        'got "Mars/Olympus"',
    ]
    config.write_text("model:\n  name: [unclosed\n")
    assert run_with(config, capsys) == [
        f"nightowl: {config}:3: not valid YAML: expected ',' or ']', but got '<stream end>'"
    ]


def test_an_unset_variable_is_an_error_only_in_a_secret_key_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DISCORD_BOT_TOKEN",
        "TELEGRAM_BOT_TOKEN",
    ):
        monkeypatch.delenv(variable, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  api_key: ${MY_KEY}\n"
        "auxiliary:\n"
        "  compression: {model: cheap, api_key: '${AUX_KEY}'}\n"
        "platforms:\n"
        "  telegram:\n"
        "    enabled: true\n"
        "    token: '1:x'\n"
        "    webhook: {url: 'https://h/t', secret_token: '${HOOK_SECRET}'}\n"
    )
    assert run_with(config, capsys) == [
        "nightowl: 3 problems in the configuration:",
        f"{config}:2: model.api_key: ${{MY_KEY}} is not set",
        f"{config}:4: auxiliary.compression.api_key: ${{AUX_KEY}} is not set",
        f"{config}:9: platforms.telegram.webhook.secret_token: ${{HOOK_SECRET}} is not set",
    ]

    # Not secrets, or not in use: an unset variable is empty text, as before.
    config.write_text(
        "model:\n  base_url: ${LOCAL_URL}\n  system_prompt: ${PROMPT}\n"
        "auxiliary:\n  compression: {api_key: '${AUX_KEY}'}\n"  # no summary model
        "platforms:\n  discord: {enabled: false, token: '${DISCORD_BOT_TOKEN}'}\n"
    )
    loaded = load_config(config, environ={})
    assert (loaded.model.base_url, loaded.model.system_prompt) == (None, "")
    assert loaded.auxiliary.compression.api_key is None

    # The example as shipped, with the provider's own variable spelled out (the same as
    # null) and nothing set: still the one sentence about what to set.
    example = (Path(__file__).parents[2] / "config.yaml.example").read_text()
    assert "  api_key: null " in example
    config.write_text(example.replace("  api_key: null ", "  api_key: ${OPENAI_API_KEY}", 1))
    loaded = load_config(config)
    assert loaded.model.api_key is None
    assert run_with(config, capsys) == [f"nightowl: {missing_llm_key_message(loaded)}"]
    assert f"in the environment or in {config.parent / '.env'} " in missing_llm_key_message(loaded)


def test_an_unset_variable_in_an_allowlist_of_an_enabled_platform_stops_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unset, ${ADMIN_ID} used to become "" — an entry that matches a message with no
    # sender — and the bot started with an allowlist nobody meant.
    for variable in ("ADMIN_ID", "FAMILY_GROUP", "OPS_CHANNEL", "MOD_ROLE", "FRIEND_ID"):
        monkeypatch.delenv(variable, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "model: {base_url: 'http://127.0.0.1:9/v1'}\n"
        "platforms:\n"
        "  telegram:\n"
        "    enabled: true\n"
        "    token: '1:x'\n"
        "    allowed_users:\n"
        "      - 42\n"
        "      - ${ADMIN_ID}\n"
        "    allowed_chats: ['${FAMILY_GROUP}']\n"
        "    free_response_chats: ['${FAMILY_GROUP}']\n"  # not an allowlist: empty is fine
        "  discord:\n"
        "    enabled: true\n"
        "    token: d\n"
        "    allowed_users: ['${FRIEND_ID}']\n"
        "    allowed_channels: ['${OPS_CHANNEL}']\n"
        "    allowed_roles: ['role-${MOD_ROLE}']\n"
    )
    assert run_with(config, capsys) == [
        "nightowl: 5 problems in the configuration:",
        f"{config}:9: platforms.telegram.allowed_users[1]: ${{ADMIN_ID}} is not set",
        f"{config}:10: platforms.telegram.allowed_chats[0]: ${{FAMILY_GROUP}} is not set",
        f"{config}:15: platforms.discord.allowed_users[0]: ${{FRIEND_ID}} is not set",
        f"{config}:16: platforms.discord.allowed_channels[0]: ${{OPS_CHANNEL}} is not set",
        f"{config}:17: platforms.discord.allowed_roles[0]: ${{MOD_ROLE}} is not set",
    ]

    # Set, they are ids like any other; a disabled platform's allowlist may stay unset.
    env = {"ADMIN_ID": "7", "FAMILY_GROUP": "-100", "FRIEND_ID": "8", "OPS_CHANNEL": "9"}
    loaded = load_config(config, environ={**env, "MOD_ROLE": "10"})
    assert loaded.platforms.telegram.allowed_users == ("42", "7")
    assert loaded.platforms.discord.allowed_roles == ("role-10",)
    config.write_text(config.read_text().replace("    enabled: true\n    token: d", "    token: d"))
    assert load_config(config, environ=env).platforms.telegram.allowed_chats == ("-100",)


def test_the_example_config_names_every_strict_key() -> None:
    import dataclasses
    import re

    from gateway.config.typed_yaml import SECRET_NAME

    def strict_keys(cls: type) -> set[str]:
        found = set()
        for spec in dataclasses.fields(cls):
            if spec.metadata.get("strict") or SECRET_NAME.search(spec.name):
                found.add(spec.name)
            for part in typing.get_args(typing.get_type_hints(cls)[spec.name]) or [
                typing.get_type_hints(cls)[spec.name]
            ]:
                if dataclasses.is_dataclass(part):
                    found |= strict_keys(part)  # type: ignore[arg-type]
        return found

    keys = strict_keys(Config)
    assert {"token", "api_key", "secret_token", "allowed_users", "allowed_roles"} <= keys
    example = (Path(__file__).parents[2] / "config.yaml.example").read_text()
    for key in keys:
        lines = [
            line
            for line in example.splitlines()
            if re.search(rf"\b{key}:", line) and not line.lstrip().startswith("#")
        ]
        assert lines and all("strict" in line for line in lines), (key, lines)


# -- store ---------------------------------------------------------------------------------


def test_postgres_needs_a_dsn_and_replicas_one_webhook_secret() -> None:
    telegram = {
        "enabled": True,
        "token": "1:x",
        "allowed_users": ["1"],
        "webhook": {"url": "https://bot.example.org/hook"},
    }
    with pytest.raises(ConfigError) as raised:
        parse_config({"store": {"backend": "postgres"}, "platforms": {"telegram": telegram}}, {})
    text = str(raised.value)
    assert "store.dsn: expected postgresql://" in text
    assert "platforms.telegram.webhook.secret_token: required with store.backend: postgres" in text
    # An unset ${VAR} is said once, as for any secret; with sqlite it is not needed at all.
    with pytest.raises(ConfigError) as raised:
        parse_config({"store": {"backend": "postgres", "dsn": "${DB_URL}"}}, {})
    assert str(raised.value).count("store.dsn") == 1 and "${DB_URL} is not set" in str(raised.value)
    assert parse_config({"store": {"dsn": "${DB_URL}"}}, {}).store.backend == "sqlite"
    hooked = dict(telegram, webhook={"url": "https://b.example.org/h", "secret_token": "s3cret"})
    config = parse_config(
        {
            "store": {"backend": "postgres", "dsn": "postgresql://u:p@db:5432/n"},
            "platforms": {"telegram": hooked},
        },
        {},
    )
    assert config.store.shared and config.store.pool_size == 10


# -- Discord shards ------------------------------------------------------------------------


def test_discord_shards_must_exist_and_be_listed_once(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  discord:\n"
        "    shard_count: 2\n"
        "    shard_ids:\n"
        "      - 1\n"
        "      - 2\n"
        "      - 1\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(config, environ={})
    assert str(raised.value).splitlines()[1:] == [
        f"{config}:4: platforms.discord.shard_ids: shard 1 listed twice: each shard runs once",
        f"{config}:6: platforms.discord.shard_ids[1]: shard 2 does not exist:"
        " shard_count 2 means 0..1",
    ]
    assert refusal({"platforms": {"discord": {"shard_ids": [0]}}}) == (
        "platforms.discord.shard_ids: needs platforms.discord.shard_count"
        " (the number of shards of all replicas)"
    )
    assert refusal({"platforms": {"discord": {"shard_count": 0}}}) == (
        "platforms.discord.shard_count: expected a whole number of at least 1, got 0"
    )
    assert refusal({"platforms": {"discord": {"shard_count": 2, "shard_ids": [-1]}}}) == (
        "platforms.discord.shard_ids[0]: expected a whole number of at least 0, got -1"
    )


def test_discord_shards_default_to_one_unsharded_connection() -> None:
    discord = parse_config({}, {}).platforms.discord
    assert (discord.shard_count, discord.shard_ids) == (None, ())
    every_shard = parse_config({"platforms": {"discord": {"shard_count": 4}}}, {})
    assert every_shard.platforms.discord.shard_ids == ()  # all four, in this process
    mine = parse_config({"platforms": {"discord": {"shard_count": 4, "shard_ids": [3, 0]}}}, {})
    assert mine.platforms.discord.shard_ids == (3, 0)


def test_a_price_written_as_one_number_is_shown_its_shape() -> None:
    assert refusal({"model": {"price": 0.15}}) == (
        "model.price: expected a mapping such as {input: 0.15, output: 0.60}, got 0.15"
    )
