"""The ``platforms`` section: Telegram, Discord and the console, and the checks across
their keys. Part of :class:`gateway.config.schema.Config`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.config.typed_yaml import STRICT, Problem, Unset


def _range(lo: float, hi: float | None) -> dict[str, Any]:
    return {"range": (lo, hi)}


@dataclass(frozen=True)
class WebhookConfig:
    url: str
    listen: str = "127.0.0.1"
    port: int = field(default=8443, metadata=_range(1, 65535))
    secret_token: str | None = None


@dataclass(frozen=True)
class TelegramConfig:
    enabled: bool = False
    token: str | None = None
    base_url: str | None = None
    #: Who may talk to the bot: strict, an unset ${VAR} in them stops the start.
    allowed_users: tuple[str, ...] = field(default=(), metadata=STRICT)
    allowed_chats: tuple[str, ...] = field(default=(), metadata=STRICT)
    #: Strangers get a pairing code; false: a refusal (docs/design.md#pairing).
    pairing: bool = True
    require_mention: bool = True
    free_response_chats: tuple[str, ...] = ()
    stream: bool = False
    webhook: WebhookConfig | None = None
    health_timeout_seconds: float = field(default=300.0, metadata=_range(10, None))
    #: In an allowed group, who may start a turn: only allowed users, allowed users and
    #: people paired in a private chat, or every member (docs/design.md#authorization).
    group_members: Literal["allowed", "paired", "all"] = "allowed"


@dataclass(frozen=True)
class DiscordConfig:
    enabled: bool = False
    token: str | None = None
    #: Who may talk to the bot: strict, an unset ${VAR} in them stops the start.
    allowed_users: tuple[str, ...] = field(default=(), metadata=STRICT)
    allowed_channels: tuple[str, ...] = field(default=(), metadata=STRICT)
    allowed_roles: tuple[str, ...] = field(default=(), metadata=STRICT)
    pairing: bool = True  # as for Telegram
    require_mention: bool = True
    free_response_channels: tuple[str, ...] = ()
    allow_bots: bool = False
    #: Edit one message in place while the reply is written, as Telegram's ``stream``.
    stream: bool = False
    #: In an allowed channel, who may start a turn: as Telegram's ``group_members``.
    group_members: Literal["allowed", "paired", "all"] = "allowed"
    #: After every (re)connect, fetch what was missed in allowed chats with activity in
    #: the last this many hours (at most that old); 0: off. Up to a week.
    catch_up_hours: float = field(default=24.0, metadata=_range(0, 168))
    #: Shards of the bot across all replicas (docs/design.md#replicas); None: one
    #: connection, unsharded.
    shard_count: int | None = field(default=None, metadata=_range(1, None))
    #: The shards this replica connects (each in 0..shard_count-1); empty: all of them.
    shard_ids: tuple[int, ...] = field(default=(), metadata=_range(0, None))


@dataclass(frozen=True)
class ConsoleConfig:
    #: "auto": on when no other platform is enabled.
    enabled: bool | Literal["auto"] = "auto"
    name: str = "local"


@dataclass(frozen=True)
class PlatformsConfig:
    telegram: TelegramConfig = field(default_factory=TelegramConfig)
    discord: DiscordConfig = field(default_factory=DiscordConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)

    @property
    def remote(self) -> bool:
        """Telegram or Discord is on: someone beyond this terminal is answered."""
        return self.telegram.enabled or self.discord.enabled


def check_platforms(platforms: PlatformsConfig) -> list[Problem]:
    """Checks across a platform's keys: a token where enabled, shards that exist."""
    problems = []
    for name in ("telegram", "discord"):
        platform = getattr(platforms, name)
        if platform.enabled and not platform.token and not isinstance(platform.token, Unset):
            problems.append(Problem(f"platforms.{name}.token", f"required when {name} is enabled"))
    return problems + _shard_problems(platforms.discord)


def _shard_problems(discord: DiscordConfig) -> list[Problem]:
    path = "platforms.discord.shard_ids"
    count, ids = discord.shard_count, discord.shard_ids
    if ids and count is None:
        reason = "needs platforms.discord.shard_count (the number of shards of all replicas)"
        return [Problem(path, reason)]
    problems = [
        Problem(
            f"{path}[{i}]",
            f"shard {shard} does not exist: shard_count {count} means 0..{count - 1}",
        )
        for i, shard in enumerate(ids)
        if count is not None and shard >= count
    ]
    twice = sorted(shard for shard, times in Counter(ids).items() if times > 1)
    if twice:
        listed = ", ".join(map(str, twice))
        problems.append(Problem(path, f"shard {listed} listed twice: each shard runs once"))
    return problems
