"""Chat commands: /new /compress /status /context /usage /model /tools /help
(docs/design.md#commands, #model-choice, #mcp-tools),
and /pair for the owner (docs/design.md#pairing).

The reading commands answer at once, even while a turn is running. ``/new`` and
``/compress`` change the conversation, so they run in the session's lane after the turn
in progress and answer when done — without holding up the adapter that delivered them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from adapters.base import PRIVATE_CHAT_TYPES, InboundMessage
from agent.cost.budget import Budgets
from agent.messages import JSON
from gateway.config.routes import model_label
from gateway.conversation.background import BackgroundTasks
from gateway.conversation.command_registry import HELP, command
from gateway.conversation.fullness import Fullness, measure_fullness, next_memory_block
from gateway.conversation.lanes import Lanes
from gateway.conversation.pairing import Pairing
from gateway.conversation.router import LATER, Answer
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.transcript import SessionTranscript
from gateway.cost.report import today_line, usage_lines
from gateway.memory.commands import MemoryCommands
from gateway.platforms import Platforms
from gateway.runtime import SessionRuntime
from gateway.store import ConversationStore, CostStore

if TYPE_CHECKING:
    from gateway.conversation.model_choice import ModelCommand

log = logging.getLogger(__name__)


NOTHING_TO_COMPRESS = (
    "Nothing to compress yet: the conversation is still short enough to keep word for word."
)

Reply = Callable[[InboundMessage, str], Awaitable[None]]


class Commands:
    def __init__(
        self,
        store: ConversationStore,
        sessions: SessionRegistry,
        lanes: Lanes,
        reply: Reply,
        *,
        window_note: Callable[[SessionRuntime], str] | None = None,
        pairing: Pairing | None = None,
        memory: MemoryCommands | None = None,
        models: ModelCommand | None = None,
        tools: Callable[[str], Awaitable[str]] | None = None,
        platforms: Platforms,
        costs: CostStore | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.store = store
        #: How a message's session is keyed on its platform (docs/design.md#session-keys).
        self.platforms = platforms
        self.sessions = sessions
        self.lanes = lanes
        self.reply = reply
        #: Why a session's window is not the configured one ("" when it is): /status says.
        self.window_note = window_note
        #: Answers /pair; None: pairing is not wired and /pair is no command.
        self.pairing = pairing
        self.background = BackgroundTasks("commands")
        #: /memory and /forget, and the memory block /status and /context count.
        self.memory = memory
        #: /model and /tools (docs/design.md#model-choice, #mcp-tools).
        self.models = models
        self.tools = tools
        #: What calls cost, for /usage and /status (docs/cost.md#what-people-see).
        self.costs = costs
        self.budgets = budgets or Budgets()

    def handles(self, name: str) -> bool:
        """Whether ``name`` is a command here (docs/design.md#commands): one of the
        registry's, an owner's only when pairing is wired."""
        found = command(name)
        return found is not None and (found.who != "owner" or self.pairing is not None)

    async def __call__(self, message: InboundMessage, name: str, argument: str) -> Answer:
        """Run the command ``name`` (one that :meth:`handles`)."""
        key = self.platforms.session_key(message)
        found = command(name)
        name = found.name if found is not None else name
        if name == "pair" and self.pairing is not None:
            return Answer(await self.pairing.command(message, argument))
        if name == "new":
            self._in_background(message, self.reset(key))
            return LATER
        if name == "compress":
            self._in_background(message, self.compress(key, argument or None))
            return LATER
        if self.memory is not None and self.memory.handles(name):
            return Answer(await self.memory(message, name, argument))
        if name == "status":
            return Answer(await self.status(key))
        if name == "context":
            summary = argument.lower().startswith("summ")
            return Answer(await self.context(key, show_summary=summary))
        if name == "usage":
            return Answer(await self.usage(key, message))
        if name == "model" and self.models is not None:
            if not argument:
                return Answer(await self.models.show(key))
            self._in_background(message, self.models.switch(key, argument))
            return LATER
        if name == "tools" and self.tools is not None:
            return Answer(await self.tools(key))
        return Answer(HELP)

    def _in_background(self, message: InboundMessage, work: Awaitable[str]) -> None:
        async def run() -> None:
            try:
                text = await work
            except Exception:  # the user must hear back even when compression breaks
                log.exception("command failed in %s", self.platforms.session_key(message))
                text = "That didn't work — something went wrong on my side. Nothing was changed."
            await self.reply(message, text)

        self.background.spawn(run())

    async def reset(self, key: str) -> str:
        """``/new`` in the session's lane: a reply being written finishes in the old one."""

        async def job() -> str:
            if await self.sessions.reset(key) is None:
                return "Starting fresh."
            return "Started a new conversation. The previous one is archived, not deleted."

        return await self.lanes.submit(key, job)

    async def compress(self, key: str, focus: str | None) -> str:
        async def job() -> str:
            runtime = await self.sessions.existing(key)
            if runtime is None:
                return NOTHING_TO_COMPRESS
            transcript = await self.sessions.transcript(runtime)
            if len(transcript.messages) < 4:
                return NOTHING_TO_COMPRESS
            result = await transcript.compress(trigger_source="manual", focus=focus, force=True)
            if not result.committed:
                if result.failure_class in (
                    "too_few_messages",
                    "nothing_new",
                    "blocked:ineffective",
                ):
                    return NOTHING_TO_COMPRESS
                return result.notice or (
                    "I couldn't compress the conversation just now; nothing was changed. "
                    "Please try again in a moment."
                )
            return (
                f"Compressed: {result.messages_before} → {result.messages_after} messages, "
                f"{result.tokens_before:,} → {result.tokens_after:,} tokens. "
                "Older messages are archived and still searchable."
            )

        return await self.lanes.submit(key, job)

    async def fullness(self, runtime: SessionRuntime) -> tuple[SessionTranscript, Fullness]:
        """How full the session's context is (docs/design.md#fullness): the one number
        ``/status``, ``/context`` and the dashboard show."""
        transcript = await self.sessions.transcript(runtime)
        memories = self.memory.memories if self.memory is not None else None
        block = await next_memory_block(memories, runtime)
        return transcript, measure_fullness(runtime, transcript, block)

    async def status(self, key: str) -> str:
        runtime = await self.sessions.existing(key)
        if runtime is None:  # what a first message will talk to, before there is one
            current = await self.models.current(key, with_source=True) if self.models else ""
            model = f"\nModel: {current}" if current else ""
            return f"No conversation yet. Say something!{model}"
        transcript, fullness = await self.fullness(runtime)
        engine = runtime.engine
        provider = runtime.agent.provider
        busy = " · a reply is being written" if self.lanes.busy(key) else ""
        note = self.window_note(runtime) if self.window_note is not None else ""
        learned = f" ({note})" if note else ""
        model = model_label(provider.model, provider.name, provider.base_url)
        chosen = await self.models.chosen(key) if self.models else None
        return "\n".join(
            [
                f"Model: {f'{chosen} — ' if chosen else ''}{model} · "
                f"window {fullness.window:,} tokens{learned}",
                f"Context: {fullness.phrase}, {fullness.how} · "
                f"{len(transcript.messages)} message{'s' * (len(transcript.messages) != 1)} "
                f"active{busy}",
                f"Compresses at {engine.threshold_tokens:,} tokens · "
                f"compressions so far: {engine.compression_count}",
                f"Cooldown: {describe_cooldown(engine.export_state())}",
            ]
            + ([await today_line(self.costs, key)] if self.costs is not None else [])
        )

    async def context(self, key: str, *, show_summary: bool) -> str:
        runtime = await self.sessions.existing(key)
        if runtime is None:
            return "No conversation yet."
        _, fullness = await self.fullness(runtime)
        window = fullness.window
        lines = [f"Context window: {window:,} tokens"]
        for name, tokens in fullness.parts.items():
            lines.append(f"{name:<12} {bar(tokens, window)} {tokens:>8,}")
        lines.append(f"{'total':<12} {bar(fullness.tokens, window)} {fullness.tokens:>8,}")
        text = "```\n" + "\n".join(lines) + "\n```"
        text += f"\nIn use: {fullness.phrase}, {fullness.how}."
        if show_summary:
            text += "\n\n" + (
                fullness.summary or "There is no summary yet: nothing was compressed."
            )
        elif fullness.summary:
            text += "\nSend /context summary to read the current summary."
        return text

    async def usage(self, key: str, message: InboundMessage | None = None) -> str:
        record = await self.store.current_session(key)
        lines = []
        if record is not None:
            u = record.usage
            lines.append(
                f"This conversation's replies: {u.requests:,} model"
                f" call{'s' * (u.requests != 1)} ·"
                f" {u.prompt_tokens:,} tokens in "
                f"({u.cache_read_tokens:,} read from cache, {u.cache_write_tokens:,} written "
                f"to it) · {u.completion_tokens:,} tokens out"
            )
        if self.costs is not None:
            lines += await usage_lines(
                self.costs,
                key,
                message.platform if message else "",
                message.user_id if message else "",
                group=message is not None and message.chat_type not in PRIVATE_CHAT_TYPES,
                conversation_since=record.created_at if record is not None else None,
                budgets=self.budgets,
            )
        return "\n".join(lines) if lines else "No conversation yet."


def bar(tokens: int, window: int, width: int = 20) -> str:
    filled = 0 if window <= 0 else min(width, round(width * tokens / window))
    return "█" * filled + "░" * (width - filled)


def describe_cooldown(state: JSON) -> str:
    until = state.get("cooldown_until")
    if not until or until <= time.time():
        return "none"
    left = int(until - time.time())
    reason = state.get("cooldown_reason") or "a failed summary"
    return f"{left // 60}m{left % 60:02d}s left (after {reason})"
