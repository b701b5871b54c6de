"""An example context-engine plugin: it never drops a message.

It shows the smallest complete engine a plugin author can write. ``create_engine`` is the
factory ``resolve_context_engine`` looks for; it receives the same keyword arguments as
the built-in compressor (``main``, ``context_length``, ``settings``...) and may ignore any.
"""

from __future__ import annotations

from typing import Any

from agent.context_engine import CompressionResult, ContextEngine
from agent.providers.base import Usage


class KeepEverything(ContextEngine):
    """Keeps the whole conversation; compress() only reports that it skipped."""

    name = "keep_everything"

    def __init__(self, *, context_length: int = 0, **_: Any) -> None:
        self.context_length = context_length
        self.threshold_tokens = context_length

    def update_model(self, model: str, context_length: int, provider: str | None = None) -> None:
        self.context_length = self.threshold_tokens = context_length

    def update_from_response(self, usage: Usage) -> None:
        self.last_prompt_tokens = usage.prompt_tokens

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        return False

    async def compress(
        self,
        messages: list[dict[str, Any]],
        *,
        focus: str | None = None,
        force: bool = False,
        trigger_source: str = "auto",
    ) -> CompressionResult:
        return CompressionResult(
            messages=messages,
            committed=False,
            commit_status="skipped",
            trigger_source=trigger_source,
            messages_before=len(messages),
            messages_after=len(messages),
        )

    def tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": "count_messages",
                    "description": "How many messages this engine has kept.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if name != "count_messages":
            raise KeyError(name)
        return "all of them"


def create_engine(**kwargs: Any) -> KeepEverything:
    return KeepEverything(**kwargs)
