"""The gateway: builds every part from the config, starts the adapters, stops cleanly.

This is the only place that knows how the parts fit together; each part gets what it
needs through its constructor.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from adapters.base import Adapter
from agent.calibration import Calibration, Calibrations
from agent.context_compressor import ContextCompressor
from agent.context_engine import EngineChoice, resolve_context_engine
from agent.document_tools import READ_DOCUMENT
from agent.loop import Agent
from agent.memory_tools import MEMORY_TOOLS
from agent.model_metadata import ContextLengthResolver
from agent.prompt_caching import caching_enabled, caching_log_line, resolve_cache_ttl
from agent.providers import Provider
from agent.tokens import TokenCounter
from agent.tools import BUILTIN_TOOLS, Tool, ToolBox, ToolSource
from gateway.build import (
    Providers,
    SummaryWindow,
    build_engine_factory,
    build_mcp_servers,
    build_providers,
    build_store,
    catch_up_from_store,
)
from gateway.config.models import DEFAULT_CHOICE, model_choices
from gateway.config.schema import Config, main_model_route
from gateway.conversation.access import Access
from gateway.conversation.chat_tools import describe_tools, offered_servers
from gateway.conversation.commands import Commands
from gateway.conversation.hygiene import Hygiene
from gateway.conversation.lanes import Lanes
from gateway.conversation.model_choice import ModelChoices, ModelCommand
from gateway.conversation.moves import ChatMoves
from gateway.conversation.pairing import Pairing, config_owners
from gateway.conversation.platforms import Platforms
from gateway.conversation.router import Router
from gateway.conversation.runtime import SessionRuntime
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.turns import TurnRunner
from gateway.events import EventBus, load_hook
from gateway.media.reading import MediaReader
from gateway.media.transcription import transcriber_for
from gateway.memory.commands import MemoryCommands
from gateway.memory.flush import FlushBeforeCompaction
from gateway.memory.scopes import Memories
from gateway.provider_events import ReportedProvider, for_summaries
from gateway.scheduling.scheduler import Scheduler
from gateway.store import SessionRecord
from gateway.store.errors import damage_found

if TYPE_CHECKING:
    from gateway.dashboard.server import Dashboard

log = logging.getLogger(__name__)

#: How long the start waits for the MCP servers' first connection; a slower one's tools
#: arrive in the background.
MCP_READY_SECONDS = 30.0
#: How long the start waits for the model servers to say what windows they serve
#: (docs/design.md#served-window); a slower answer still arrives in the background.
ASK_SERVERS_SECONDS = 8.0


class Gateway:
    """Everything that runs: store, providers, sessions, lanes, adapters."""

    def __init__(
        self,
        config: Config,
        adapters: list[Adapter] | None = None,
        *,
        providers: Providers | None = None,
        extra_tools: tuple[Tool, ...] = (),
    ) -> None:
        self.config = config
        self.adapters: dict[str, Adapter] = {a.platform: a for a in adapters or []}
        self.platforms = Platforms(self.adapters.values())  # docs/design.md#platform-traits
        self.providers = providers or build_providers(config)
        self.store = build_store(config)
        catch_up_from_store(self.adapters.values(), self.store.conversation, config)
        self.events = EventBus()
        self.windows = ContextLengthResolver(config.data_dir)
        self.summary_window = SummaryWindow.of(
            config, self.windows, self.providers, self.current_window
        )
        #: How each model's server counts against the estimate (docs/design.md#calibration).
        self.calibrations = Calibrations()
        self._asking: set[asyncio.Task[None]] = set()
        #: The look at the whole database file, started beside the start.
        self.database_checked: asyncio.Task[None] | None = None
        self.counter = TokenCounter.for_model(config.model.name)
        self.toolbox = ToolBox.of(
            BUILTIN_TOOLS + (READ_DOCUMENT,) + extra_tools,
            max_result_chars=config.agent.tool_result_max_chars,
        )
        # Long-term memory (docs/design.md#memory): the tools, and the notes of each chat.
        self.memories: Memories | None = None
        if config.memory.enabled:
            self.toolbox.tools.update({tool.name: tool for tool in MEMORY_TOOLS})
            self.memories = Memories(self.store.memory, config.memory.max_tokens, self.platforms)
        self.engine_choice: EngineChoice = resolve_context_engine(
            config.context.engine, ContextCompressor, [config.data_dir / "plugins"]
        )
        # Per-chat model choice (docs/design.md#model-choice) and MCP tools (#mcp-tools).
        self.models = ModelChoices(
            model_choices(config.model, config.models),
            {DEFAULT_CHOICE: self.providers.main, **self.providers.alternatives},
            self.windows,
        )
        self.mcp = build_mcp_servers(config)
        self.sessions = SessionRegistry(
            self.store.conversation,
            self.events,
            self._build_runtime,
            system_prompt=config.model.system_prompt,
            model=config.model.name,
            counter=self.counter,
            in_place=config.compression.in_place,
            before_compaction=self._memory_flush(),
            window=self.session_window,
            model_name=lambda choice: self.models.get(choice).route.name,
        )
        self.runner = TurnRunner(
            self.store.conversation,
            self.sessions,
            self.events,
            self.adapters,
            cache_ttl=self._cache_ttl,
            hygiene=Hygiene(
                enabled=config.compression.enabled,
                hard_message_limit=config.compression.hygiene_hard_message_limit,
            ),
            timezone=config.agent.timezone,
            memories=self.memories,
            before_turn=self.summary_window.before_turn,
        )
        # With replicas a lane runs only while this replica holds its session, and then
        # reads the session afresh: another replica may have moved it on.
        shared = self.store.coordination.shared
        self.lanes = Lanes(
            self.runner.drain,
            self.store.coordination,
            on_hold=self.sessions.drop if shared else None,
        )
        # Voice and documents -> text; chats that move (docs/design.md#media, #chat-moves).
        self.sessions.documents = self.store.documents
        self.media = MediaReader(
            config.media,
            self.store.documents,
            transcriber_for(
                config.media.transcription, main_model_route(config), config.model.timeout_seconds
            ),
        )
        self.moves = ChatMoves(self.store.chats, self.lanes)
        self.scheduler = Scheduler(
            self.store.scheduling,
            self.store.conversation,
            self.sessions,
            self.lanes,
            self.runner,
            window=self.current_window,
            idle_after_minutes=config.compression.idle_after_minutes,
            idle_threshold=config.compression.idle_threshold,
            sweep_seconds=config.store.sweep_seconds if shared else None,
        )
        self.pairing = Pairing(self.store.pairing, owners=config_owners(config))
        self.commands = Commands(
            self.store.conversation,
            self.sessions,
            self.lanes,
            lambda message, text: self.router.reply(message, text),  # the router is next
            window_note=self.window_note,
            memory=MemoryCommands(self.memories, self.sessions),
            pairing=self.pairing,
            models=ModelCommand(self.models, self.store.conversation, self.sessions, self.lanes),
            tools=self.describe_tools,
            platforms=self.platforms,
        )
        self.router = Router(
            config,
            self.store.conversation,
            self.events,
            self.counter,
            self.lanes.notify,
            self.runner.send,
            self.commands,
            access=Access(config, self.pairing, moves=self.moves, platforms=self.platforms),
            pairing=self.pairing,
            media=self.media,
            moves=self.moves,
        )
        self._engine_factory = build_engine_factory(
            config,
            self.engine_choice,
            for_summaries(self.providers, self.events),
            self.summary_window.auxiliary,
        )
        # The operator's dashboard and /metrics (docs/design.md#dashboard), when enabled
        # (its web server, templates and Prometheus client are imported only then).
        self.dashboard: Dashboard | None = None
        if config.dashboard.enabled:
            from gateway.dashboard.server import Dashboard

            self.dashboard = Dashboard(self)

    # -- wiring ---------------------------------------------------------------------------

    def _memory_flush(self) -> FlushBeforeCompaction | None:
        """The flush before every compaction (docs/design.md#memory-flush), on the summary
        model when one is configured."""
        provider = self.providers.auxiliary or self.providers.main
        reported = ReportedProvider(provider, "flush", self.events)
        return FlushBeforeCompaction.of(self.config, self.memories, reported, self.summary_window)

    def current_window(self) -> int:
        """The main model's window now (a smaller limit learned from an overflow wins)."""
        model = self.config.model
        return self.windows.resolve(
            model.name, model.provider, model.base_url, override=model.context_length
        )

    def session_window(self, runtime: SessionRuntime) -> int:
        """The window of the model ``runtime``'s chat uses, now."""
        return self.models.window(self.models.get(runtime.model_choice))

    def window_note(self, runtime: SessionRuntime) -> str:
        """Where ``runtime``'s window came from (docs/design.md#window-resolution)."""
        return self.models.window_note(self.models.get(runtime.model_choice)).text

    def _build_runtime(self, record: SessionRecord, choice_key: str | None) -> SessionRuntime:
        choice = self.models.get(choice_key)
        provider = self.models.provider(choice)
        engine = self._engine_factory(
            self.models.window(choice),
            ReportedProvider(provider, "summary", self.events),
            choice.max_output_tokens,
        )
        # schedule_message is bound to this session's chat, so each session gets its own box.
        toolbox = ToolBox.of(
            [*self.toolbox.tools.values(), self.scheduler.reminder_tool(record)],
            self.toolbox.max_result_chars,
            self._mcp_tools(record.session_key, vision=choice.vision),
        )
        agent = Agent(
            ReportedProvider(provider, "chat", self.events),
            engine,
            toolbox,
            max_iterations=self.config.agent.max_iterations,
            max_output_tokens=choice.max_output_tokens,
            max_compression_attempts=self.config.compression.max_compression_attempts,
            windows=self.windows,
            # The session's own, kept with its usage anchor, when it has one.
            calibration=self._calibration(record, provider),
            calibrations=self.calibrations,
            lean_share=self.config.tools.lean_share,
        )
        runtime = SessionRuntime(record.session_key, record, engine, agent)
        runtime.model_choice = choice.key
        return runtime

    @staticmethod
    def _calibration(record: SessionRecord, provider: Provider) -> Calibration | None:
        """The session's own calibration, kept with its anchor — if it was taken on the
        model the session uses now."""
        if (anchor := record.anchor) is None or anchor.route != provider.route:
            return None
        return Calibration.from_ratio(anchor.ratio)

    def _mcp_tools(self, key: str, *, vision: bool) -> list[ToolSource]:
        if self.mcp is None:
            return []
        return [self.mcp.source(offered_servers(self.config, key, self.platforms), vision=vision)]

    async def describe_tools(self, key: str) -> str:
        """``/tools``: what the model can call in this chat (docs/design.md#mcp-tools)."""
        runtime = await self.sessions.existing(key)
        if runtime is not None:
            schemas = runtime.agent.tool_schemas()
        else:  # no conversation yet: what its first turn would be offered
            sources = self._mcp_tools(key, vision=self.config.model.supports_vision)
            schemas = ToolBox.of(self.toolbox.tools.values(), sources=sources).schemas()
        servers = offered_servers(self.config, key, self.platforms) if self.mcp is not None else []
        return describe_tools(
            schemas, {name: self.mcp.connections[name] for name in servers if self.mcp}
        )

    def _cache_ttl(self, source: str) -> str | None:
        main = self.providers.main
        if not caching_enabled(main.name, main.model, main.base_url):
            return None
        return resolve_cache_ttl(self.config.prompt_caching.cache_ttl, source)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.store.open()
        await self.pairing.load()
        await self.moves.load()
        # Loading the tokenizer can take a second (or a download); not on the event loop.
        await asyncio.to_thread(self.counter.preload)
        # A file damaged in its middle opens fine: look at all of it, beside the start.
        if not self.store.coordination.shared:
            self.database_checked = asyncio.create_task(self._check_database())
            self._asking.add(self.database_checked)
        # The windows the model servers really serve, before the first turn needs them.
        self._asking |= await self.models.ask_servers(ASK_SERVERS_SECONDS, self.summary_window.ask)
        self._subscribe_hooks()
        main = self.providers.main
        if caching_enabled(main.name, main.model, main.base_url):
            ttl = self._cache_ttl(min(self.adapters, default=""))  # what a chat's turns get
            log.info(caching_log_line(main.model, main.name, ttl))
        log.info(
            "model %s via %s, window %s tokens, context engine %s",
            main.model,
            main.name,
            f"{self.current_window():,}",
            self.engine_choice.resolved,
        )
        if self.mcp is not None:  # before the adapters: the first turns have the tools
            await self.mcp.start(ready_within=MCP_READY_SECONDS)
        for adapter in self.adapters.values():
            await adapter.start(self.router.receive)
        # Replicas announce what they store (docs/design.md#replicas): once this one has its
        # tools and platforms, it takes its share.
        await self.store.coordination.start(self.lanes.notify)
        await self.scheduler.start()  # after the adapters: overdue reminders go out at once
        if self.dashboard is not None:
            await self.dashboard.start()
        self.events.emit("gateway:start", {"platforms": sorted(self.adapters)})
        for key in await self.store.conversation.session_keys_with_inbox():
            self.lanes.notify(key)  # messages stored before a restart get their turn now

    async def _check_database(self) -> None:
        damage = await damage_found(self.config.database_path)
        if damage is not None:
            log.error("%s", damage)

    def _subscribe_hooks(self) -> None:
        search = [self.config.data_dir / "hooks"]
        for hook in self.config.hooks:
            try:
                handler = load_hook(hook.handler, search)
            except (ImportError, AttributeError) as exc:
                log.error("hook %s could not be loaded: %s", hook.handler, exc)
                continue
            self.events.subscribe(
                hook.events, handler, name=hook.handler, timeout=hook.timeout_seconds
            )

    async def stop(self, drain_seconds: float = 30.0) -> None:
        """Stop taking updates, let turns in flight finish (bounded), close everything."""
        if self.dashboard is not None:  # no new actions from the dashboard while draining
            await self.dashboard.stop()
        for adapter in self.adapters.values():
            await _quietly(adapter.stop_receiving(), f"pausing {adapter.platform}")
        self.lanes.closing = True  # what other replicas store waits for them, or our restart
        await self.scheduler.stop()
        if not await self.lanes.wait_idle(drain_seconds):
            log.warning("turns still running after %.0fs; stopping them", drain_seconds)
            await self.lanes.cancel_all()
        await self.router.background.wait(timeout=5.0)  # command answers on their way
        await self.commands.background.wait(timeout=5.0)
        for adapter in self.adapters.values():
            await _quietly(adapter.stop(), f"stopping {adapter.platform}")
        self.events.emit("gateway:stop", {})
        await self.events.drain(timeout=2.0)
        if self.mcp is not None:  # after the turns: stdio servers end with the gateway
            await _quietly(self.mcp.stop(), "stopping the MCP servers")
        for ask in self._asking:  # a server that never answered the start's question
            ask.cancel()
        await asyncio.gather(*self._asking, return_exceptions=True)
        await self.providers.aclose()
        if self.media.transcriber is not None:
            await self.media.transcriber.aclose()
        await self.store.close()

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()


async def _quietly(step: Any, what: str) -> None:
    try:
        await step
    except Exception:  # one adapter failing to stop must not keep the others running
        log.exception("%s failed", what)
