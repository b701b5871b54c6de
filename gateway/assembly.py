"""Every part of the gateway built from the config and wired together (ARCHITECTURE.md).

This is the only place that knows how the parts fit together; each part gets what it
needs through its constructor. :class:`~gateway.app.Gateway` starts and stops them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING

from adapters.base import Adapter
from agent.calibration import Calibration, Calibrations
from agent.context_compressor import ContextCompressor
from agent.context_engine import EngineChoice, resolve_context_engine
from agent.cost.prices import is_local_endpoint
from agent.document_tools import READ_DOCUMENT
from agent.lean_tools import FIND_TOOLS, schema_name
from agent.loop import Agent
from agent.memory_tools import MEMORY_TOOLS
from agent.model_metadata import ContextLengthResolver
from agent.prompt_caching import caching_enabled, resolve_cache_ttl
from agent.providers import Provider
from agent.tokens import TokenCounter
from agent.tools import BUILTIN_TOOLS, Tool, ToolBox, ToolSource
from gateway.alerts import Alerts
from gateway.alerts.conditions import ModelServer
from gateway.build import (
    Providers,
    SummaryWindow,
    build_engine_factory,
    build_mcp_servers,
    build_providers,
    catch_up_from_store,
)
from gateway.config.models import DEFAULT_CHOICE, model_choices
from gateway.config.routes import model_label
from gateway.config.schema import Config, main_model_route
from gateway.config.secrets import configured_secrets
from gateway.connecting import proxied
from gateway.conversation.access import Access
from gateway.conversation.chat_tools import describe_tools, offered_servers
from gateway.conversation.commands import Commands
from gateway.conversation.hygiene import Hygiene
from gateway.conversation.lanes import Lanes
from gateway.conversation.model_choice import ModelChoices, ModelCommand
from gateway.conversation.moves import ChatMoves
from gateway.conversation.pairing import Pairing, config_owners
from gateway.conversation.router import Router
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.turns import TurnRunner
from gateway.cost.meter import CostMeter
from gateway.cost.pricing import Pricing
from gateway.events import EventBus
from gateway.media.reading import MediaReader
from gateway.media.transcription import transcriber_for
from gateway.memory.commands import MemoryCommands
from gateway.memory.flush import FlushBeforeCompression
from gateway.memory.scopes import Memories
from gateway.operations import Operations
from gateway.platforms import Platforms
from gateway.provider_events import ReportedProvider, for_summaries
from gateway.runtime import SessionRuntime
from gateway.scheduling.scheduler import Scheduler
from gateway.store import SessionRecord
from gateway.store.opening import open_store

if TYPE_CHECKING:
    from gateway.dashboard.server import Dashboard

log = logging.getLogger(__name__)


class Assembly:
    """Everything that runs, built and wired: store, providers, sessions, lanes, adapters;
    nothing is started here."""

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
        self.store = open_store(config)  # not opened yet: start() does (docs/design.md#storage)
        catch_up_from_store(self.adapters.values(), self.store.conversation, config)
        self.events = EventBus()
        #: Budgets before every model call, its cost stored after (docs/cost.md).
        self.meter = CostMeter(self.store.costs, Pricing.of(config), self.events)
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
            before_compression=self._memory_flush(),
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
            costs=self.store.costs,
            meter=self.meter,
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
            self.meter,
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
        # What the operator is told (docs/operations.md#alerts): checked by the scheduler.
        self.alerts = Alerts(
            config.alerts,
            data_dir=config.data_dir,
            events=self.events,
            adapters=self.adapters,
            conversation=self.store.conversation,
            pairings=self.pairing.pending,
            told=self.store.alerts,
            host=socket.gethostname() if self.store.coordination.shared else None,
            secrets=configured_secrets(config),
            model_server=_self_hosted(self.providers.main),
        )
        self.scheduler.alert_check = self.alerts.check
        self.scheduler.alert_seconds = self.alerts.check_seconds
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
            costs=self.store.costs,
            budgets=self.meter.budgets,
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
            for_summaries(self.providers, self.events, self.meter),
            self.summary_window.auxiliary,
        )
        # The operator's dashboard and /metrics (docs/design.md#dashboard), when enabled
        # (its web server, templates and Prometheus client are imported only then).
        self.operations = Operations(
            store=self.store,
            events=self.events,
            sessions=self.sessions,
            lanes=self.lanes,
            commands=self.commands,
            pairing=self.pairing,
            adapters=self.adapters,
            model=lambda: model_label(
                self.providers.main.model, self.providers.main.name, self.providers.main.base_url
            ),
            window=self.current_window,
            budgets=self.meter.budgets,
            alerts=self.alerts.current,
            refusing=self.alerts.budgets_refusing,
        )
        self.dashboard: Dashboard | None = None
        if config.dashboard.enabled:
            from gateway.dashboard.server import Dashboard

            self.dashboard = Dashboard(config, self.operations)

    # -- wiring ---------------------------------------------------------------------------

    def _memory_flush(self) -> FlushBeforeCompression | None:
        """The flush before every compression (docs/design.md#memory-flush), on the summary
        model when one is configured."""
        provider = self.providers.auxiliary or self.providers.main
        reported = ReportedProvider(provider, "flush", self.events, self.meter)
        return FlushBeforeCompression.of(self.config, self.memories, reported, self.summary_window)

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
            ReportedProvider(provider, "summary", self.events, self.meter),
            choice.max_output_tokens,
        )
        # schedule_message is bound to this session's chat, so each session gets its own box.
        toolbox = ToolBox.of(
            [*self.toolbox.tools.values(), self.scheduler.reminder_tool(record)],
            self.toolbox.max_result_chars,
            self._mcp_tools(record.session_key, vision=choice.vision),
        )
        agent = Agent(
            ReportedProvider(provider, "chat", self.events, self.meter),
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
        lean = False
        if runtime is not None:
            schemas = runtime.agent.tool_schemas()
            offered = runtime.agent.tool_offer(memory=True).offered(runtime.agent.window)
            lean = any(schema_name(schema) == FIND_TOOLS for schema in offered)
        else:  # no conversation yet: what its first turn would be offered
            sources = self._mcp_tools(key, vision=self.config.model.supports_vision)
            schemas = ToolBox.of(self.toolbox.tools.values(), sources=sources).schemas()
        servers = offered_servers(self.config, key, self.platforms) if self.mcp is not None else []
        return describe_tools(
            schemas, {name: self.mcp.connections[name] for name in servers if self.mcp}, lean=lean
        )

    def _cache_ttl(self, source: str) -> str | None:
        """The cache TTL of a request for ``source``: a chat's session key is paced by a
        person, anything else (the scheduler) by a machine (docs/design.md#prompt-caching)."""
        main = self.providers.main
        if not caching_enabled(main.name, main.model, main.base_url):
            return None
        human = source.partition(":")[0] in self.adapters
        return resolve_cache_ttl(self.config.prompt_caching.cache_ttl, human_paced=human)


def _self_hosted(provider: Provider) -> ModelServer | None:
    """The main model's server when it runs on this machine or its network (Ollama,
    llama.cpp, vLLM): nothing else watches whether it is up before the first reply. A
    hosted API behind a ``base_url`` (OpenRouter, Groq) is not looked at."""
    if provider.base_url is None or not is_local_endpoint(provider.base_url):
        return None
    if proxied(provider.base_url):  # the calls go through the proxy: a look proves nothing
        return None
    return ModelServer(provider.base_url, provider.model, ask=provider.served_window)
