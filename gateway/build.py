"""Everything the gateway is made of, built from the config: the model providers, the
context engine for each session, and the chat platforms' adapters.

:mod:`gateway.app` calls these once at start; nothing else reads the config to build
parts. Adapters never read the config themselves (docs/design.md#house).
"""

from __future__ import annotations

import functools
import logging
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from adapters.base import Adapter, CatchUpSource, InboundMessage, MissedChat
from agent.compression.settings import CompressionSettings
from agent.context_engine import ContextEngine, EngineChoice
from agent.model_metadata import ContextLengthResolver
from agent.providers import Provider, ProviderSettings, make_provider
from agent.urls import shown_url
from gateway.config.models import DEFAULT_CHOICE, model_choices
from gateway.config.schema import (
    Config,
    ModelRoute,
    main_model_route,
    resolve_api_key,
    summary_model_route,
)
from gateway.conversation.access import place_allowed, user_listed
from gateway.conversation.command_registry import MENU
from gateway.logs import redact_from_now_on
from gateway.private_files import write_private
from gateway.runtime import SessionRuntime
from gateway.store import ConversationStore

if TYPE_CHECKING:
    from agent.mcp import McpServers

log = logging.getLogger(__name__)

# -- model providers ---------------------------------------------------------------------


@dataclass
class Providers:
    main: Provider
    auxiliary: Provider | None = None
    #: The ``models:`` a chat may switch to, by name (docs/design.md#model-choice).
    alternatives: dict[str, Provider] = field(default_factory=dict)

    async def aclose(self) -> None:
        await self.main.aclose()
        if self.auxiliary is not None:
            await self.auxiliary.aclose()
        for provider in self.alternatives.values():
            await provider.aclose()


def build_providers(config: Config) -> Providers:
    """The main model's provider, the summary model's when one is configured, and one
    for each of ``models:``."""
    main = _provider(main_model_route(config), config.model.timeout_seconds, config)
    alternatives = {
        key: _provider(choice.route, config.model.timeout_seconds, config)
        for key, choice in model_choices(config.model, config.models).items()
        if key != DEFAULT_CHOICE
    }
    summary = summary_model_route(config)
    if summary is None:
        return Providers(main, alternatives=alternatives)
    auxiliary = _provider(summary, config.compression.context_timeout_seconds, config)
    return Providers(main, auxiliary, alternatives)


@dataclass
class SummaryWindow:
    """The summary model's window (docs/design.md#summary-model): ``auxiliary.compression.
    context_length``, else what its server serves, found like the main model's; the main
    model's window when the main model writes the summaries."""

    windows: ContextLengthResolver
    main: Callable[[], int]
    route: ModelRoute | None = None
    configured: int | None = None
    provider: Provider | None = None
    #: Whether the log was told its server lacks the model.
    told_missing: bool = False

    @classmethod
    def of(
        cls,
        config: Config,
        windows: ContextLengthResolver,
        providers: Providers,
        main: Callable[[], int],
    ) -> SummaryWindow:
        route = summary_model_route(config)
        configured = config.auxiliary.compression.context_length
        return cls(windows, main, route, configured, providers.auxiliary)

    def auxiliary(self) -> int | None:
        """The summary model's own window; None when the main model summarizes."""
        if self.route is None:
            return None
        route = self.route
        return self.windows.resolve(
            route.name, route.provider, route.base_url, override=self.configured
        )

    def __call__(self) -> int:
        return self.auxiliary() or self.main()

    async def ask(self, *, load: bool = False) -> None:
        """Ask its server what it serves (nothing to ask when the config says it);
        ``load``: have it load the model first, if that is how it would say (Ollama)."""
        if self.route is None or self.provider is None or self.configured:
            return
        route = self.route
        served = functools.partial(self.provider.served_window, load=load)
        said = await self.windows.ask_server(route.name, route.provider, route.base_url, served)
        if said is not None and not said.has_model and not self.told_missing:
            self.told_missing = True  # once: it is asked again as chats fill
            where, key = shown_url(route.base_url or ""), "auxiliary.compression.model"
            so = "summaries fall back to the main model"
            log.warning("auxiliary.compression: %s", said.missing(where, route.name, key, so))

    async def before_turn(self, runtime: SessionRuntime) -> None:
        """Once a chat is half way to its threshold, ask again a server that could not
        say at start (down, or its model not loaded: loading it now, as the summary
        would), so that the first summary is sized by what it really serves."""
        engine, route = runtime.engine, self.route
        if route is None or engine.last_prompt_tokens < engine.threshold_tokens // 2:
            return
        if self.windows.wants_asking(route.name, route.provider, route.base_url, load=True):
            await self.ask(load=True)


