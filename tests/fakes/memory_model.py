"""A model for the fake LLM that uses long-term memory the way a good one would.

- "remember me: <text>" / "remember chat: <text>" from a person: it calls ``remember``
  with that scope; "search: <words>": it calls ``session_search``; "forget #<id>": it
  calls ``forget``. After a tool result it says "Noted." Anything else: "ok".
- A memory flush (docs/design.md#memory-flush): it calls ``remember`` once for each
  ``fact: ...`` phrase in the span about to be summarized — unless ``flush_reply`` says
  otherwise (an error, a hang). ``on_flush`` runs first, to look at the world then.
- A summary: ``lossy=True`` keeps nothing (a summarizer that loses every fact), else it
  keeps every ``fact: ...`` phrase, like :func:`tests.harness.summarizing`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fakes.llm_server import Recorded, Reply
from tests.harness import is_memory_flush, is_summary_request

FACT = re.compile(r"fact: [^\n\]<\".]*")  # up to the end of its sentence
ASKS = re.compile(r"(remember (me|chat)|search|forget #?)(?::\s*)?(.+)", re.IGNORECASE)


@dataclass
class MemoryModel:
    lossy: bool = False
    flush_reply: Reply | None = None
    on_flush: Callable[[Recorded], None] | None = None
    flushes: list[Recorded] = field(default_factory=list)

    def __call__(self, request: Recorded) -> Reply:
        if is_summary_request(request):
            return self.summary(request)
        if is_memory_flush(request):
            self.flushes.append(request)
            if self.on_flush is not None:
                self.on_flush(request)
            return self.flush_reply or self.flush(request)
        if answers_a_tool(request):
            return Reply("Noted.")
        wanted = ASKS.search(request.last_user_text)
        if wanted is None:
            return Reply("ok")
        verb, scope, rest = wanted.group(1).lower(), wanted.group(2), wanted.group(3).strip()
        if verb.startswith("remember"):
            return Reply(tool_calls=[("remember", {"text": rest, "scope": scope.lower()})])
        if verb == "search":
            return Reply(tool_calls=[("session_search", {"query": rest})])
        return Reply(tool_calls=[("forget", {"id": int(rest.split()[0])})])

    def summary(self, request: Recorded) -> Reply:
        facts = [] if self.lossy else list(dict.fromkeys(FACT.findall(request.all_text)))
        body = "\n".join(f"- {fact.strip()}" for fact in facts) or "- nothing notable"
        return Reply(f"## Goal\nChat.\n\n## Critical Context\n{body}")

    @staticmethod
    def flush(request: Recorded) -> Reply:
        span = request.last_user_text.split("About to be summarized:", 1)[-1]
        facts = list(dict.fromkeys(fact.strip() for fact in FACT.findall(span)))
        if not facts:
            return Reply("nothing")
        return Reply(tool_calls=[("remember", {"text": fact}) for fact in facts])


def answers_a_tool(request: Recorded) -> bool:
    """The last message is a tool's result (OpenAI: a tool message; Anthropic: a user
    message of tool_result blocks)."""
    last = request.messages[-1] if request.messages else {}
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    return last.get("role") == "tool" or any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )
