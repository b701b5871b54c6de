"""The turn runner: inbox → active history → hygiene → agent → one commit → delivery.

``drain(key)`` is what a session's lane calls. It takes everything waiting in the inbox;
if none of it is addressed to the bot (observed group chatter) the rows are simply
appended; otherwise they become one user turn (docs/design.md#lanes: queued messages merge).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any

from adapters.base import Adapter, DeliveryError, OutboundMessage
from agent.cost.budget import Budgets
from agent.memory import MemoryBlock
from agent.providers.base import ProviderError
from agent.providers.errors import NO_ROOM, NO_SUCH_MODEL
from agent.tools import ToolContext
from agent.turn_result import CUT_SHORT, EMPTY_ANSWER, CompressionExhausted, TurnResult
from agent.usage_anchor import UsageAnchor, anchored_tokens
from gateway.conversation.hygiene import HygieneOutcome
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.transcript import SessionTranscript, report_failed_compression
from gateway.cost.meter import BudgetRefused, BudgetStopped, CostMeter
from gateway.cost.payer import paying, person_of
from gateway.events import EventBus, MessageSent, TurnEnded, TurnFailed
from gateway.memory.scopes import ChatMemory, Memories
from gateway.provider_events import ReportedProvider
from gateway.runtime import SessionRuntime
from gateway.store import (
    ConversationStore,
    CostStore,
    InboxEntry,
    PendingDelivery,
    SessionOrigin,
)

log = logging.getLogger(__name__)
#: A turn's memory and the block its first request carries (None: too small a window).
TurnMemory = tuple[ChatMemory, MemoryBlock | None]

#: Runs before the agent with the loaded transcript; may compact it (docs/design.md#hygiene).
HygieneStep = Callable[
    [SessionRuntime, SessionTranscript, UsageAnchor | None], Awaitable[HygieneOutcome]
]


class TurnRunner:
    def __init__(
        self,
        store: ConversationStore,
        sessions: SessionRegistry,
        events: EventBus,
        adapters: dict[str, Adapter],
        *,
        cache_ttl: Callable[[str], str | None] = lambda source: None,
        hygiene: HygieneStep | None = None,
        timezone: str = "UTC",
        memories: Memories | None = None,
        before_turn: Callable[[SessionRuntime], Awaitable[None]] | None = None,
        costs: CostStore | None = None,
        meter: CostMeter | None = None,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.events = events
        self.adapters = adapters
        self.cache_ttl = cache_ttl
        self.hygiene = hygiene
        self.timezone = timezone
        #: Long-term memory (docs/design.md#memory); None: memory is off.
        self.memories = memories
        #: Run before each turn's first request (the summary model's window, asked again).
        self.before_turn = before_turn
        #: Where a message a budget refused is kept (docs/cost.md#budgets).
        self.costs = costs
        #: The budgets each person is judged by before a turn (docs/cost.md#budgets).
        self.meter = meter

    async def drain(self, key: str) -> None:
        waiting = await self.store.waiting(key)
        if waiting.replies:  # an answer lost to an outage goes first
            await self._redeliver(waiting.replies)
            waiting = await self.store.waiting(key)  # what came meanwhile joins this turn
        entries = waiting.inbox
        if not entries:
            return
        runtime = await self.sessions.open_current(_origin(entries[-1]), waiting.session)
        found = waiting.session is not None and waiting.session.id == runtime.id
        transcript = await self.sessions.transcript(
            runtime, entries, waiting.history if found else None
        )
        if not any(entry.addressed for entry in entries):
            await (
                transcript.store_observed()
            )  # group chatter: rows, no turn (docs/design.md#groups)
            return
        await self.run_turn(runtime, transcript, entries)

    async def run_turn(
        self, runtime: SessionRuntime, transcript: SessionTranscript, entries: list[InboxEntry]
    ) -> TurnResult:
        """Answer ``entries``. Each person who addressed the bot is judged by their own
        budget first: an over-budget person's messages are refused, the rest answered
        (docs/cost.md#a-batch-of-several-people). The turn's model calls are the chat's,
        and the person's when one person addressed the bot."""
        with paying(runtime.key):  # the chat's, until the people are judged
            entries, memory = await self._refuse_over_budget(runtime, transcript, entries)
        addressed = [e for e in entries if e.addressed]
        if not addressed:
            return TurnResult(messages=transcript.messages)
        people = {person_of(e.platform, e.user_id) for e in addressed}
        person = people.pop() if len(people) == 1 else None
        with paying(runtime.key, person):
            return await self._turn(runtime, transcript, entries, addressed[-1], memory)

    async def _memory(
        self, runtime: SessionRuntime, entries: list[InboxEntry]
    ) -> TurnMemory | None:
        """The turn's memory and the block its first request carries (None: memory off)."""
        if self.memories is None:
            return None
        memory = self.memories.for_turn(runtime.key, entries, runtime.id)
        return memory, await memory.block(runtime.agent.window)

    async def _refuse_over_budget(
        self, runtime: SessionRuntime, transcript: SessionTranscript, entries: list[InboxEntry]
    ) -> tuple[list[InboxEntry], TurnMemory | None]:
        """Before hygiene, its flush or any call: each person's budgets (theirs, the
        chat's, the bot's) against what is spent and the first call's estimate. A refused
        person's addressed messages are kept refused, each answered with the sentence;
        the entries left to answer (observed ones included) are returned, with the turn's
        memory when it still holds (no one was refused, so "me" is unchanged). When no one
        is left, what remains is stored as observed rows (docs/cost.md#budgets)."""
        meter, costs = self.meter, self.costs
        if meter is None or costs is None or meter.budgets == Budgets():
            return entries, None
        agent = runtime.agent
        provider = agent.provider
        addressed = [e for e in entries if e.addressed]
        memory = await self._memory(runtime, entries)  # the block the first request carries
        block = memory[1] if memory is not None else None
        window = agent.window
        estimate = meter.estimate(
            "chat",
            provider,
            transcript.messages,
            max_tokens=window.max_output_tokens,
            tools=agent.tool_offer(memory=block is not None).offered(window),
            cache_ttl=self.cache_ttl(addressed[-1].platform),
            previous=provider.previous if isinstance(provider, ReportedProvider) else [],
            most_prompt_tokens=window.input_budget,
            extra_prompt_tokens=block.tokens if block is not None else 0,
            reply_room=window.max_tokens_for,  # what the request will ask for
        )
        whose = {e.id: person_of(e.platform, e.user_id) for e in addressed}
        refusals: dict[str | None, BudgetRefused] = {}
        for person in dict.fromkeys(whose.values()):
            try:
                await meter.judge(person, runtime.key, estimate, hold=False)
            except BudgetRefused as refused:
                refusals[person] = refused
        if not refusals:
            return entries, memory
        gone = [e for e in addressed if whose[e.id] in refusals]
        await transcript.commit_refused(costs.keep_refused, gone)
        for entry in gone:
            await self.deliver(_reply_to(entry), refusals[whose[entry.id]].sentence)
        taken = {e.id for e in gone}
        left = [e for e in entries if e.id not in taken]
        if not any(e.addressed for e in left):
            if transcript.waiting:
                await transcript.store_observed()
            self.events.emit(TurnEnded(runtime.id, runtime.key, 0, 0.0))
        return left, None

    async def _turn(
        self,
        runtime: SessionRuntime,
        transcript: SessionTranscript,
        entries: list[InboxEntry],
        target: InboxEntry,
        read: TurnMemory | None = None,
    ) -> TurnResult:
        """``read``: the turn's memory as the budget check read it, if it did."""
        started = time.perf_counter()
        compressed = False
        adapter = self.adapters.get(target.platform)
        anchor = transcript.restore_anchor()
        notices: list[str] = []
        # Before hygiene: the block counts in the window.
        memory, block = read or await self._memory(runtime, entries) or (None, None)
        if block is None:  # memory off, or a window too small for it (docs/design.md#memory-block)
            memory = None
        elif memory is not None:
            transcript.memory, transcript.memory_tokens = memory, block.tokens
        # The window the server really serves, before hygiene sizes a summary for it.
        await runtime.agent.prepare()
        self.sessions.follow_window(runtime)  # what the server just said applies now
        if self.before_turn is not None:
            await self.before_turn(runtime)
        if self.hygiene is not None:
            outcome = await self.hygiene(runtime, transcript, anchor)
            anchor = outcome.anchor
            compressed = outcome.compressed
            notices += [outcome.notice] if outcome.notice else []
            if outcome.compressed and memory is not None:  # what its flush kept shows now
                block = await memory.block(runtime.agent.window) or block
        context = ToolContext(
            transcript=transcript, source=target.platform, timezone=self.timezone, memory=memory
        )
        outbound = _reply_to(target)
        stream = adapter.open_stream(outbound) if adapter else None
        typing = adapter.typing(target.chat_id, target.thread_id) if adapter else nullcontext()
        try:
            async with typing:
                result = await self._run_agent(runtime, transcript, anchor, context, stream, block)
        except Exception:
            # A bug, not a provider failure: keep the user's rows, tell them, re-raise so
            # the lane logs it.
            await transcript.commit_turn(
                TurnResult(messages=transcript.messages), reply_pending=False
            )
            await self.deliver(
                outbound, "Sorry — something went wrong on my side. Please try again."
            )
            raise
        if (
            isinstance(result.error, BudgetRefused)
            and not result.requests
            and not any(attempt.committed for attempt in result.compressions)
            and not compressed
            and self.costs is not None
        ):  # no model saw the messages: kept, never sent later (docs/cost.md#budgets)
            await transcript.commit_refused(
                self.costs.keep_refused, [e for e in entries if e.addressed]
            )
            if transcript.waiting:  # observed chatter of the batch stays in the history
                await transcript.store_observed()
            await self.deliver(outbound, result.error.sentence, stream=stream)
            elapsed = round(time.perf_counter() - started, 3)
            self.events.emit(TurnEnded(runtime.id, runtime.key, 0, elapsed))
            return result
        ids = await transcript.commit_turn(result, reply_pending=result.reply is not None)
        runtime.turns += 1
        for attempt in result.compressions:  # the agent's own, in its loop
            report_failed_compression(self.events, runtime, attempt)
        # The context's size now, reply included (docs/design.md#token-source).
        agent = runtime.agent
        size = anchored_tokens(
            result.anchor, result.messages, agent.provider.route, estimate=agent.represented
        )
        if result.anchor is not None and size is not None:
            runtime.last_prompt_tokens = size
            runtime.last_prompt_rows = result.anchor.covered
        for notice in notices + result.notices:
            await self.deliver(outbound, notice)
        if result.error is not None:
            self.events.emit(TurnFailed(runtime.id, runtime.key, result.error.kind))
            # A draft streamed before the failure becomes the explanation.
            await self.deliver(outbound, describe_provider_error(result.error), stream=stream)
        else:
            text = result.reply or EMPTY_ANSWER
            delivered = await self.deliver(outbound, text, stream=stream)
            if delivered:
                await self.store.mark_delivered(ids[-1:])
            if result.cut_short:
                await self.deliver(outbound, CUT_SHORT)
        elapsed = time.perf_counter() - started
        self.events.emit(TurnEnded(runtime.id, runtime.key, result.requests, round(elapsed, 3)))
        return result

    async def _run_agent(
        self,
        runtime: SessionRuntime,
        transcript: SessionTranscript,
        anchor: UsageAnchor | None,
        context: ToolContext,
        stream: Any,
        memory: MemoryBlock | None = None,
    ) -> TurnResult:
        on_text = on_retract = None
        if stream is not None:
            parts: list[str] = []

            async def on_text(delta: str) -> None:
                parts.append(delta)
                await stream.update("".join(parts))

            async def on_retract(chars: int) -> None:
                # A reply the agent discarded (docs/design.md#silent-truncation): the
                # draft shows what came before it, or a mark until the next text.
                kept = "".join(parts)[:-chars] if chars else "".join(parts)
                parts[:] = [kept]
                await stream.update(kept or "…")

        return await runtime.agent.run_turn(
            transcript.messages,
            transcript,
            anchor=anchor,
            context=context,
            on_text=on_text,
            cache_ttl=self.cache_ttl(context.source),
            memory=memory,
            on_retract=on_retract,
        )

    async def send(self, message: OutboundMessage) -> bool:
        """Hand ``message`` to its platform: the one way anything leaves the gateway
        (replies, notices, command answers, reminders), so hooks see every message:sent."""
        return await self.deliver(message, message.text)

    async def deliver(self, target: OutboundMessage, text: str, *, stream: Any = None) -> bool:
        """Send ``text`` to ``target``'s chat (finishing ``stream`` if a reply was
        streamed); False when the platform is missing or refused it (it is logged)."""
        adapter = self.adapters.get(target.platform)
        if adapter is None:
            log.warning(
                "no adapter for %s; message to %s kept for later", target.platform, target.chat_id
            )
            return False
        try:
            if stream is not None:
                await stream.finish(text)
            else:
                await adapter.send(_replace_text(target, text))
        except DeliveryError as exc:
            log.error("delivery to %s:%s failed: %s", target.platform, target.chat_id, exc)
            return False
        self.events.emit(MessageSent(target.platform, target.chat_id, len(text)))
        return True

    async def redeliver_pending(self, session_key: str) -> int:
        """Send replies stored but not delivered (a crash, a platform outage), in order.

        Runs in the session's lane, so it never races the turn that wrote them.
        """
        return await self._redeliver(await self.store.pending_deliveries(session_key))

    async def _redeliver(self, replies: list[PendingDelivery]) -> int:
        sent = 0
        for pending in replies:
            target = OutboundMessage(
                platform=pending.platform,
                chat_id=pending.chat_id or "",
                thread_id=pending.thread_id,
                text=pending.text,
                reply_to_message_id=pending.reply_to,
            )
            if pending.platform not in self.adapters or not await self.deliver(
                target, pending.text
            ):
                break  # keep the order: later replies wait behind this one
            await self.store.mark_delivered([pending.message_id])
            sent += 1
        return sent


def _origin(entry: InboxEntry) -> SessionOrigin:
    return SessionOrigin(
        session_key=entry.session_key,
        platform=entry.platform,
        chat_id=entry.chat_id,
        thread_id=entry.thread_id,
        user_id=entry.user_id,
    )


def _reply_to(entry: InboxEntry) -> OutboundMessage:
    return OutboundMessage(
        platform=entry.platform,
        chat_id=entry.chat_id,
        thread_id=entry.thread_id,
        text="",
        reply_to_message_id=entry.platform_message_id,
    )


def _replace_text(target: OutboundMessage, text: str) -> OutboundMessage:
    return OutboundMessage(
        platform=target.platform,
        chat_id=target.chat_id,
        text=text,
        thread_id=target.thread_id,
        reply_to_message_id=target.reply_to_message_id,
    )


def describe_provider_error(error: ProviderError | CompressionExhausted) -> str:
    """One secret-free sentence telling the user what happened and what to do."""
    if isinstance(error, BudgetStopped):  # refused, or the budget could not be checked
        return error.sentence
    if isinstance(error, CompressionExhausted):
        return (
            "This conversation no longer fits the model's context window, even after "
            "summarizing it. Send /compress to try again, or /new to start fresh."
        )
    if error.detail == NO_ROOM:
        return (
            "The model's window is too small for this bot's instructions, tools and the "
            "newest part of this conversation, so nothing was asked. The bot's owner needs "
            "to give the model a larger window."
        )
    if error.detail == NO_SUCH_MODEL:
        return (
            "The model server doesn't have the model this bot is set to use. The bot's "
            "owner needs to fix the model's name."
        )
    wait = f" in about {int(error.retry_after) + 1} s" if error.retry_after else " in a minute"
    return {
        "rate_limit": f"The model provider is rate-limiting us. Please try again{wait}.",
        "overloaded": f"The model provider is overloaded right now. Please try again{wait}.",
        "auth": "The model provider rejected our credentials. The bot's owner needs to check the API key.",
        "timeout": "The model took too long to answer. Please try again.",
        "network": "I can't reach the model provider right now. Please try again shortly.",
        "overflow": "This conversation is too long for the model. Send /compress or /new.",
    }.get(error.kind, "The model provider returned an error. Please try again.")
