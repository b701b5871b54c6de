"""The root of every error nightowl raises on purpose.

Catch :class:`NightowlError` to catch them all, the way httpx's ``HTTPError`` roots its
errors; catch a branch for one kind of trouble:

- ``gateway.config.ConfigError`` — the configuration cannot be used;
- ``gateway.store.errors.StoreError`` — the database cannot be used (``DataDirInUse``,
  ``SessionEnded``);
- ``adapters.base.DeliveryError`` — a platform refused a message (``TelegramStartError``
  when it could not even start);
- ``agent.providers.ProviderError`` — the model provider failed, with a ``kind``;
- ``agent.loop.CompressionExhausted`` — the conversation still overflows after every
  allowed compression (not a provider's failure: ours to report);
- ``agent.tools.ToolInputError`` — a tool call's arguments were unusable.

This module imports nothing. It is the one module gateway/, agent/ and adapters/ all
import: a shared kernel of types, not a layer (docs/design.md#errors).
"""


class NightowlError(Exception):
    """Something nightowl could not do; ``str()`` is safe to show (no secrets)."""
