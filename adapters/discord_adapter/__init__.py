"""The Discord adapter (discord.py): DMs, guild text channels, threads, slash commands.

Inbound, each human message becomes an :class:`~adapters.base.InboundMessage`:

- ``chat_type`` "private" for DMs (``chat_id`` = the DM channel id; the gateway keys the
  session by ``user_id``), "group" for guild text channels (``chat_id`` = channel id) and
  "thread" for threads (``chat_id`` = thread id; a thread is its own channel on Discord,
  so ``thread_id`` stays None).
- ``addressed`` (docs/design.md#groups): see :mod:`adapters.discord_adapter.inbound`. Unaddressed guild
  messages are passed with ``addressed=False`` so the gateway can observe them.
- Own messages are always ignored; other bots' unless ``allow_bots``. A message id seen
  before (Discord may redeliver around a resume) is passed once; ``dedupe_key`` is
  ``discord:<message id>``, ``platform_message_id`` the message id.
- Messages of one chat reach the sink in the order Discord sent them, even when an
  earlier one waits for an image download.

Slash commands (``settings.slash_commands``) are registered at start. An interaction is
acknowledged at once (Discord shows "thinking…"; it allows 3 s) and becomes the text
``/<name> <args>`` with ``platform_message_id = "interaction:<interaction id>"``. When
:meth:`DiscordAdapter.send` gets that value as ``reply_to_message_id`` it answers through
the interaction's followup webhook (valid 15 minutes, kept in memory); when the
interaction is unknown (after a restart) or expired, the reply goes to the channel.

Catch-up: discord.py replays missed messages only when a session resumes. Given a
:class:`CatchUpSource` (:meth:`DiscordAdapter.catch_up_from`; the gateway's reads its
store), the adapter reads each active, allowed chat's history after the newest stored
message on every connect and resume, and passes it on like live messages; see
:mod:`adapters.discord_adapter.catch_up`.

Outbound: see :mod:`adapters.discord_adapter.outbound`. Heartbeats, resume and 429s are
discord.py's job; disconnects and resumes are logged.
"""

from adapters.discord_adapter.adapter import INTERACTION_PREFIX, DiscordAdapter
from adapters.discord_adapter.catch_up import CatchUpChat, CatchUpSource
from adapters.discord_adapter.outbound import MESSAGE_LIMIT, NO_PINGS
from adapters.discord_adapter.settings import DiscordSettings

__all__ = [
    "INTERACTION_PREFIX",
    "MESSAGE_LIMIT",
    "NO_PINGS",
    "CatchUpChat",
    "CatchUpSource",
    "DiscordAdapter",
    "DiscordSettings",
]
