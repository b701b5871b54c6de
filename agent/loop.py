"""The agent's tool loop: one user turn, bounded iterations, compression at its gates.

Per iteration: the compression gate (docs/design.md#gates) → one provider call sized so prompt +
max_tokens fits the window (docs/design.md#output-reserve) → the reply appended → tool calls run and their results
appended. Every response's usage calibrates the estimate (docs/design.md#calibration),
and one whose prompt the server plainly cut is treated as an overflow
(docs/design.md#silent-truncation). Every call streams, shown or not
(docs/design.md#slow-models). An overflow teaches the window and the server's count;
the request is retried with a smaller reply when the server's numbers say that fits, else
compressed and retried, a bounded number of times (docs/design.md#overflow-recovery). No
context-pressure warning is ever put in the prompt (docs/design.md#nothing-leaves-unsummarized).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from agent.calibration import Calibration, Calibrations
from agent.context_engine import ContextEngine
from agent.lean_tools import ToolOffer
from agent.memory import MemoryBlock, with_block
from agent.messages import Message, ToolSchema
from agent.model_metadata import ContextLengthResolver
from agent.next_request import next_request_tokens
from agent.providers.base import Completion, Provider, ProviderError, TextCallback, Usage
from agent.providers.errors import NO_ROOM, local_failure
from agent.silent_cut import StreamedChars, cut_error, least_count
from agent.tokens import estimate_schemas_tokens_rough
from agent.tools import ToolBox, ToolContext
from agent.transcript import Transcript
from agent.turn_result import (
    EMPTY_ANSWER,
    CompressionExhausted,
    RetractCallback,
    TurnResult,
    is_empty,
)
from agent.usage_anchor import UsageAnchor, build_anchor
from agent.window import FittedRequest, Window, fit_request, represented_tokens
from agent.window_lessons import WindowLessons

log = logging.getLogger(__name__)


class Agent:
    """Runs turns for one session against one provider and context engine."""

    def __init__(
        self,
        provider: Provider,
        engine: ContextEngine,
        toolbox: ToolBox,
        *,
        max_iterations: int = 12,
        max_output_tokens: int = 4096,
        max_compression_attempts: int = 3,
        windows: ContextLengthResolver | None = None,
        calibration: Calibration | None = None,
        calibrations: Calibrations | None = None,
        lean_share: float = 0.20,
    ) -> None:
        self.provider = provider
        self.engine = engine
        self.toolbox = toolbox
        self.max_iterations = max_iterations
        self.max_output_tokens = max_output_tokens
        self.max_compression_attempts = max_compression_attempts
        self.windows = windows
        #: Past this share of the window, tool schemas are found, not all sent
        #: (docs/design.md#lean-tools).
        self.lean_share = lean_share
        #: How the server counts against the estimate (docs/design.md#calibration); the
        #: latest per model route is kept in ``calibrations`` for sessions that start.
        self.calibrations = calibrations
        self.calibration = calibration or (
            calibrations.prior(provider.route) if calibrations else Calibration()
        )
        engine.calibrate(self.calibration.ratio)

    async def run_turn(
        self,
        messages: list[Message],
        transcript: Transcript,
        *,
        anchor: UsageAnchor | None = None,
        context: ToolContext | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        memory: MemoryBlock | None = None,
        on_retract: RetractCallback | None = None,
    ) -> TurnResult:
        """Answer the user messages at the end of ``messages`` (appending to a copy).

        ``memory`` goes into every request right after the system prompt and counts in
        the window like the tool schemas (docs/design.md#memory-block). ``on_retract``
        takes back text ``on_text`` streamed of a reply that is then discarded (its
        prompt was cut by the server, docs/design.md#silent-truncation).
        """
        await self.prepare()
        turn = _Turn(self, list(messages), transcript, anchor, on_text, cache_ttl)
        turn.on_retract = on_retract
        turn.memory = memory
        turn.offer = self.tool_offer(memory=memory is not None)
        context = context or ToolContext(transcript=transcript)
        try:
            await turn.run(context)
        except (ProviderError, CompressionExhausted) as exc:
            turn.result.error = exc
        return turn.result

    # -- shared arithmetic ----------------------------------------------------------------

    def tool_schemas(self) -> list[ToolSchema]:
        return self.toolbox.schemas() + list(self.engine.tools())

    def tool_offer(self, *, memory: bool) -> ToolOffer:
        """What a turn offers of its tools (docs/design.md#lean-tools)."""
        return ToolOffer.of(self.tool_schemas(), self.lean_share, memory=memory)

    @property
    def window(self) -> Window:
        """The window now (a limit learned from an overflow counts at once), scaled to how
        this server counts, with the margin its misses call for (docs/design.md#calibration)."""
        bare = Window(self.engine.context_length, self.max_output_tokens)
        calibration = self.calibration
        return Window(
            bare.context_length,
            bare.max_output_tokens,
            calibration.ratio,
            calibration.margin(bare.input_budget),
            calibration.prompt_miss,
        )

    def represented(self, messages: Sequence[Message]) -> int:
        """Server tokens of ``messages`` as a request shows them (oversized rows as
        excerpts), by the calibrated estimate."""
        return represented_tokens(messages, self.window)

    async def prepare(self) -> None:
        """Before the first request to a server whose window is not known yet (a model it
        has not loaded): have it load the model and say what it serves, so no request is
        sized for a window it does not serve (docs/design.md#served-window)."""
        await WindowLessons(self).ask_if_due(load=True)

    def observe(self, estimate: int, reported: int) -> None:
        """A server counted ``reported`` tokens for a prompt estimated at ``estimate``."""
        before = self.calibration.ratio
        self.calibration = self.calibration.observed(estimate, reported)
        if self.calibration.ratio != before:
            self.engine.calibrate(self.calibration.ratio)
        if self.calibrations is not None:
            self.calibrations.remember(self.provider.route, self.calibration)


class _Turn:
    """The state of one turn; exists so the loop reads top to bottom."""

    def __init__(
        self,
        agent: Agent,
        messages: list[Message],
        transcript: Transcript,
        anchor: UsageAnchor | None,
        on_text: TextCallback | None,
        cache_ttl: str | None,
    ) -> None:
        self.agent = agent
        self.engine = agent.engine
        self.transcript = transcript
        self.anchor = anchor
        self.on_text = on_text
        self.cache_ttl = cache_ttl
        self.result = TurnResult(messages=messages, anchor=anchor)
        #: Every tool the turn may call, and what a request offers of them on its window
        #: (docs/design.md#lean-tools).
        self.offer = agent.tool_offer(memory=True)
        self.memory: MemoryBlock | None = None
        self.on_retract: RetractCallback | None = None
        #: The request last sent: an overflow's numbers are about it.
        self.sent: FittedRequest | None = None
        self.lessons = WindowLessons(agent)
        #: Estimated tokens beside the messages (schemas, memory) of the last request answered.
        self.overhead_sent = 0
        # Defer-to-real-usage (docs/design.md#gates): with no anchor, an estimate over the threshold waits
        # for one real response before it may trigger compression.
        self.may_defer = anchor is None

    @property
    def messages(self) -> list[Message]:
        return self.result.messages

    @property
    def schemas(self) -> list[ToolSchema]:
        """The tool schemas the next request offers, on the window as it is now."""
        return self.offer.offered(self.agent.window)

    @property
    def schema_tokens(self) -> int:
        return estimate_schemas_tokens_rough(self.schemas)

    async def run(self, context: ToolContext) -> None:
        trigger = "turn_start_threshold"
        retried_empty = False
        for iteration in range(self.agent.max_iterations):
            await self.gate(trigger)
            last = iteration == self.agent.max_iterations - 1
            completion = await self.call_with_recovery(tools=not last)
            if is_empty(completion) and not retried_empty:
                # An empty answer is asked for once more (docs/design.md#empty-answer); it
                # is counted, never stored.
                retried_empty = True
                self.record(completion)
                self.messages.pop()
                self.anchor = self.result.anchor = None
                completion = await self.call_with_recovery(tools=not last)
            if is_empty(completion):
                completion = replace(completion, text=EMPTY_ANSWER)
            self.record(completion)
            if not completion.tool_calls:
                self.result.reply = completion.text
                self.result.cut_short = completion.finish_reason == "length"
                return
            await self.run_tools(completion, context)
            trigger = "post_tool"
        # Out of steps with tool calls still pending: the last request offered no tools,
        # so this only happens with a server that ignores that.
        self.result.reply = completion.text or "(I stopped after too many steps.)"

    # -- compression ----------------------------------------------------------------------

    def prompt_tokens(self) -> tuple[int, bool]:
        """Tokens the next request will carry, and whether a provider count backs them."""
        memory = self.memory.tokens if self.memory is not None else 0
        agent = self.agent
        return next_request_tokens(
            self.messages,
            agent.window,
            agent.provider.route,
            anchor=self.anchor,
            overhead=self.schema_tokens + memory,
        )

    async def gate(self, trigger: str) -> None:
        tokens, real = self.prompt_tokens()
        if not self.engine.should_compress(tokens):
            return
        if not real and self.may_defer:
            log.debug(
                "estimate %d over threshold without real usage; deferring one request", tokens
            )
            return
        await self.compress(trigger)

    async def compress(self, trigger: str) -> bool:
        result = await self.engine.compress(self.messages, trigger_source=trigger)
        self.result.compressions.append(result)
        await self.transcript.save_engine_state(self.engine.export_state())
        if not result.committed:
            return False
        self.result.messages = await self.transcript.commit_compression(result, self.messages)
        self.anchor = self.result.anchor = None
        return True

    # -- provider calls -------------------------------------------------------------------

    async def call_with_recovery(self, *, tools: bool) -> Completion:
        attempts = 0
        retry: FittedRequest | None = None
        while True:
            try:
                return await self.call(tools=tools, retry=retry)
            except ProviderError as exc:
                if exc.kind == "network":
                    self.lessons.note_unreachable()
                if exc.kind != "overflow":
                    raise
                attempts += 1
                if attempts > self.agent.max_compression_attempts:
                    raise CompressionExhausted(
                        "the conversation still exceeds the model's window", status=exc.status
                    ) from exc
                if exc.detail == NO_ROOM:  # nothing sent: no server to learn from
                    # A summary of a long tool loop may make room; a short conversation
                    # has nothing to summarize (docs/design.md#no-room).
                    if not await self.compress("overflow"):
                        raise
                    continue
                learned = await self.learn(exc)
                # Once per request: the prompt fits, a smaller reply does
                # (docs/design.md#overflow-recovery); a second refusal compresses.
                retry = None if retry is not None else self.lessons.smaller_reply(exc, self.sent)
                if retry is not None:
                    continue
                before, _ = self.prompt_tokens()
                if not await self.compress("overflow"):
                    if learned:
                        continue  # the request view fits what was learned
                    raise
                after, _ = self.prompt_tokens()
                if after >= before and not learned:  # another pass would not help
                    raise CompressionExhausted(
                        "compression made no progress", status=exc.status
                    ) from exc

    async def learn(self, exc: ProviderError) -> bool:
        window = self.engine.context_length
        learned = await self.lessons.learn(exc, self.sent)
        if self.engine.context_length != window:
            self.anchor = None  # counts against the old window no longer decide anything
        return learned

    async def call(self, *, tools: bool, retry: FittedRequest | None = None) -> Completion:
        """One provider call with a request that fits the window, whatever the rows hold
        (``retry``: the same messages again, with the smaller reply it asks for)."""
        offered = self.schemas if tools and self.schemas else None
        memory = self.memory
        overhead = (self.schema_tokens if offered else 0) + (
            memory.tokens if memory is not None else 0
        )
        agent = self.agent
        request = retry or fit_request(self.messages, agent.window, overhead_tokens=overhead)
        if request.starved and offered:
            # The tools are what a window too small for everything loses first: a reply
            # without them beats none (docs/design.md#no-room).
            bare = overhead - self.schema_tokens
            lean = fit_request(self.messages, agent.window, overhead_tokens=bare)
            if not lean.starved:
                log.info("tools left out of a request: the window has no room for them")
                offered, overhead, request = None, bare, lean
        if request.starved:
            raise self.no_room(overhead)
        if request.excerpted or request.left_out:
            cut = (request.excerpted, request.left_out)
            log.info("request fitted to the window: %d row(s) as excerpts, %d left out", *cut)
        self.sent = request
        route = agent.provider.route
        at_least = least_count(
            self.anchor, self.messages, route, request, agent.window, overhead, agent.represented
        )
        # Always streamed: the timeout bounds silence, not length (docs/design.md#slow-models).
        streamed = StreamedChars(self.on_text)
        completion = await agent.provider.complete(
            with_block(request.messages, memory.message if memory is not None else None),
            max_tokens=request.max_tokens,
            tools=offered,
            on_text=streamed,
            cache_ttl=self.cache_ttl,
        )
        self.may_defer = False
        await self.lessons.ask_if_due()
        usage = completion.usage
        if usage is not None and await self.lessons.was_cut(request, usage, at_least):
            await self.discard(completion, streamed.chars)
            raise cut_error(agent.provider.name, request, usage)
        if usage is not None and not request.images:  # an image's estimate is a flat guess
            agent.observe(request.estimate, usage.prompt_tokens)
        self.overhead_sent = overhead
        return completion

    def no_room(self, overhead: int) -> ProviderError:
        """The error a starved request is (never sent): its words are for the log."""
        agent = self.agent
        # In the server's tokens already (the calibrated estimate), as the overhead is not.
        system = sum(agent.represented([m]) for m in self.messages if m.get("role") == "system")
        window = agent.window
        log.warning(
            "%s: a window of %s tokens leaves no room for the conversation beside the system"
            " prompt, tools and memory (about %s tokens, %s kept for the reply): nothing was"
            " sent; give the model a larger window (its server's setting, then"
            " model.context_length)",
            agent.provider.model,
            f"{window.context_length:,}",
            f"{system + window.real(overhead):,}",
            f"{window.output_reserve:,}",
        )
        return local_failure(
            agent.provider.name,
            "overflow",
            "the window has no room for the conversation",
            detail=NO_ROOM,
        )

    async def discard(self, completion: Completion, streamed_chars: int) -> None:
        """A reply to a prompt the server cut is never shown (docs/design.md#silent-truncation):
        what was streamed of it is taken back; its tokens still count in the totals."""
        log.warning(
            "%s cut a prompt of about %d tokens to %d without saying so; learning its window",
            self.agent.provider.model,
            self.sent.prompt_tokens if self.sent else 0,
            completion.usage.prompt_tokens if completion.usage else 0,
        )
        self.count_usage(completion.usage)
        if streamed_chars and self.on_retract is not None:
            await self.on_retract(streamed_chars)

    def record(self, completion: Completion) -> None:
        self.messages.append(completion.as_message())
        usage = completion.usage
        if usage is not None:
            self.engine.update_from_response(usage)
        self.count_usage(usage)
        # A view that left rows out counts less than the rows (docs/design.md#request-view).
        if usage is None or (self.sent is not None and self.sent.left_out > 0):
            self.anchor = self.result.anchor = None
            return
        self.anchor = self.result.anchor = build_anchor(
            usage,
            self.messages,
            self.agent.provider.route,
            self.agent.calibration.ratio,
            self.overhead_sent,
        )

    def count_usage(self, usage: Usage | None) -> None:
        """One more request in the turn's totals (its tokens, when reported)."""
        self.result.requests += 1
        if usage is None:
            return
        total = self.result.usage
        self.result.usage = Usage(
            total.prompt_tokens + usage.prompt_tokens,
            total.completion_tokens + usage.completion_tokens,
            total.cache_read_tokens + usage.cache_read_tokens,
            total.cache_write_tokens + usage.cache_write_tokens,
        )

    # -- tools ----------------------------------------------------------------------------

    async def run_tools(self, completion: Completion, context: ToolContext) -> None:
        for call in completion.tool_calls:
            # text, or text and images (docs/design.md#mcp-results)
            output = await self.offer.answer(
                call.name, call.parsed_arguments(), self.engine, self.agent.toolbox, context
            )
            self.messages.append(
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output}
            )
