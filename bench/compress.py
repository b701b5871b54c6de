"""Benchmark: one compression of a long transcript, and the per-turn token check.

    python bench/compress.py

1. A 3,000-row synthetic transcript (chat plus tool rounds) is compressed once with an
   instant summarizer; wall and CPU time are reported without the summarizer call.
2. The per-turn token check as the active history grows from 100 to 5,000 rows: the
   usage-anchored count (anchor + a few new rows) against a rough estimate of the whole
   history. The anchored check must not grow with history length.

Targets: one compression < 200 ms; the anchored check flat in history length.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

from agent.compression.settings import CompressionSettings
from agent.context_compressor import ContextCompressor
from agent.providers.base import Completion, Provider, Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.usage_anchor import anchored_tokens, build_anchor

ROUTE = "openai:default:gpt-4o"


class InstantSummarizer(Provider):
    """Answers at once and measures how long it was inside the call (to subtract it)."""

    name = "openai"
    model = "instant"
    base_url = None

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    async def complete(self, messages, *, max_tokens, **_: Any) -> Completion:  # type: ignore[override]
        wall, cpu = time.perf_counter(), time.process_time()
        text = "## Goal\nBenchmark.\n\n## Critical Context\n" + "- fact\n" * 50
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        return Completion(text=text, usage=Usage(prompt_tokens=1, completion_tokens=1))


def transcript(rows: int, seed: int = 7) -> list[dict[str, Any]]:
    """System prompt, then chat turns and tool rounds (a call + result + answer)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are nightowl. " * 20}]
    n = 0
    while len(messages) < rows:
        messages.append({"role": "user", "content": f"request {n}: " + "u" * rng.randint(40, 600)})
        if rng.random() < 0.4:
            call_id = f"call_{n}"
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "src/x.py"}'},
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": "read_file",
                    "content": "line\n" * rng.randint(20, 800),
                }
            )
        messages.append(
            {"role": "assistant", "content": f"answer {n}: " + "a" * rng.randint(40, 900)}
        )
        n += 1
    return messages[:rows]


async def bench_compression(runs: int = 5) -> None:
    messages = transcript(3_000)
    walls, cpus = [], []
    result = None
    for _ in range(runs):
        summarizer = InstantSummarizer()
        engine = ContextCompressor(
            main=summarizer,
            context_length=1_000_000,
            settings=CompressionSettings(max_output_tokens=8_000),
        )
        wall, cpu = time.perf_counter(), time.process_time()
        result = await engine.compress(messages, force=True, trigger_source="manual")
        walls.append(time.perf_counter() - wall - summarizer.wall)
        cpus.append(time.process_time() - cpu - summarizer.cpu)
    assert result is not None and result.committed, result
    print(f"compression of {len(messages)} rows ({result.tokens_before:,} rough tokens):")
    print(
        f"  wall {statistics.median(walls) * 1000:.1f} ms, cpu {statistics.median(cpus) * 1000:.1f} ms"
        f" (median of {runs}, summarizer call excluded)"
    )
    print(
        f"  -> {result.messages_after} rows, {result.tokens_after:,} tokens, "
        f"{result.tool_results_pruned} tool outputs pruned"
    )


def time_per_call(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def bench_token_check() -> None:
    print("per-turn token check (microseconds per call):")
    print(f"  {'rows':>6} {'anchored':>10} {'rough whole history':>20}")
    base = transcript(5_000)
    for rows in (100, 500, 1_000, 2_000, 5_000):
        history = base[:rows]
        anchor = build_anchor(Usage(prompt_tokens=50_000, completion_tokens=500), history, ROUTE)
        grown = [*history, *transcript(4, seed=rows)[1:4]]  # a few rows since the last reply
        anchored = time_per_call(lambda g=grown, a=anchor: anchored_tokens(a, g, ROUTE), 2_000)
        rough = time_per_call(lambda g=grown: estimate_messages_tokens_rough(g), 20)
        print(f"  {rows:>6} {anchored * 1e6:>10.1f} {rough * 1e6:>20.1f}")


def main() -> None:
    asyncio.run(bench_compression())
    bench_token_check()


if __name__ == "__main__":
    main()
