"""Config values are taken as written: ``${VAR}`` is replaced once, and a list key refuses
a lone value, with its file and line (docs/design.md#configuration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.schema import ConfigError, load_config


def test_a_variables_value_is_never_expanded_again(tmp_path: Path) -> None:
    # A password or token may contain "${": it is the variable's value, not a reference.
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  name: ${MODEL}\n"
        "  api_key: ${API_KEY}\n"
        "  base_url: ${BASE_URL}\n"
        "platforms:\n"
        "  telegram:\n"
        "    enabled: true\n"
        "    token: ${TG_TOKEN}\n"
        "    allowed_users: ['${ADMIN_ID}']\n"
        "store:\n"
        "  dsn: ${DB_URL}\n"
        "tools:\n"
        "  mcp_servers:\n"
        "    files:\n"
        "      command: [mcp-files, '${FILES_ROOT}']\n"
        "      env: {FILES_TOKEN: '${FILES_TOKEN}'}\n"
    )
    (tmp_path / ".env").write_text("DB_URL=postgresql://u:pa${B}ss@db:5432/n\n")
    env = {
        "B": "expanded-again",
        "MODEL": "m-${B}",
        "API_KEY": "k-${B}-1",
        "BASE_URL": "http://127.0.0.1:9/${B}",
        "TG_TOKEN": "1:${NOT_SET_ANYWHERE}",  # unset: no "is not set" error either
        "ADMIN_ID": "${B}",
        "FILES_ROOT": "/srv/${B}",
        "FILES_TOKEN": "t-${B}",
    }
    loaded = load_config(config, environ=env)
    assert loaded.model.name == "m-${B}"
    assert loaded.model.api_key == "k-${B}-1"
    assert loaded.model.base_url == "http://127.0.0.1:9/${B}"
    assert loaded.platforms.telegram.token == "1:${NOT_SET_ANYWHERE}"
    assert loaded.platforms.telegram.allowed_users == ("${B}",)
    assert loaded.store.dsn == "postgresql://u:pa${B}ss@db:5432/n"
    files = loaded.tools.mcp_servers["files"]
    assert files.command == ("mcp-files", "/srv/${B}")
    assert files.env == {"FILES_TOKEN": "t-${B}"}


def test_a_lone_value_where_a_list_belongs_is_refused_with_file_line_and_key(
    tmp_path: Path,
) -> None:
    # `allowed_users: 12345, 67890` is one string that matches nobody: say so at start.
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  telegram:\n"
        "    allowed_users: 12345\n"
        "    allowed_chats: -1001234567890\n"
        "    free_response_chats: -100, -200\n"
        "  discord:\n"
        "    allowed_users: 12345, 67890\n"
        "    allowed_channels: ${OPS_CHANNEL}\n"
        "    allowed_roles: moderators\n"
        "    shard_count: 2\n"
        "    shard_ids: 0\n"
        "hooks:\n"
        "  - events: turn_end\n"
        "    handler: hooks:on_turn\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(config, environ={"OPS_CHANNEL": "9"})
    assert str(raised.value).splitlines() == [
        "8 problems in the configuration:",
        f"{config}:3: platforms.telegram.allowed_users: expected a list, got 12345",
        f"{config}:4: platforms.telegram.allowed_chats: expected a list, got -1001234567890",
        f'{config}:5: platforms.telegram.free_response_chats: expected a list, got "-100, -200"',
        f'{config}:7: platforms.discord.allowed_users: expected a list, got "12345, 67890"',
        f'{config}:8: platforms.discord.allowed_channels: expected a list, got "9"',
        f'{config}:9: platforms.discord.allowed_roles: expected a list, got "moderators"',
        f"{config}:11: platforms.discord.shard_ids: expected a list, got 0",
        f'{config}:13: hooks[0].events: expected a list, got "turn_end"',
    ]


def test_lists_and_an_empty_key_are_still_fine(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  telegram:\n"
        "    allowed_users: [12345, '67890']\n"
        "    allowed_chats:\n"
        "      - -1001234567890\n"
        "    free_response_chats:\n"
        "tools:\n"
        "  mcp_servers:\n"
        "    files: {command: [mcp-files], chats: all}\n"
        "    web: {url: 'https://mcp.example.org/', chats: ['telegram:42']}\n"
    )
    loaded = load_config(config, environ={})
    telegram = loaded.platforms.telegram
    assert telegram.allowed_users == ("12345", "67890")
    assert telegram.allowed_chats == ("-1001234567890",)
    assert telegram.free_response_chats == ()
    assert loaded.tools.mcp_servers["files"].chats == "all"
    assert loaded.tools.mcp_servers["web"].chats == ("telegram:42",)


def test_an_mcp_command_written_as_one_word_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tools:\n  mcp_servers:\n    files:\n      command: mcp-files\n")
    with pytest.raises(ConfigError) as raised:
        load_config(config, environ={})
    expected = f'{config}:4: tools.mcp_servers.files.command: expected a list, got "mcp-files"'
    assert expected in str(raised.value).splitlines()
