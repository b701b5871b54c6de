"""The platforms the gateway runs, by name, as their adapters describe them
(docs/design.md#platform-traits).

Where the gateway must treat a message by what its platform is — who is trusted, how its
session is keyed, whether a chat is private — it asks these traits, never the platform's
name. The gateway fills the registry from its adapters; a platform none declared is
unknown, and fails closed: no one is trusted there and no chat of it is private.
"""

from __future__ import annotations

from collections.abc import Iterable

from adapters.base import Adapter, InboundMessage, PlatformTraits


class Platforms:
    def __init__(self, adapters: Iterable[Adapter] = ()) -> None:
        self._traits: dict[str, PlatformTraits] = {}
        for adapter in adapters:
            self.add(adapter.platform, adapter.traits)

    def add(self, platform: str, traits: PlatformTraits) -> None:
        self._traits[platform] = traits

    def __contains__(self, platform: object) -> bool:
        return platform in self._traits

    def __getitem__(self, platform: str) -> PlatformTraits:
        """The platform's traits; a plain platform's for one nobody declared."""
        return self._traits.get(platform, PlatformTraits())

    def session_key(self, message: InboundMessage) -> str:
        """docs/design.md#session-keys: ``<platform>:<chat id>[:<thread id>]``; a private
        chat of a platform that keys those by person ``<platform>:dm:<user id>``."""
        if message.chat_type == "private" and self[message.platform].private_session_by_user:
            return f"{message.platform}:dm:{message.user_id}"
        key = f"{message.platform}:{message.chat_id}"
        return f"{key}:{message.thread_id}" if message.thread_id else key

    def is_private_chat(self, session_key: str) -> bool:
        """Whether a session key is a private chat's, failing closed: a key whose platform
        cannot tell is a group's."""
        platform, _, rest = session_key.partition(":")
        if platform not in self:
            return False
        traits = self[platform]
        if traits.operator_only:
            return True
        if traits.private_session_by_user:
            return rest.startswith("dm:")
        if traits.private_ids_positive:
            return rest.split(":", 1)[0].isdigit()
        return False
