"""Do planted facts survive thousands of turns and a lossy summarizer? Memory off vs on.

    python bench/recall.py [--turns 2000] [--facts 40] [--loss 0.3] [--flush-miss 0.0]
                           [--window 16384] [--max-tokens 1500]

A long private chat is replayed through the real gateway (router → inbox → lane →
hygiene → agent loop with its compressor → one commit): ``--facts`` facts are planted in
the first tenth of the turns, among chatter that makes the window compact again and
again. The model answers in-process at once:

- its summaries lose ``--loss`` of the facts they are given — always the same ones (a
  fact the summarizer drops once it drops every time), so the summaries alone keep about
  ``1 - loss`` of them, however many compressions run;
- its memory flush (docs/design.md#memory-flush) calls remember for every fact in the
  span it is shown, except ``--flush-miss`` of them (again always the same ones): it
  recognises planted facts perfectly, so with 0 this measures the plumbing — that a
  flush runs before every compression and its notes reach every later prompt — not a
  real model's judgement of what is worth keeping.

Recall is the share of planted facts present in the prompt of a question asked at the
end (system prompt, memory block, summary, recent turns), and again after /new. The
memory block's tokens are measured in every turn's request.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import re
import statistics
import tempfile
import time
from typing import Any

from support import SignalAdapter  # bench/support.py (the script's own folder)

from adapters.base import InboundMessage
from agent.compression.markers import text_of
from agent.providers.base import Completion, Provider, ToolCall, Usage
from agent.tokens import estimate_message_tokens_rough, estimate_messages_tokens_rough
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import parse_config

SUMMARY_MARK = "You are the summarization step"
FLUSH_MARK = "You are the memory step"
BLOCK_MARK = "[nightowl memory]"
FACT = re.compile(r"fact #\d+: [^\n.\]]*")
WORDS = "the plan looks fine and we can talk about the details later this week".split()


def fact(k: int) -> str:
    return f"fact #{k}: the code of locker {k} is {4000 + 37 * k}-{k % 7}"


def kept(text: str, share: float, salt: str) -> bool:
    """Whether a lossy step keeps ``text``: the same answer every time it is asked."""
    digest = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1000 >= share * 1000


class LossyModel(Provider):
    """Answers turns at once, summarizes losing ``loss`` of the facts, flushes missing
    ``flush_miss`` of them; records every turn's memory block size."""

    name = "openai"
    model = "bench-model"
    base_url = None

    def __init__(self, loss: float, flush_miss: float) -> None:
        self.loss = loss
        self.flush_miss = flush_miss
        self.block_tokens: list[int] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.last_prompt = ""

    async def complete(
        self, messages: list[dict[str, Any]], *, max_tokens: int, **_: Any
    ) -> Completion:
        usage = Usage(prompt_tokens=estimate_messages_tokens_rough(messages), completion_tokens=9)
        first = text_of(messages[0]) if messages else ""
        if first.startswith(SUMMARY_MARK):
            self.counts["summaries"] += 1
            body = "\n".join(f"- {f}" for f in self.facts_in(messages) if kept(f, self.loss, "s"))
            text = f"## Goal\nChat.\n\n## Critical Context\n{body or '- nothing notable'}"
            return Completion(text, usage=usage)
        if first.startswith(FLUSH_MARK):
            self.counts["flushes"] += 1
            span = text_of(messages[-1]).split("About to be summarized:", 1)[-1]
            calls = tuple(
                ToolCall(f"r{i}", "remember", json.dumps({"text": f}))
                for i, f in enumerate(self.facts_in([{"content": span}]))
                if kept(f, self.flush_miss, "f")
            )
            return Completion("", tool_calls=calls, usage=usage, finish_reason="tool_calls")
        self.counts["turns"] += 1
        block = [m for m in messages if m.get("role") == "system" and BLOCK_MARK in text_of(m)]
        if block:
            self.block_tokens.append(estimate_message_tokens_rough(block[0]))
        self.last_prompt = "\n".join(text_of(m) for m in messages)
        return Completion("Sounds good, noted.", usage=usage)

    @staticmethod
    def facts_in(messages: list[dict[str, Any]]) -> list[str]:
        text = "\n".join(text_of(m) for m in messages)
        return list(dict.fromkeys(m.strip() for m in FACT.findall(text)))


async def replay(args: argparse.Namespace, memory: bool) -> dict[str, Any]:
    model = LossyModel(args.loss, args.flush_miss)
    compressions: collections.Counter[str] = collections.Counter()
    planted = [fact(k) for k in range(args.facts)]
    every = max(1, args.turns // 10 // max(1, args.facts))
    with tempfile.TemporaryDirectory() as root:
        config = parse_config(
            {
                "data_dir": root,
                "model": {"name": "bench-model", "context_length": args.window,
                          "max_output_tokens": 512},
                "memory": {"enabled": memory, "max_tokens": args.max_tokens},
            },
            {},
        )  # fmt: skip
        chat = SignalAdapter()
        gateway = Gateway(config, [chat], providers=Providers(model))
        gateway.events.subscribe(
            ["session:compress"], lambda e, p: compressions.update([p["trigger_source"]])
        )
        await gateway.start()

        async def say(text: str) -> None:
            await chat.sink(
                InboundMessage(
                    platform="console", chat_id="bench", user_id="me", text=text,
                    chat_type="console",
                )
            )  # fmt: skip
            await gateway.lanes.wait_idle(60)

        started = time.perf_counter()
        for turn in range(args.turns):
            k = turn // every
            if turn % every == 0 and k < len(planted):
                await say(f"Please keep this in mind: {planted[k]}. Thanks!")
            else:
                chatter = " ".join(WORDS[(turn + i) % len(WORDS)] for i in range(60))
                await say(f"turn {turn}: {chatter}")
        await say("So, what were all the locker codes?")
        at_end = sum(f in model.last_prompt for f in planted) / len(planted)
        await say("/new")
        await say("Starting over: what were the locker codes?")
        after_new = sum(f in model.last_prompt for f in planted) / len(planted)
        wall = time.perf_counter() - started
        await gateway.stop()
    blocks = model.block_tokens
    return {
        "memory": memory,
        "recall_at_end": at_end,
        "recall_after_new": after_new,
        "compactions": sum(compressions.values()),
        "by_trigger": dict(compressions),
        "flushes": model.counts["flushes"],
        "block_max": max(blocks, default=0),
        "block_mean": statistics.mean(blocks) if blocks else 0,
        "wall_s": wall,
    }


async def main(args: argparse.Namespace) -> None:
    print(
        f"{args.turns:,} turns, {args.facts} facts planted in the first tenth, window "
        f"{args.window:,}, summarizer loses {args.loss:.0%}, flush misses {args.flush_miss:.0%},"
        f" memory.max_tokens {args.max_tokens:,}"
    )
    for memory in (False, True):
        r = await replay(args, memory)
        print(
            f"memory {'on ' if memory else 'off'}: recall at the end {r['recall_at_end']:.3f},"
            f" after /new {r['recall_after_new']:.3f}; {r['compactions']} compactions"
            f" {r['by_trigger']}, {r['flushes']} flushes; memory block tokens per turn: max"
            f" {r['block_max']}, mean {r['block_mean']:.0f}; {r['wall_s']:.1f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--facts", type=int, default=40)
    parser.add_argument("--loss", type=float, default=0.3)
    parser.add_argument("--flush-miss", type=float, default=0.0)
    parser.add_argument("--window", type=int, default=16_384)
    parser.add_argument("--max-tokens", type=int, default=1_500)
    asyncio.run(main(parser.parse_args()))
