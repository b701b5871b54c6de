"""How full a chat's context is: one number, the same in ``/status``, ``/context`` and on
the dashboard (docs/design.md#fullness).

It is what the chat's next request would carry — the system prompt, the memory block, the
tool schemas as they would be offered (few, on a small window: docs/design.md#lean-tools),
the summary and the rows as the request view shows them — in the server's tokens, counted
as the agent's gates count it (:func:`agent.next_request.next_request_tokens`), of the
window the server serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.compression.markers import is_summary_message, text_of
from agent.memory import MemoryBlock
from agent.next_request import next_request_tokens
from agent.tokens import estimate_message_tokens_rough, estimate_schemas_tokens_rough
from agent.window import row_caps
from gateway.conversation.transcript import SessionTranscript
from gateway.memory.scopes import ChatMemory, Memories
from gateway.runtime import SessionRuntime


@dataclass(frozen=True)
class Fullness:
    """What the next request would carry, of the window the server serves."""

    #: Server tokens of the next request, before the next message.
    tokens: int
    window: int
    #: The server's count of the last request backs ``tokens`` (only the rows since are
    #: estimated); else all of it is the calibrated estimate.
    counted: bool
    #: ``tokens`` by part: system, tools, memory, summary, conversation. The parts are
    #: estimated; the conversation holds the rest of the count (the chat template's too).
    parts: dict[str, int]
    #: The current compression summary, if there is one.
    summary: str | None = None

    @property
    def percent(self) -> int:
        return round(100 * self.tokens / self.window) if self.window else 0

    @property
    def phrase(self) -> str:
        """The words every place that shows the number uses."""
        return f"{self.tokens:,} of {self.window:,} tokens ({self.percent}%)"

    @property
    def how(self) -> str:
        return "by the server's last count" if self.counted else "estimated"


def measure_fullness(
    runtime: SessionRuntime, transcript: SessionTranscript, memory: MemoryBlock | None
) -> Fullness:
    """The chat's fullness now, with ``memory`` the block its next turn would carry."""
    agent = runtime.agent
    window = agent.window
    messages = transcript.messages
    schemas = agent.tool_offer(memory=memory is not None).offered(window)
    tools = estimate_schemas_tokens_rough(schemas)
    block = memory.tokens if memory is not None else 0
    size = next_request_tokens(
        messages,
        window,
        agent.provider.route,
        anchor=transcript.restore_anchor(),
        overhead=tools + block,
    )
    rows = {"system": 0, "summary": 0, "conversation": 0}
    summary = None
    for message, cap in zip(messages, row_caps(messages, window), strict=True):
        tokens = min(estimate_message_tokens_rough(message), cap)  # as a request shows it
        if message.get("role") == "system":
            rows["system"] += tokens
        elif is_summary_message(message):
            rows["summary"] += tokens
            summary = text_of(message)
        else:
            rows["conversation"] += tokens
    parts = {
        "system": window.real(rows["system"]),
        "tools": window.real(tools),
        "memory": window.real(block),
        "summary": window.real(rows["summary"]),
    }
    parts["conversation"] = max(0, size.tokens - sum(parts.values()))
    return Fullness(size.tokens, window.context_length, size.counted, parts, summary)


async def next_memory_block(
    memories: Memories | None, runtime: SessionRuntime
) -> MemoryBlock | None:
    """The memory block the session's next turn would carry: its chat's notes, and in a
    private chat its person's too (docs/design.md#memory-scopes); None without memory."""
    if memories is None:
        return None
    record = runtime.record
    person = f"{record.platform}:{record.user_id}" if record.user_id else None
    memory = ChatMemory(
        memories.store,
        runtime.key,
        person,
        private=memories.platforms.is_private_chat(runtime.key),
        max_tokens=memories.max_tokens,
    )
    return await memory.block(runtime.agent.window)