def _provider(route: ModelRoute, timeout: float, config: Config) -> Provider:
    return make_provider(
        ProviderSettings(
            provider=route.provider,
            model=route.name,
            api_key=resolve_api_key(route.provider, route.api_key, route.base_url),
            base_url=route.base_url,
            timeout=timeout,
            max_retries=config.model.max_retries,
        )
    )


# -- the context engine ------------------------------------------------------------------


def compression_settings(config: Config) -> CompressionSettings:
    c = config.compression
    return CompressionSettings(
        enabled=c.enabled,
        threshold=c.threshold,
        model_thresholds=dict(c.model_thresholds),
        target_ratio=c.target_ratio,
        tail_mode=c.tail_mode,
        protect_last_n=c.protect_last_n,
        min_tail_user_messages=c.min_tail_user_messages,
        abort_on_summary_failure=c.abort_on_summary_failure,
        max_compression_attempts=c.max_compression_attempts,
        context_timeout_seconds=c.context_timeout_seconds,
        max_output_tokens=config.model.max_output_tokens,
    )


def build_engine_factory(
    config: Config,
    choice: EngineChoice,
    providers: Providers,
    summary_window: Callable[[], int | None] | None = None,
) -> Callable[..., ContextEngine]:
    """A function that makes one engine per session for a given window — and, for a chat
    that chose another model, that model's provider and output limit (it then writes
    the summaries unless ``auxiliary.compression`` does).

    The built-in and plugins are called with the same keyword arguments; ``context.engine:
    compressor`` (or an unknown name, after a warning) is the built-in.
    """
    settings = compression_settings(config)
    factory = choice.factory
    builtin = choice.resolved == "compressor"

    def build(
        context_length: int, main: Provider | None = None, max_output_tokens: int | None = None
    ) -> ContextEngine:
        own = main or providers.main
        return factory(
            settings=replace(settings, max_output_tokens=max_output_tokens)
            if max_output_tokens
            else settings,
            main=own,
            auxiliary=providers.auxiliary,
            model=own.model,
            provider=own.name,
            context_length=context_length,
            # The built-in reads the summary model's window when it summarizes.
            **({"auxiliary_context_length": summary_window} if builtin else {}),
        )

    return build


# -- MCP servers -------------------------------------------------------------------------


def build_mcp_servers(config: Config) -> McpServers | None:
    """The enabled ``tools.mcp_servers`` (docs/design.md#mcp-tools); None when there are
    none. The SDK is imported only then (it takes a while to import)."""
    servers = {n: s for n, s in config.tools.mcp_servers.items() if s.enabled}
    if not servers:
        return None
    from agent.mcp import McpServers, McpServerSpec

    return McpServers(
        [
            McpServerSpec(
                name=name,
                command=server.command,
                env=server.env,
                url=server.url,
                headers=server.headers,
                timeout_seconds=server.timeout_seconds,
            )
            for name, server in servers.items()
        ]
    )


# -- chat platforms ----------------------------------------------------------------------


def platform_adapters(config: Config) -> list[Adapter]:
    """Adapters for every enabled chat platform (their libraries imported only then)."""
    adapters: list[Adapter] = []
    if config.platforms.telegram.enabled:
        adapters.append(telegram_adapter(config))
    if config.platforms.discord.enabled:
        adapters.append(discord_adapter(config))
    return adapters


