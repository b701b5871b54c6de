"""How the Discord connection stands, for an operator (the gateway's dashboard)."""

from __future__ import annotations

import discord

from adapters.base import AdapterStatus

__all__ = ["AdapterStatus", "client_status"]


def client_status(client: discord.Client | None) -> AdapterStatus:
    """Connected when the gateway session is ready and open; the mode names the shards."""
    if client is None:
        return AdapterStatus(connected=False, mode="stopped")
    shards = client.shard_count or 1
    connected = client.is_ready() and not client.is_closed()
    return AdapterStatus(connected, f"gateway, {shards} shard{'s' if shards > 1 else ''}")
