"""What ``nightowl init`` writes: ``config.yaml`` and its ``.env`` in the data dir.

Secrets go only to ``.env`` (0600); ``config.yaml`` (0600 too: it says which servers and
users this install talks to) names them as ``${VAR}``, which the config loader reads from
the ``.env`` beside it (docs/design.md#private-files).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.config.alerts import alert_target
from gateway.ops.shipped import shipped
from gateway.private_files import write_private

CONFIG_NAME = "config.yaml"
ENV_NAME = ".env"
#: Every key with its default, commented; pyproject.toml installs it under share/nightowl.
EXAMPLE_NAME = "config.yaml.example"
#: Where each platform's token is kept in ``.env``.
TOKEN_VARIABLES = {"telegram": "TELEGRAM_BOT_TOKEN", "discord": "DISCORD_BOT_TOKEN"}


def owners_by_platform(entries: list[str], platforms: list[str]) -> dict[str, list[str]] | str:
    """``--owner telegram:123456789`` entries as each platform's user ids, or the sentence
    refusing the first wrong one (a platform not chosen, an id that is not a number)."""
    owners: dict[str, list[str]] = {}
    for entry in entries:
        platform, user = alert_target(entry)  # the same "<platform>:<user id>" as alerts.to
        if platform not in TOKEN_VARIABLES:
            return f"--owner {entry}: expected telegram:<user id> or discord:<user id>"
        if platform not in platforms:
            return f"--owner {entry}: {platform} is not among the platforms (--platform {platform})"
        if not user.isdigit():
            return f"--owner {entry}: a {platform} user id is a number (ask @userinfobot for yours)"
        owners.setdefault(platform, []).append(user)
    return owners


@dataclass
class Platform:
    name: str
    token: str
    #: A self-hosted Bot API server (Telegram only).
    base_url: str | None = None
    #: Who may talk to the bot (the owner, once paired).
    allowed_users: list[str] = field(default_factory=list)


@dataclass
class Model:
    provider: str
    name: str
    #: A local server's URL; None: the provider's own API.
    base_url: str | None = None
    #: The variable holding the key in ``.env`` and its value; None for a local server.
    key_variable: str | None = None
    key: str | None = None


@dataclass
class Answers:
    """Everything ``nightowl init`` asked."""

    data_dir: Path
    model: Model
    platforms: list[Platform] = field(default_factory=list)
    #: The console beside the platforms (it runs anyway when there is none).
    console: bool = False

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_NAME

    @property
    def env_path(self) -> Path:
        return self.data_dir / ENV_NAME


def render_config(answers: Answers) -> str:
    model: dict[str, Any] = {"provider": answers.model.provider, "name": answers.model.name}
    if answers.model.base_url:
        model["base_url"] = answers.model.base_url
    if answers.model.key_variable:
        model["api_key"] = f"${{{answers.model.key_variable}}}"
    platforms: dict[str, Any] = {}
    for platform in answers.platforms:
        section: dict[str, Any] = {
            "enabled": True,
            "token": f"${{{TOKEN_VARIABLES[platform.name]}}}",
        }
        if platform.base_url:
            section["base_url"] = platform.base_url
        section["allowed_users"] = list(platform.allowed_users)
        platforms[platform.name] = section
    if answers.console and answers.platforms:
        platforms["console"] = {"enabled": True}
    raw: dict[str, Any] = {"data_dir": ".", "model": model}
    if platforms:
        raw["platforms"] = platforms
    today = datetime.date.today().isoformat()
    secrets = (
        "Secrets are in the .env beside this\n# file, named here as ${VARIABLES}.\n"
        if secrets_of(answers)
        else "Nothing here needs a\n# secret (a key or token would go in a .env beside this file).\n"
    )
    head = (
        f"# Written by `nightowl init` on {today}; every key, with its default, is in\n"
        "# nightowl's config.yaml.example, which `nightowl init --example` prints. A relative\n"
        f"# data_dir is taken from this file's directory. {secrets}"
    )
    return head + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)


def find_example() -> Path | None:
    """The commented example config, where this nightowl was installed from or to."""
    return shipped(EXAMPLE_NAME)


def secrets_of(answers: Answers) -> dict[str, str]:
    found = {TOKEN_VARIABLES[p.name]: p.token for p in answers.platforms}
    if answers.model.key_variable and answers.model.key:
        found[answers.model.key_variable] = answers.model.key
    return found


_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?(\w+)\s*=")


def render_env(answers: Answers, existing: str = "") -> str:
    """The ``.env``: lines of ``existing`` that set other variables kept, ours replaced."""
    header = "# Secrets for config.yaml (written by `nightowl init`); keep this file 0600."
    return env_with(existing, secrets_of(answers), header)


def env_with(existing: str, values: dict[str, str], header: str) -> str:
    """The ``.env`` text ``existing`` with ``values`` set: the lines setting other
    variables kept, those setting these replaced; ``header`` opens one that had none."""
    kept = [
        line
        for line in existing.splitlines()
        if not ((m := _ASSIGNMENT.match(line)) and m.group(1) in values)
    ]
    if not any(line.strip() for line in kept):
        kept = [header]
    return "\n".join(kept + [f"{name}={value}" for name, value in values.items()]) + "\n"


def write_files(answers: Answers) -> None:
    """The data dir (0700), ``.env`` then ``config.yaml`` (0600 each), each whole."""
    answers.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    answers.data_dir.chmod(0o700)
    env = answers.env_path
    existing = env.read_text(encoding="utf-8") if env.is_file() else ""
    if secrets_of(answers) or existing:
        write_private(env, render_env(answers, existing))
    write_private(answers.config_path, render_config(answers))
