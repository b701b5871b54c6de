"""An instant, deterministic provider: ``nightowl replay --provider scripted``.

It needs no network and no key, and answers at once: a reply whose length varies with the
message (deterministically), a structured summary for the compressor's summary requests,
and usage counted like docs/design.md#tokens over everything sent (messages plus tool schemas), so
usage anchors, thresholds and compressions behave as they would with a real model of the
same window. It never calls tools.
"""

from __future__ import annotations

import re
import zlib

from agent.compression.markers import text_of
from agent.compression.summary import SYSTEM_PROMPT as SUMMARY_SYSTEM_PROMPT
from agent.messages import Message, ToolSchema
from agent.providers.base import Completion, Provider, TextCallback, Usage
from agent.tokens import estimate_json_tokens_rough, estimate_messages_tokens_rough

#: Replies are between these many words long.
REPLY_WORDS = (12, 90)
TURN_LINE = re.compile(r"^\[\d+\] (.+)$", re.MULTILINE)
FILLER = (
    "That fits with what was said earlier in the chat, and the details are noted so we "
    "can come back to them later if anyone asks about the plan or the numbers again"
).split()


class ScriptedProvider(Provider):
    """Answers every request instantly; see the module docstring."""

    name = "scripted"

    def __init__(self, model: str = "scripted", base_url: str | None = None) -> None:
        self.model = model
        self.base_url = base_url
        self.requests = 0

    async def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        tools: list[ToolSchema] | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        timeout: float | None = None,  # the Provider ABC fixes this signature
    ) -> Completion:
        self.requests += 1
        prompt = estimate_messages_tokens_rough(messages)
        if tools:
            prompt += estimate_json_tokens_rough(tools)
        if is_summary_request(messages):
            text = scripted_summary(messages, budget_tokens=min(max_tokens, max(200, prompt // 8)))
        else:
            text = scripted_reply(_last_user_text(messages))
        text = text[: max(4, max_tokens * 4)]
        if on_text is not None:
            await on_text(text)
        return Completion(
            text,
            usage=Usage(prompt_tokens=max(1, prompt), completion_tokens=len(text) // 4 + 1),
            finish_reason="stop",
            model=self.model,
        )


def is_summary_request(messages: list[Message]) -> bool:
    """The compressor's summary call starts with its own system prompt."""
    return bool(messages) and text_of(messages[0]).startswith(SUMMARY_SYSTEM_PROMPT[:48])


def scripted_reply(user_text: str) -> str:
    """A plausible reply of 12..90 words, the same every time for the same message."""
    seed = zlib.crc32(user_text.encode("utf-8"))
    low, high = REPLY_WORDS
    words = low + seed % (high - low)
    quoted = " ".join(user_text.split()[:8])
    body = [FILLER[(seed + i) % len(FILLER)] for i in range(words)]
    return f'About "{quoted}": ' + " ".join(body).capitalize() + "."


def scripted_summary(messages: list[Message], *, budget_tokens: int) -> str:
    """A hand-off summary in the compressor's template, about ``budget_tokens`` long."""
    request = "\n".join(text_of(m) for m in messages[1:])
    turns = TURN_LINE.findall(request)  # the summarizer numbers the turns: "[12] user: ..."
    snippets = [" ".join(t.split()[:12]) for t in turns[-40:] if t.strip()]
    sections = [
        "## Goal\nKeep up with the conversation and answer when asked.",
        "## Constraints & Preferences\n- Answer concisely.",
        "## Progress\n### Done\n- Followed the earlier turns.\n### In Progress\n- The latest "
        "question.\n### Blocked\n- Nothing.",
        "## Key Decisions\n- None recorded.",
        "## Relevant Files\n- None.",
        "## Next Steps\n- Answer the next message.",
        "## Critical Context",
    ]
    text = "\n\n".join(sections)
    limit = budget_tokens * 4
    for snippet in snippets:
        line = f"\n- {snippet}"
        if len(text) + len(line) > limit:
            break
        text += line
    return text


def _last_user_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message)
    return ""
