"""What a long chat costs, and how much of its prompt a cache serves (docs/cost.md).

    python bench/cost.py [--turns 80] [--window 16384] [--model gpt-4o-mini]

An ``--turns``-turn chat through the agent (agent.loop.Agent with the ContextCompressor
and the openai provider) against the caching fake (tests/fakes/caching_llm.py), which
reports ``cached_tokens`` the way OpenAI's automatic prefix caching does. Each turn is a
user message of about 150 tokens and a reply of about 350; each turn's usage anchor is
handed to the next, as the gateway does, and the compressor summarizes when the
window fills. (Without the anchor the compressor's gate never fired here and the
request builder left the oldest messages out instead, moving the prefix every turn:
about 20% cached.) Priced at ``--model``'s built-in price (agent/cost/table.py).

Printed: the total cost, cost per turn, the cost of summaries, compressions, and the
share of chat prompt tokens served from cache, overall and between compressions (the
first request after each compression is a miss by nature: its prefix was rewritten).
Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.context_compressor import CompressionSettings, ContextCompressor
from agent.context_engine import CompressionResult
from agent.cost.budget import format_usd
from agent.cost.prices import table_price
from agent.loop import Agent
from agent.messages import Message
from agent.model_metadata import ContextLengthResolver
from agent.providers import ProviderSettings, make_provider
from agent.tools import BUILTIN_TOOLS, ToolBox
from agent.transcript import SearchResult
from tests.fakes.caching_llm import CachingLLM, Report
from tests.fakes.llm_server import Recorded, Reply
from tests.harness import is_summary_request, summarizing

WORDS = "the quiet harbour lights drift over water while gulls argue about bread".split()


class MemoryTranscript:
    """The agent's Transcript protocol in memory: compressions are simply taken."""

    session_id = "bench"

    async def commit_compression(
        self, result: CompressionResult, original: list[Message]
    ) -> list[Message]:
        return list(result.messages)

    async def save_engine_state(self, state: dict[str, Any]) -> None:
        pass

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        return []


def prose(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + i) % len(WORDS)] for i in range(words))


def answer(request: Recorded) -> Reply:
    return Reply(prose(230, len(request.messages)))


async def run(turns: int, window: int, model: str) -> None:
    price = table_price(model)
    if price is None:
        raise SystemExit(f"{model} is not in the built-in table")
    async with CachingLLM(responder=summarizing(answer)) as llm:
        provider = make_provider(
            ProviderSettings("openai", model, api_key="k", base_url=llm.openai_base_url)
        )
        engine = ContextCompressor(
            main=provider,
            context_length=window,
            settings=CompressionSettings(max_output_tokens=1024),
            model=model,
            provider="openai",
        )
        with tempfile.TemporaryDirectory() as data:
            agent = Agent(
                provider,
                engine,
                ToolBox.of(BUILTIN_TOOLS),
                max_output_tokens=1024,
                windows=ContextLengthResolver(Path(data)),
            )
            messages: list[Message] = [{"role": "system", "content": prose(300, 0)}]
            compressions = 0
            anchor = None
            started = time.perf_counter()
            for turn in range(turns):
                messages.append({"role": "user", "content": f"turn {turn}: " + prose(100, turn)})
                result = await agent.run_turn(
                    messages, MemoryTranscript(), anchor=anchor, cache_ttl="5m"
                )
                if result.error is not None:
                    raise SystemExit(f"turn {turn} failed: {result.error!r}")
                compressions += len(result.compressions)
                messages, anchor = result.messages, result.anchor
            elapsed = time.perf_counter() - started
            await provider.aclose()
        report(list(zip(llm.requests, llm.reports, strict=True)), turns, compressions)
        print(f"({elapsed:.1f} s)")


def cost(rows: list[tuple[Recorded, Report]], model: str) -> Decimal:
    price = table_price(model)
    assert price is not None
    return sum((r.cost(price.input, price.cached_input, price.output) for _, r in rows), Decimal(0))


def report(rows: list[tuple[Recorded, Report]], turns: int, compressions: int) -> None:
    model = rows[0][1].model
    chat = [(q, r) for q, r in rows if not is_summary_request(q)]
    summaries = [(q, r) for q, r in rows if is_summary_request(q)]
    # Between compressions: the first chat request, and each right after a summary, miss
    # by nature (nothing before them shares their prefix); the rest should hit.
    steady: list[Report] = []
    fresh = True
    for q, r in rows:
        if is_summary_request(q):
            fresh = True
            continue
        if not fresh:
            steady.append(r)
        fresh = False
    total = cost(rows, model)
    prompt = sum(r.prompt_tokens for _, r in chat)
    cached = sum(r.cached_tokens for _, r in chat)
    steady_share = sum(r.cached_tokens for r in steady) / max(
        sum(r.prompt_tokens for r in steady), 1
    )
    print(f"model {model}, {turns} turns, {len(chat)} chat requests, {compressions} compressions")
    print(f"total cost            {format_usd(total)} (${total:.6f})")
    print(f"cost per turn         {format_usd(total / turns)}")
    print(f"summaries cost        {format_usd(cost(summaries, model))} ({len(summaries)} calls)")
    print(f"cached share, overall {cached / max(prompt, 1):.1%} of {prompt:,} prompt tokens")
    print(f"cached share, steady  {steady_share:.1%} (between compactions; aim: 85% or more)")
    without_cache = sum(
        (
            Report(r.model, r.prompt_tokens, 0, r.completion_tokens).cost(*_rates(model))
            for _, r in rows
        ),
        Decimal(0),
    )
    print(f"without any caching   {format_usd(without_cache)} (${without_cache:.6f})")


def _rates(model: str) -> tuple[Decimal, Decimal, Decimal]:
    price = table_price(model)
    assert price is not None
    return price.input, price.cached_input, price.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--window", type=int, default=16_384)
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.window, args.model))


if __name__ == "__main__":
    main()
