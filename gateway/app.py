"""The gateway: the parts :mod:`gateway.assembly` built, started in order, and stopped
so that turns in flight finish (bounded) and nothing is left half-written.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent.prompt_caching import caching_enabled, caching_log_line, resolve_cache_ttl
from gateway.assembly import Assembly
from gateway.config.routes import model_label
from gateway.events import GatewayStarted, GatewayStopped, load_hook
from gateway.store.errors import damage_found

log = logging.getLogger(__name__)

#: How long the start waits for the MCP servers' first connection; a slower one's tools
#: arrive in the background.
MCP_READY_SECONDS = 30.0
#: How long the start waits for the model servers to say what windows they serve
#: (docs/design.md#served-window); a slower answer still arrives in the background.
ASK_SERVERS_SECONDS = 8.0


class Gateway(Assembly):
    """The assembled parts, running: :meth:`start` and :meth:`stop`, or ``async with``."""

    @property
    def asking(self) -> frozenset[asyncio.Task[None]]:
        """What the start asked beside itself and did not wait for (a server's window, a
        hosted API's listing, the database's check); :meth:`stop` ends what is left."""
        return frozenset(self._asking)

    async def start(self) -> None:
        await self.store.open()
        if not self.store.coordination.shared:  # the only process: its last one's calls died
            await self.store.costs.drop_holds()
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
            # What a chat's turns get (the scheduler's may differ).
            ttl = resolve_cache_ttl(self.config.prompt_caching.cache_ttl, human_paced=True)
            log.info(caching_log_line(main.model, main.name, ttl))
        log.info(  # with where the window came from, as /status says it
            "model %s, window %s tokens (%s), context engine %s",
            model_label(main.model, main.name, main.base_url),
            f"{self.current_window():,}",
            self.models.window_note(self.models.get(None)).text,
            self.engine_choice.resolved,
        )
        self.meter.warn_unpriced()
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
        self.events.emit(GatewayStarted(sorted(self.adapters)))
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
        self.events.emit(GatewayStopped())
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
