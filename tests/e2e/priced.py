"""What the cost tests share (tests/e2e/test_cost.py, test_cost_budgets.py): a dear price,
a system prompt long enough for the caching fake's prefix cache, and the texts sent."""

from __future__ import annotations

from tests.fakes.caching_llm import CachingLLM

#: USD per million tokens: dear, so a few calls pass a cent.
PRICE = {"input": 100, "cached_input": 50, "output": 200}
#: A system prompt past 1,024 tokens, so the fake's prefix cache serves later turns.
SYSTEM = "You are a patient assistant. " * 200


def user_texts(llm: CachingLLM) -> list[str]:
    """Every user message of every request the fake got, in order."""
    return [
        str(m.get("content"))
        for request in llm.requests
        for m in request.messages
        if m.get("role") == "user"
    ]
