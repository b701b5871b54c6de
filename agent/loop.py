"""The agent's tool loop: one user turn, bounded iterations, compression at its gates.

Per iteration: the compression gate (docs/design.md#gates) → one provider call sized so prompt +
max_tokens fits the window (docs/design.md#output-reserve) → the reply appended → tool calls run and their results
appended. A provider overflow compresses and retries the same request, a bounded number
of times, and stops when a pass makes no progress (docs/design.md#overflow-recovery). No context-pressure warning is
ever put in the prompt (docs/design.md#nothing-leaves-unsummarized).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.context_engine import CompressionResult, ContextEngine
from agent.memory import TOOL_NAMES, MemoryBlock, with_block
from agent.model_metadata import ContextLengthResolver
from agent.providers.base import Completion, Provider, ProviderError, TextCallback, Usage
from agent.tokens import estimate_json_tokens_rough
from agent.tools import ToolBox, ToolContext, ToolOutput
from agent.transcript import Transcript
from agent.usage_anchor import UsageAnchor, anchored_tokens, build_anchor
from agent.window import FittedRequest, Window, fit_request, represented_tokens
from nightowl_errors import NightowlError

log = logging.getLogger(__name__)

#: How far above the rough estimate a provider's real prompt counts are believed to run.
MAX_TOKEN_SCALE = 4.0


@dataclass
class TurnResult:
    """What a turn produced. ``messages`` is the whole conversation after it."""

    messages: list[dict[str, Any]]
    reply: str | None = None
    error: ProviderError | CompressionExhausted | None = None
    anchor: UsageAnchor | None = None
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    compressions: list[CompressionResult] = field(default_factory=list)

    @property
    def notices(self) -> list[str]:
        return [c.notice for c in self.compressions if c.notice]


#: What the user gets when the model answered nothing twice (docs/design.md#empty-answer).
EMPTY_ANSWER = "The model returned an empty answer; please rephrase or try again."


def is_empty(completion: Completion) -> bool:
    """No text worth showing and no tool call."""
    return not completion.tool_calls and not completion.text.strip()


class CompressionExhausted(NightowlError):
    """The window still overflows after every allowed compression attempt.

    Not a provider's failure: the provider did what it should (said the prompt is too
    long); nightowl could not make it fit. ``kind`` is what the ``agent:error`` event
    reports.
    """

    kind = "context_exhausted"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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
    ) -> None:
        self.provider = provider
        self.engine = engine
        self.toolbox = toolbox
        self.max_iterations = max_iterations
        self.max_output_tokens = max_output_tokens
        self.max_compression_attempts = max_compression_attempts
        self.windows = windows
        #: Real prompt tokens / rough estimate, from the last response (at least 1).
        self.token_scale = 1.0

    async def run_turn(
        self,
        messages: list[dict[str, Any]],
        transcript: Transcript,
        *,
        anchor: UsageAnchor | None = None,
        context: ToolContext | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        memory: MemoryBlock | None = None,
    ) -> TurnResult:
        """Answer the user messages at the end of ``messages`` (appending to a copy).

        ``memory`` goes into every request right after the system prompt and counts in
        the window like the tool schemas (docs/design.md#memory-block).
        """
        turn = _Turn(self, list(messages), transcript, anchor, on_text, cache_ttl)
        turn.memory = memory
        if memory is None:  # no memory this turn: its tools are not offered either
            turn.schemas = [s for s in turn.schemas if s["function"]["name"] not in TOOL_NAMES]
            turn.schema_tokens = estimate_json_tokens_rough(turn.schemas)
        context = context or ToolContext(transcript=transcript)
        try:
            await turn.run(context)
        except (ProviderError, CompressionExhausted) as exc:
            turn.result.error = exc
        return turn.result

    # -- shared arithmetic ----------------------------------------------------------------

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.toolbox.schemas() + list(self.engine.tools())

    @property
    def window(self) -> Window:
        """The window now (a limit learned from an overflow counts at once)."""
        return Window(self.engine.context_length, self.max_output_tokens)

    def represented(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Rough tokens of ``messages`` as a request shows them (oversized rows as excerpts)."""
        return represented_tokens(messages, self.window)


class _Turn:
    """The state of one turn; exists so the loop reads top to bottom."""

    def __init__(
        self,
        agent: Agent,
        messages: list[dict[str, Any]],
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
        self.schemas = agent.tool_schemas()
        self.schema_tokens = estimate_json_tokens_rough(self.schemas)
        self.memory: MemoryBlock | None = None
        # Defer-to-real-usage (docs/design.md#gates): with no anchor, an estimate over the threshold waits
        # for one real response before it may trigger compression.
        self.may_defer = anchor is None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.result.messages

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
                return
            await self.run_tools(completion, context)
            trigger = "post_tool"
        # Out of steps with tool calls still pending: the last request offered no tools,
        # so this only happens with a server that ignores that.
        self.result.reply = completion.text or "(I stopped after too many steps.)"

    # -- compression ----------------------------------------------------------------------

    def prompt_tokens(self) -> tuple[int, bool]:
        """Tokens the next request will carry, and whether a provider count backs them."""
        route = self.agent.provider.route
        if self.anchor is not None:
            anchored = anchored_tokens(
                self.anchor, self.messages, route, estimate=self.agent.represented
            )
            if anchored is not None:
                return anchored, True
        memory = self.memory.tokens if self.memory is not None else 0
        return self.agent.represented(self.messages) + self.schema_tokens + memory, False

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
        self.result.messages = await self.transcript.commit_compaction(result, self.messages)
        self.anchor = self.result.anchor = None
        return True

    # -- provider calls -------------------------------------------------------------------

    async def call_with_recovery(self, *, tools: bool) -> Completion:
        attempts = 0
        while True:
            try:
                return await self.call(tools=tools)
            except ProviderError as exc:
                if exc.kind != "overflow":
                    raise
                attempts += 1
                if attempts > self.agent.max_compression_attempts:
                    raise CompressionExhausted(
                        "the conversation still exceeds the model's window", status=exc.status
                    ) from exc
                self.learn_limit(exc)
                before, _ = self.prompt_tokens()
                if not await self.compress("overflow"):
                    raise
                after, _ = self.prompt_tokens()
                if after >= before:  # no-progress guard: another pass would not help
                    raise CompressionExhausted(
                        "compression made no progress", status=exc.status
                    ) from exc

    async def call(self, *, tools: bool) -> Completion:
        """One provider call with a request that fits the window, whatever the rows hold."""
        offered = self.schemas if tools and self.schemas else None
        memory = self.memory
        request = fit_request(
            self.messages,
            self.agent.window,
            overhead_tokens=(self.schema_tokens if offered else 0)
            + (memory.tokens if memory is not None else 0),
            scale=self.agent.token_scale,
        )
        if request.excerpted or request.left_out:
            log.info(
                "request fitted to the window: %d row(s) shown as excerpts, %d left out",
                request.excerpted,
                request.left_out,
            )
        completion = await self.agent.provider.complete(
            with_block(request.messages, memory.message if memory is not None else None),
            max_tokens=request.max_tokens,
            tools=offered,
            on_text=self.on_text,
            cache_ttl=self.cache_ttl,
        )
        self.may_defer = False
        self.learn_scale(request, completion)
        return completion

    def learn_scale(self, request: FittedRequest, completion: Completion) -> None:
        """Remember how far real counts run above the estimate, for the next fit."""
        if completion.usage is None or request.prompt_tokens <= 0:
            return
        ratio = completion.usage.prompt_tokens / (request.prompt_tokens / self.agent.token_scale)
        self.agent.token_scale = min(MAX_TOKEN_SCALE, max(1.0, ratio))

    def learn_limit(self, exc: ProviderError) -> None:
        limit = exc.context_limit
        if not limit or limit >= self.engine.context_length:
            return
        provider = self.agent.provider
        if self.agent.windows is not None:
            self.agent.windows.learn_limit(provider.model, provider.name, provider.base_url, limit)
        self.engine.update_model(provider.model, limit, provider.name)
        self.anchor = None  # counts against the old window no longer decide anything

    def record(self, completion: Completion) -> None:
        self.messages.append(completion.as_message())
        self.result.requests += 1
        if completion.usage is None:
            self.anchor = self.result.anchor = None
            return
        usage = completion.usage
        self.engine.update_from_response(usage)
        total = self.result.usage
        self.result.usage = Usage(
            total.prompt_tokens + usage.prompt_tokens,
            total.completion_tokens + usage.completion_tokens,
            total.cache_read_tokens + usage.cache_read_tokens,
            total.cache_write_tokens + usage.cache_write_tokens,
        )
        self.anchor = self.result.anchor = build_anchor(
            usage, self.messages, self.agent.provider.route
        )

    # -- tools ----------------------------------------------------------------------------

    async def run_tools(self, completion: Completion, context: ToolContext) -> None:
        engine_tools = {schema["function"]["name"] for schema in self.engine.tools()}
        for call in completion.tool_calls:
            arguments = call.parsed_arguments()
            output: ToolOutput  # text, or text and images (docs/design.md#mcp-results)
            if call.name in engine_tools:
                try:
                    output = await self.engine.call_tool(call.name, arguments)
                except Exception:  # a plugin's tool failing must not end the turn
                    log.exception("context engine tool %s failed", call.name)
                    output = f"Error: the tool {call.name} failed unexpectedly."
            else:
                output = await self.agent.toolbox.run(call.name, arguments, context)
            self.messages.append(
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output}
            )
