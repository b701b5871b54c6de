"""Where one chat's turn spends its wall time, step by step, beside the floor's.

    python bench/turn_timeline.py [--messages 200]

One chat talks to each bot as ``bench/telegram_roundtrip.py`` runs it (nightowl's child
process as ``nightowl run`` builds it, or bench/floor_bot.py; the fake Bot API; the
instant fake model), each message pushed once the previous reply arrived. The child
records when each trip to SQLite's thread and each HTTP request started and ended
(``time.monotonic``: one clock for every process on Linux); the driver knows when each
message was pushed and when its reply reached the fake. Printed, per bot: each step of a
turn in order, the median of when it started after the push and how long it took. A
streamed request's time is until its headers; its body is read after (the model's
reply, a few chunks from the instant fake). A store trip shows twice: as the event loop
sees it (from its submit until the loop runs its answer) and, indented, its work on
SQLite's thread. What lies between the two is waiting: for the thread to get the GIL
from a busy event loop, and for the loop to get back to the answer. Steps are matched by their place in the
turn: one that comes only sometimes (a checkpoint, an extra poll) is left out.

This explains the one-chat rows of ``telegram_roundtrip.py --mode floor``
(docs/design.md#against-a-bare-bot). The instruments are patched into the child here,
in the benchmark, never in nightowl: this module is the child's ``__mp_main__``, so its
top level runs there first.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import telegram_roundtrip  # bench/telegram_roundtrip.py (the script's own folder)

#: Where the child writes its steps; set by the driver, inherited by the spawned child.
STEPS_FILE = "NIGHTOWL_BENCH_STEPS"
Step = tuple[float, float, str]  # started, ended (monotonic seconds), what
_steps: list[Step] = []


def _instrument(nightowl: bool) -> None:
    """In the child, before its bot is built: time each HTTP request, and (nightowl)
    each store trip, named by the store functions it carries."""
    import httpx
    import httpx2

    for client in (httpx.AsyncClient, httpx2.AsyncClient):
        _time_sends(client)
    if nightowl:
        from gateway.store import sqlite_thread

        submit = sqlite_thread._Worker.submit

        def timed(self: Any, work: Any, argument: Any) -> asyncio.Future[Any]:
            name = _trip_name(work)

            def on_the_thread(argument: Any) -> Any:
                started = time.monotonic()
                try:
                    return work(argument)
                finally:
                    _steps.append((started, time.monotonic(), f"  on the thread: {name}"))

            started = time.monotonic()
            future = submit(self, on_the_thread, argument)
            future.add_done_callback(lambda _: _steps.append((started, time.monotonic(), name)))
            return future

        sqlite_thread._Worker.submit = timed  # type: ignore[method-assign]
    atexit.register(_write_steps)


def _trip_name(work: Any) -> str:
    """A trip is ``partial(_together, batch)`` (writes), ``partial(_one, body, begin)``
    (a snapshot) or one statement."""
    arguments = getattr(work, "args", ())
    if arguments and isinstance(arguments[0], list):
        return "write " + " + ".join(sorted({_short(write.body) for write in arguments[0]}))
    if arguments:
        return "read " + _short(arguments[0])
    return "one statement"


def _short(body: Any) -> str:
    name = getattr(body, "__qualname__", type(body).__name__).replace(".<locals>", "")
    return name.removesuffix(".write").removesuffix(".read").removesuffix(".body")


def _time_sends(client: Any) -> None:
    send = client.send

    async def timed(self: Any, request: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await send(self, request, **kwargs)
        finally:
            name = "http " + request.url.path.rsplit("/", 1)[-1]
            _steps.append((started, time.monotonic(), name))

    client.send = timed


def _write_steps() -> None:
    lines = (f"{started:.6f} {ended:.6f} {name}\n" for started, ended, name in _steps)
    Path(os.environ[STEPS_FILE]).write_text("".join(lines))


if __name__ == "__mp_main__" and os.environ.get(STEPS_FILE):  # the spawned child
    _instrument(nightowl=os.environ[STEPS_FILE].endswith("nightowl"))


async def one_bot(bot: str, messages: int, scratch: Path) -> None:
    steps_file = scratch / bot
    os.environ[STEPS_FILE] = str(steps_file)
    try:
        run = await telegram_roundtrip.run_bot(bot, 1, messages)
    finally:
        del os.environ[STEPS_FILE]
    (pushes,) = run.pushes.values()
    (replies,) = run.replies.values()
    rows = (line.split(" ", 2) for line in steps_file.read_text().splitlines())
    steps = sorted((float(a), float(b), name) for a, b, name in rows)
    print(f"{bot}, one chat, {messages} turns (the second half):")
    _print_turn(pushes, replies, steps)


def _print_turn(pushes: list[float], replies: list[float], steps: list[Step]) -> None:
    """Each step's median start after the push and duration, over the second half of the
    turns (the first ones warm the caches); then the trips to SQLite's thread in all. A step seen in fewer than half the turns (a
    checkpoint, a poll that happened to fall inside) is left out."""
    half = len(pushes) // 2
    turns = list(zip(pushes[half:], replies[half:], strict=True))
    seen: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for pushed, replied in turns:
        # From the poll that brings the message (started before it) to the reply.
        inside = [
            step
            for step in steps
            if step[0] <= replied
            and (pushed <= step[0] or (step[2] == "http getUpdates" and pushed <= step[1]))
        ]
        for index, (started, ended, name) in enumerate(inside):
            timing = ((started - pushed) * 1000, (ended - started) * 1000)
            seen.setdefault((index, name), []).append(timing)
    print(f"  {'step, in order':<62} {'starts ms':>9} {'takes ms':>9}")
    for (_, name), timings in sorted(seen.items()):
        if len(timings) >= len(turns) / 2:
            starts = statistics.median(start for start, _ in timings)
            takes = statistics.median(took for _, took in timings)
            print(f"  {name[:62]:<62} {starts:9.2f} {takes:9.2f}")
    latency = statistics.median((replied - pushed) * 1000 for pushed, replied in turns)
    print(f"  {'the reply reaches the fake':<62} {latency:9.2f}")
    on_thread = [t for (_, name), t in seen.items() if name.startswith("  on the thread")]
    if on_thread:
        per_turn = sum(statistics.median(took for _, took in t) * len(t) for t in on_thread)
        print(f"  store trips: {per_turn / len(turns):.2f} ms a turn on SQLite's thread")


async def main_async(messages: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        for bot in ("floor", "nightowl"):
            await one_bot(bot, messages, Path(scratch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    asyncio.run(main_async(parser.parse_args().messages))


if __name__ == "__main__":
    main()
