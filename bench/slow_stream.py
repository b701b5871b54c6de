"""A slow local model streamed to Telegram: how soon the first text shows, and that the
whole reply arrives once (docs/design.md#slow-models).

    python bench/slow_stream.py [--runs 5] [--tokens-per-second 8] [--words 40] [--prefill 0.5]

The real gateway and python-telegram-bot against the fake Bot API (tests/fakes/
telegram_server.py) and a fake llama.cpp server (tests/fakes/local_servers.py) that is
silent for ``--prefill`` seconds (the prompt being read) and then writes one token per
chunk at ``--tokens-per-second``, as llama.cpp, Ollama and vLLM do. ``stream: true`` at
Telegram's own pace (one edit a second per chat), ``model.timeout_seconds`` 2 — less
than every reply takes. Each run is a new private chat, so no edit of an earlier reply
holds the first one back.

Printed per run, from the fakes' own time stamps: seconds from the model's first token to
the first text on Telegram ("first text"), from the user's message to it, from the last
token to the finished message; the edits made and the shortest gap between two; whether
the finished message is the whole reply; then the median and worst "first text".
A second line per run with ``stream: false``: the reply arrives once, after its last
token, although it took longer than the timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.telegram_helpers import telegram_config, telegram_gateway, visible
from tests.fakes.llm_server import Reply
from tests.fakes.local_servers import FakeLlamaCpp
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import turns_done

TIMEOUT = 2.0


async def run(args: argparse.Namespace, *, stream: bool) -> list[dict[str, float]]:
    answer = " ".join(f"word{i}" for i in range(args.words))
    reply = Reply(answer, tokens_per_second=args.tokens_per_second, delay=args.prefill)
    chats = [1000 + i for i in range(args.runs)]
    results = []
    async with FakeLlamaCpp(served=8_192, responder=lambda _: reply) as llm, FakeTelegram() as tg:
        with tempfile.TemporaryDirectory() as data:
            model = {"name": llm.model, "timeout_seconds": TIMEOUT}
            config = telegram_config(
                Path(data), llm, tg, users=tuple(chats), stream=stream, sections={"model": model}
            )
            async with telegram_gateway(config, stream_edit_interval=1.0) as gateway:
                for chat in chats:
                    seen = len(llm.requests)
                    asked = time.monotonic()
                    tg.push_text(chat, "tell me about it")
                    await tg.wait_for(lambda chat=chat: _finished(tg, chat, answer, stream))
                    await turns_done(gateway)
                    [request] = llm.requests[seen:]
                    results.append(_measure(tg, chat, request.tokens, asked, answer))
    return results


def _finished(tg: FakeTelegram, chat: int, answer: str, stream: bool) -> bool:
    shown = [m.text for m in tg.sent if m.chat_id == chat]
    if stream:
        shown = [e.text for e in tg.edits if e.chat_id == chat and e.parse_mode == "HTML"]
    return any(visible(text) == answer for text in shown)


def _measure(
    tg: FakeTelegram, chat: int, tokens: list[tuple[float, str]], asked: float, answer: str
) -> dict[str, float]:
    sent = [m for m in tg.sent if m.chat_id == chat]
    edits = [e for e in tg.edits if e.chat_id == chat]
    stamps = [m.at for m in sent[:1]] + [e.at for e in edits]
    last = (edits or sent)[-1]
    return {
        "first_text": sent[0].at - tokens[0][0],
        "from_message": sent[0].at - asked,
        "generation": tokens[-1][0] - tokens[0][0],
        "final_after_last_token": last.at - tokens[-1][0],
        "messages": len(sent),
        "edits": len(edits),
        "min_gap": min((b - a for a, b in itertools.pairwise(stamps)), default=0.0),
        "whole": float(visible(last.text) == answer),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens-per-second", type=float, default=8.0)
    parser.add_argument("--words", type=int, default=40)
    parser.add_argument("--prefill", type=float, default=0.5)
    args = parser.parse_args()
    print(
        f"{'stream':<6} {'first text':>10} {'from msg':>8} {'gen':>5} {'final':>6} "
        f"{'msgs':>4} {'edits':>5} {'min gap':>7} {'whole':>5}"
    )
    for stream in (True, False):
        results = await run(args, stream=stream)
        for r in results:
            print(
                f"{stream!s:<6} {r['first_text']:>9.3f}s {r['from_message']:>7.2f}s "
                f"{r['generation']:>4.1f}s {r['final_after_last_token']:>5.2f}s "
                f"{r['messages']:>4.0f} {r['edits']:>5.0f} {r['min_gap']:>6.2f}s "
                f"{'yes' if r['whole'] else 'NO':>5}"
            )
        if stream:
            firsts = [r["first_text"] for r in results]
            print(
                f"time to first visible text after the first token: "
                f"median {statistics.median(firsts):.3f} s, worst {max(firsts):.3f} s"
            )


if __name__ == "__main__":
    asyncio.run(main())
