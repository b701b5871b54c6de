"""Per-turn overhead of MCP tools: 0 servers against 3 stdio servers offering 50 tools.

    python bench/tools.py [--turns 200]

Everything is real (router, inbox, lane, SQLite store, the agent loop, three MCP servers
written with the SDK — tests/fakes/mcp_server.py — started through the leash) except the
LLM, which answers in-process. Reported: the turn's latency (p50, p99), the prompt tokens
the tool schemas add to every request (rough estimate, docs/design.md#tokens), and the
round trip of one MCP tool call inside a turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from support import SignalAdapter, percentile  # bench/support.py (the script's own folder)

from adapters.base import InboundMessage
from agent.providers.base import Completion, Provider, ToolCall, Usage
from agent.tokens import estimate_json_tokens_rough
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import parse_config

SERVER = str(Path(__file__).parents[1] / "tests" / "fakes" / "mcp_server.py")
#: Each test server has 7 tools of its own; these make 50 in all.
EXTRA_TOOLS = (10, 10, 9)


class InstantProvider(Provider):
    """Answers at once; remembers the tool schemas' size; calls a tool when asked to."""

    name = "openai"
    model = "bench-model"
    base_url = None

    def __init__(self) -> None:
        self.schema_tokens = 0
        self.tool_count = 0

    async def complete(
        self, messages: list[dict[str, Any]], *, tools: Any = None, **_: Any
    ) -> Completion:
        self.schema_tokens = estimate_json_tokens_rough(tools or [])
        self.tool_count = len(tools or [])
        usage = Usage(prompt_tokens=60 * len(messages), completion_tokens=3)
        last = messages[-1]
        if last.get("role") == "user" and "call a tool" in str(last.get("content")):
            call = ToolCall("call_1", "s1__echo", '{"text": "hi"}')
            return Completion("", tool_calls=(call,), usage=usage, finish_reason="tool_calls")
        return Completion("Noted.", usage=usage)


async def measure(data_dir: Path, turns: int, servers: int) -> tuple[list[float], int, int]:
    mcp = {
        f"s{n + 1}": {"command": [sys.executable, SERVER, "--tools", str(EXTRA_TOOLS[n])]}
        for n in range(servers)
    }
    raw = {
        "data_dir": str(data_dir),
        "model": {"name": "bench-model", "context_length": 1_000_000},
        "tools": {"mcp_servers": mcp},
    }
    provider = InstantProvider()
    adapter = SignalAdapter()
    gateway = Gateway(parse_config(raw, {}), [adapter], providers=Providers(provider))
    await gateway.start()
    timings = []
    try:
        for i in range(turns):
            timings.append(await one_turn(gateway, adapter, f"message {i}"))
    finally:
        await gateway.stop()
    return timings, provider.schema_tokens, provider.tool_count


async def one_turn(gateway: Gateway, adapter: SignalAdapter, text: str) -> float:
    adapter.replied.clear()
    started = time.perf_counter()
    message = InboundMessage(
        platform="console", chat_id="bench", user_id="u", text=text, chat_type="console"
    )
    await adapter.sink(message)
    await adapter.replied.wait()
    await gateway.lanes.wait_idle()
    return time.perf_counter() - started


async def tool_round_trips(data_dir: Path, turns: int) -> list[float]:
    """Turns whose model calls s1__echo once: the call's cost on top of a turn."""
    raw = {
        "data_dir": str(data_dir),
        "model": {"name": "bench-model", "context_length": 1_000_000},
        "tools": {"mcp_servers": {"s1": {"command": [sys.executable, SERVER]}}},
    }
    adapter = SignalAdapter()
    gateway = Gateway(parse_config(raw, {}), [adapter], providers=Providers(InstantProvider()))
    await gateway.start()
    try:
        return [await one_turn(gateway, adapter, f"call a tool {i}") for i in range(turns)]
    finally:
        await gateway.stop()


def report(label: str, timings: list[float]) -> float:
    ms = sorted(t * 1000 for t in timings)
    median = statistics.median(ms)
    print(f"{label:<36} p50 {median:6.2f} ms   p99 {percentile(ms, 0.99):6.2f} ms")
    return median


async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        await measure(Path(root, "warmup"), 20, 0)
        none, none_tokens, none_tools = await measure(Path(root, "a"), turns, 0)
        three, three_tokens, three_tools = await measure(Path(root, "b"), turns, 3)
        calls = await tool_round_trips(Path(root, "c"), turns)
    a = report(f"0 MCP servers ({none_tools} tools)", none)
    b = report(f"3 MCP servers ({three_tools} tools)", three)
    c = report("a turn with one MCP tool call", calls)
    print(f"tool schemas per request: {none_tokens:,} tokens -> {three_tokens:,} tokens")
    print(f"turn overhead of 3 servers: {b - a:+.2f} ms; one tool call: {c - a:+.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    asyncio.run(main(parser.parse_args().turns))
