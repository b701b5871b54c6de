"""Slash commands: the application commands offered in Discord's "/" menu, and their
registration (a bulk overwrite, globally and in ``command_guild_ids``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import discord
from discord import app_commands

from adapters.base import DeliveryError
from adapters.discord_adapter.outbound import discord_errors
from adapters.discord_adapter.settings import DiscordSettings

log = logging.getLogger(__name__)

#: Runs one slash command: the interaction, the command's name and its optional args.
OnCommand = Callable[[discord.Interaction, str, str | None], Coroutine[Any, Any, None]]


def add_slash_commands(
    tree: app_commands.CommandTree, settings: DiscordSettings, on_command: OnCommand
) -> None:
    """Put ``settings.slash_commands`` on ``tree``, each taking an optional ``args``."""
    for name, description in settings.slash_commands:
        callback = _callback(name, on_command)
        tree.add_command(
            app_commands.Command(name=name, description=description, callback=callback)
        )


def _callback(
    name: str, on_command: OnCommand
) -> Callable[[discord.Interaction, str | None], Coroutine[Any, Any, None]]:
    @app_commands.describe(args="Optional arguments")
    async def run_command(interaction: discord.Interaction, args: str | None = None) -> None:
        await on_command(interaction, name, args)

    return run_command


async def sync_commands(tree: app_commands.CommandTree, settings: DiscordSettings) -> None:
    """Register the tree's commands with Discord; a failure is logged, not raised."""
    try:
        with discord_errors("-"):
            await tree.sync()
            for guild_id in settings.command_guild_ids:
                guild = discord.Object(id=guild_id)
                tree.copy_global_to(guild=guild)
                await tree.sync(guild=guild)
    except DeliveryError as error:
        # Typed commands still work; the "/" menu is a convenience.
        log.warning("Could not register Discord slash commands: %s", error)
