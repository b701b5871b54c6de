"""Small local models, the whole matrix: every fake server × window × what the config says
× language, each a long chat through the real gateway (tests/e2e/local_models.py).

    python bench/local_models.py [--turns 50] [--quick]

Servers (tests/fakes/local_servers.py): Ollama (cuts a long prompt silently), Ollama 0.30+
(keeps about half its window of a long prompt), Ollama without context shift (refuses a
long prompt, naming no window), Ollama before 0.10 (cannot say its window), llama.cpp (refuses a prompt over its slot,
stops a reply at the window's end), vLLM (refuses prompt + max_tokens over the window) —
each with a tokenizer that counts Russian 1.6 times the estimate. The config's
``context_length`` is right, twice the served window ("wrong"), or absent ("none").

Printed per run: turns answered, refusals (400s), prompts cut silently, replies stopped
by a full window, summaries (compressions) per turn, facts recalled, and the largest
prompt — and prompt + max_tokens, and the tool schemas — as a share of the served
window, by the server's own count. The summaries the fakes write are short (the facts
they were given): a real model's, up to its budget, leave less room.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.local_models import Outcome, run_chat
from tests.fakes.local_servers import FakeLlamaCpp, FakeOllama, FakeVllm

SERVERS = {
    "ollama": lambda window: FakeOllama(served=window),
    "ollama-0.30": lambda window: FakeOllama(served=window, version=(0, 30)),
    "ollama-noshift": lambda window: FakeOllama(served=window, shift=False),
    "ollama-0.9": lambda window: FakeOllama(served=window, version=(0, 9)),
    "llama.cpp": lambda window: FakeLlamaCpp(served=window),
    "vllm": lambda window: FakeVllm(served=window),
}
WINDOWS = (2_048, 4_096, 8_192)
CONFIGS = ("right", "wrong", "none")
LANGUAGES = ("en", "ru")


async def one(server: str, window: int, config: str, language: str, turns: int) -> Outcome:
    context_length = {"right": window, "wrong": 2 * window, "none": None}[config]
    async with SERVERS[server](window) as fake:
        with tempfile.TemporaryDirectory() as data:
            return await run_chat(
                Path(data), fake, turns=turns, language=language, context_length=context_length
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="4K windows only")
    args = parser.parse_args()
    windows = (4_096,) if args.quick else WINDOWS
    print(
        f"{'server':<12} {'window':>6} {'config':<6} {'lang':<4} {'answered':>8} {'400s':>4} "
        f"{'cut':>4} {'clip':>4} {'sum/turn':>8} {'recall':>6} {'prompt/W':>8} {'+out/W':>7} "
        f"{'tools/W':>7}"
    )
    totals = Outcome()
    by_window = {window: Outcome() for window in windows}
    started = time.perf_counter()
    for server, window, config, language in itertools.product(SERVERS, windows, CONFIGS, LANGUAGES):
        o = await one(server, window, config, language, args.turns)
        totals.turns += o.turns
        totals.answered += o.answered
        totals.refusals += o.refusals
        totals.cuts += o.cuts
        totals.clipped += o.clipped
        totals.asked += o.asked
        totals.recalled += o.recalled
        by_window[window].turns += o.turns
        by_window[window].compressions += o.compressions
        print(
            f"{server:<12} {window:>6} {config:<6} {language:<4} "
            f"{o.answered:>4}/{o.turns:<3} {o.refusals:>4} {o.cuts:>4} {o.clipped:>4} "
            f"{o.compactions / o.turns:>8.2f} {o.recall:>6.2f} {o.max_prompt:>8.2f} "
            f"{o.max_fill:>7.2f} {o.tool_share:>7.2f}",
            flush=True,
        )
    print(
        f"\nall: {totals.answered}/{totals.turns} answered, {totals.refusals} refused, "
        f"{totals.cuts} cut, {totals.clipped} clipped, recall {totals.recall:.2f} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    for window, o in by_window.items():
        print(f"{window:>6}: {o.compactions / o.turns:.2f} compactions per turn")


if __name__ == "__main__":
    asyncio.run(main())
