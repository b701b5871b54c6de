"""A busy group overnight, at scale, with an instant model: does the window hold?

    python bench/overnight.py [--observed 10000] [--addressed 1000] [--window 32768]

Observed group messages (not addressed to the bot) pile up between questions; every
question runs a real turn: router → inbox → lane → hygiene → agent loop with its
compressor → one commit. The model answers in-process at once (summaries too) and
records each request's prompt estimate + max_tokens, so the numbers are the gateway's.
Prints the largest request against the window, compressions by trigger, wall time, and
the per-turn overhead against a plain 20-message session.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from support import SignalAdapter, percentile  # bench/support.py (the script's own folder)

from adapters.base import InboundMessage
from agent.providers.base import Completion, Provider, Usage
from agent.tokens import estimate_messages_tokens_rough
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import parse_config

SUMMARY_MARK = "You are the summarization step"


class InstantModel(Provider):
    name = "openai"
    model = "bench-model"
    base_url = None

    def __init__(self) -> None:
        self.largest = 0
        self.requests = 0

    async def complete(
        self, messages: list[dict[str, Any]], *, max_tokens: int, **_: Any
    ) -> Completion:
        prompt = estimate_messages_tokens_rough(messages)
        self.largest = max(self.largest, prompt + max_tokens)
        self.requests += 1
        if str(messages[0].get("content", "")).startswith(SUMMARY_MARK):
            text = (
                "## Goal\nFollow the group.\n\n## Critical Context\n- many notes\n"
                + "- detail\n" * 40
            )
        else:
            text = "Here is what happened."
        return Completion(text, usage=Usage(prompt_tokens=prompt, completion_tokens=8))


class GroupChat(SignalAdapter):
    def __init__(self) -> None:
        super().__init__("telegram")

    async def post(self, text: str, *, name: str, addressed: bool) -> None:
        await self.sink(
            InboundMessage(
                platform="telegram",
                chat_id="-1",
                user_id="7",
                user_name=name,
                text=text,
                chat_type="group",
                addressed=addressed,
            )
        )


def build(data_dir: Path, window: int, model: InstantModel) -> tuple[Gateway, GroupChat]:
    config = parse_config(
        {
            "data_dir": str(data_dir),
            "model": {"name": "bench-model", "context_length": window, "max_output_tokens": 2048},
            "platforms": {"telegram": {"allowed_chats": ["-1"], "allowed_users": ["7"]}},
        },
        {},
    )
    chat = GroupChat()
    return Gateway(config, [chat], providers=Providers(model)), chat


async def ask(gateway: Gateway, chat: GroupChat, text: str) -> float:
    chat.replied.clear()
    started = time.perf_counter()
    await chat.post(text, name="Bob", addressed=True)
    await chat.replied.wait()
    await gateway.lanes.wait_idle()
    return time.perf_counter() - started


async def overnight(observed: int, addressed: int, window: int) -> None:
    rng = random.Random(1)
    # Heavy-tailed gaps: mostly a few messages between questions, sometimes a whole night.
    weights = [rng.paretovariate(1.1) for _ in range(addressed)]
    batches = [int(observed * w / sum(weights)) for w in weights]
    batches[-1] += observed - sum(batches)
    telemetry: collections.Counter[str] = collections.Counter()
    model = InstantModel()
    with tempfile.TemporaryDirectory() as root:
        gateway, chat = build(Path(root), window, model)
        gateway.events.subscribe(
            ["session:compress"], lambda e, p: telemetry.update([p["trigger_source"]])
        )
        await gateway.start()
        turns: list[float] = []
        started = time.perf_counter()
        sent = 0
        for turn, count in enumerate(batches):
            for _ in range(count):
                words = " ".join(
                    rng.choice(["deploy", "coffee", "bug", "merge", "ship", "why"])
                    for _ in range(60)
                )
                await chat.post(
                    f"{sent}: {words}", name=rng.choice(["Ann", "Cy", "Dee"]), addressed=False
                )
                sent += 1
            await gateway.lanes.wait_idle()  # the chatter is stored; now time the turn alone
            turns.append(await ask(gateway, chat, f"question {turn}: what did I miss?"))
        wall = time.perf_counter() - started
        await gateway.events.drain()
        await gateway.stop()

    with tempfile.TemporaryDirectory() as root:  # the baseline: a plain 20-message chat
        plain_model = InstantModel()
        gateway, chat = build(Path(root), window, plain_model)
        await gateway.start()
        for i in range(10):
            await ask(gateway, chat, f"warm-up {i}")
        baseline = [await ask(gateway, chat, f"plain {i}") for i in range(200)]
        await gateway.stop()

    def stats(values: list[float]) -> tuple[float, float]:
        ms = sorted(v * 1000 for v in values)
        return statistics.median(ms), percentile(ms, 0.99)

    median, p99 = stats(turns)
    base_median, base_p99 = stats(baseline)
    print(f"observed messages {observed:,}, addressed {addressed:,}, window {window:,}")
    print(f"longest gap between questions: {max(batches):,} messages")
    print(
        f"largest request (prompt + max_tokens): {model.largest:,} = {model.largest / window:.1%} of the window"
    )
    print(f"compressions by trigger: {dict(telemetry)}")
    print(f"model requests: {model.requests:,}; total wall time {wall:.1f} s")
    print(f"per-turn overhead: median {median:.2f} ms, p99 {p99:.2f} ms")
    print(f"20-message session: median {base_median:.2f} ms, p99 {base_p99:.2f} ms")
    print(f"ratio of medians: {median / base_median:.2f}x (target <= 1.5x); largest <= 100% always")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--observed", type=int, default=10_000)
    parser.add_argument("--addressed", type=int, default=1_000)
    parser.add_argument("--window", type=int, default=32_768)
    args = parser.parse_args()
    asyncio.run(overnight(args.observed, args.addressed, args.window))
