"""How the Discord connection stands, for an operator (the gateway's dashboard)."""

from __future__ import annotations

import discord

from adapters.base import AdapterStatus

__all__ = ["AdapterStatus", "client_status"]


def client_status(client: discord.Client | None) -> AdapterStatus:
    """Connected when the gateway session is ready and open (sharded: every shard this
    process runs); the mode names the shards, e.g. "gateway, shard 1 of 2"."""
    if client is None:
        return AdapterStatus(connected=False, mode="stopped")
    connected = client.is_ready() and not client.is_closed()
    if isinstance(client, discord.AutoShardedClient):
        shards = client.shards
        connected = connected and all(not shard.is_closed() for shard in shards.values())
        ids = ", ".join(str(shard) for shard in sorted(shards))
        noun = "shards" if len(shards) > 1 else "shard"
        return AdapterStatus(connected, f"gateway, {noun} {ids} of {client.shard_count}")
    return AdapterStatus(connected, "gateway, 1 shard")