def telegram_adapter(config: Config) -> Adapter:
    from adapters.telegram import TelegramAdapter, TelegramSettings, WebhookSettings

    telegram = config.platforms.telegram
    webhook = None
    if telegram.webhook is not None:
        secret = webhook_secret(config)
        redact_from_now_on(secret)  # it may be new: setup_logging did not know it
        webhook = WebhookSettings(
            url=telegram.webhook.url,
            listen=telegram.webhook.listen,
            port=telegram.webhook.port,
            secret=secret,
        )
    settings = TelegramSettings(
        token=telegram.token or "",
        base_url=telegram.base_url,
        require_mention=telegram.require_mention,
        free_response_chats=telegram.free_response_chats,
        stream=telegram.stream,
        webhook=webhook,
        health_timeout_seconds=telegram.health_timeout_seconds,
        bot_commands=MENU,
    )
    return TelegramAdapter(settings)


#: Where a generated webhook secret is kept, in the data dir (docs/design.md#webhook-secret).
WEBHOOK_SECRET_FILE = "telegram_webhook_secret"
#: What Telegram accepts as a secret_token.
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9_-]{1,256}")


def webhook_secret(config: Config) -> str:
    """The secret Telegram must send with every webhook request: the configured
    ``secret_token``, else the one generated on an earlier start, else a new one.

    Webhook mode never runs without one (docs/design.md#webhook-secret). A new secret is
    kept in ``<data_dir>/telegram_webhook_secret`` (0600) so restarts reuse it; when it
    cannot be written it is used for this run only (setWebhook registers it anyway).
    """
    hook = config.platforms.telegram.webhook
    if hook is not None and hook.secret_token:
        return hook.secret_token
    path = config.data_dir / WEBHOOK_SECRET_FILE
    try:
        stored = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        stored = ""
    if _SECRET_SHAPE.fullmatch(stored):
        return stored
    secret = secrets.token_urlsafe(32)
    try:
        write_private(path, secret + "\n")
    except OSError as error:
        log.warning(
            "could not keep the webhook secret in %s (%s): it holds for this run", path, error
        )
    return secret


def discord_adapter(config: Config) -> Adapter:
    from adapters.discord_adapter import DiscordAdapter, DiscordSettings

    discord = config.platforms.discord
    settings = DiscordSettings(
        token=discord.token or "",
        require_mention=discord.require_mention,
        free_response_channels=discord.free_response_channels,
        allow_bots=discord.allow_bots,
        stream=discord.stream,
        slash_commands=MENU,
        catch_up_hours=discord.catch_up_hours,
        shard_count=discord.shard_count,
        shard_ids=discord.shard_ids,
    )
    return DiscordAdapter(settings)


class StoredCatchUp(CatchUpSource):
    """A catching-up adapter's source (Discord's): cursors from what the store holds of
    its platform, chats judged by the same allowlists as every message
    (docs/design.md#authorization)."""

    def __init__(self, store: ConversationStore, config: Config, platform: str) -> None:
        self.store = store
        self.config = config
        self.platform = platform

    async def cursors(self, since: datetime) -> list[tuple[int, int]]:
        newest = await self.store.newest_stored_message_ids(self.platform, since.timestamp())
        return [(int(chat), last) for chat, last in sorted(newest.items()) if chat.isdigit()]

    def allows(self, chat: MissedChat) -> bool:
        """An allowed channel (or a thread of one), or the DM of an allowed user: the
        router judges every message read back again, sender by sender."""
        probe = InboundMessage(
            platform=self.platform,
            chat_id=chat.chat_id,
            user_id=chat.user_id or "",
            text="",
            chat_type=chat.chat_type,
            addressed=False,
            parent_chat_id=chat.parent_chat_id,
        )
        if chat.chat_type == "private":
            return user_listed(self.config, probe) or place_allowed(self.config, probe)
        return place_allowed(self.config, probe)


def catch_up_from_store(
    adapters: Iterable[Adapter], store: ConversationStore, config: Config
) -> None:
    """Let each adapter that can (its traits say ``catches_up``: Discord) read what it
    missed while disconnected, after the newest message ``store`` holds in each chat. The
    gateway calls this once it has its store."""
    for adapter in adapters:
        if adapter.traits.catches_up:
            adapter.catch_up_from(StoredCatchUp(store, config, adapter.platform))
