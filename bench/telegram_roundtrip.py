"""Benchmark: Telegram round trips against the fake Bot API server.

    python bench/telegram_roundtrip.py [--mode adapter|gateway|floor|all] [--messages N]
                                       [--chats C] [--per-chat M] [--dashboard]
                                       [--tracemalloc FILE] [--big-chats B] [--rounds R]

1. Adapter round trip (``adapter``): N private messages are pushed into the fake; the
   sink answers each one through ``adapter.send`` (no gateway, no model). Reported:
   latency from push to the reply reaching the fake (p50/p95/max), messages per second.
   This is the adapter's share of a user's wait: one getUpdates wake-up, one sendMessage.
2. Gateway round trip (``gateway``): the real gateway as ``nightowl run`` builds it
   (config -> gateway.platforms.telegram_adapter, SQLite store, router, lanes, turn
   runner, agent) in a child process, against the fake Bot API and an instant
   OpenAI-compatible fake model in this process. C private chats talk at once, each
   sending M messages one after another (the next after the reply, as people do).
   Reported: update-to-sendMessage latency median/p99/max, turns per second, and the
   gateway process's CPU seconds (``resource.getrusage`` in the child, so the fakes and
   this driver are not counted) and peak RSS (bench/rss.py).
   ``--tracemalloc FILE``: the child's largest allocations by line and by file once
   every chat is answered (the load's peak), and the packages it imported.
3. Split + format: a 10,000-character Markdown reply with a code fence is split for
   Telegram and converted to HTML (no network).

Targets on loopback, 2 cores shared with the fakes: adapter p95 < 50 ms; gateway
>= 80 turns/s and <= 15 ms gateway CPU per turn; split + format of 10k chars < 20 ms.
With C chats talking at once the gateway is busy all the time, so a message waits for
the turns ahead of it: latency ~ C / (turns per second). ``--chats 1`` shows the
unloaded latency of one turn (target: median < 30 ms).

Every child loads nightowl from bytecode, as an installed nightowl does
(bench/support.py: ``bytecode_as_installed``).

``--mode floor``: bench/floor_raw.py (aiohttp, no SDKs, no storage: the limit),
bench/floor_bot.py (python-telegram-bot + the openai SDK), the same bot storing and
syncing each message and answer ("stored": what losing nothing costs a bare bot) and
nightowl back to back on fresh fakes under three loads — one chat, 50 chats x 20,
``--big-chats`` (1,000) x 3 — each figure the median of ``--rounds``; ratios to each
floor. Issue 31's targets:
peak RSS <= 1.0x the floor at 50 and 1,000 chats; 50 chats: turns/s >= 0.95x, p99
<= 1.0x; 1,000 chats: turns/s >= 1.3x; one chat: p50 and CPU per turn <= 1.0x.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rss import peak_rss_mb  # bench/rss.py (the script's own folder)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Nothing heavy at the top: each bot's child process (spawned) imports this module again,
# and what it imports here would count in every bot's RSS, the raw floor's too.
if TYPE_CHECKING:
    from adapters.base import InboundMessage
    from tests.fakes.telegram_server import FakeTelegram


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of a sorted list (bench/support.py's, without its imports)."""
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


# -- 1. adapter alone -------------------------------------------------------------------


async def adapter_round_trip(count: int) -> None:
    from adapters.base import OutboundMessage
    from adapters.telegram import TelegramAdapter, TelegramSettings
    from tests.fakes.telegram_server import FakeTelegram

    server = FakeTelegram()
    await server.start()
    settings = TelegramSettings(
        token=server.token, base_url=server.base_url, base_file_url=server.base_file_url
    )
    adapter = TelegramAdapter(settings)

    async def echo(message: InboundMessage) -> None:
        reply = OutboundMessage("telegram", message.chat_id, f"**echo** {message.text}")
        await adapter.send(reply)

    await adapter.start(echo)
    latencies = []
    started = time.perf_counter()
    try:
        for index in range(count):
            pushed_at = time.perf_counter()
            server.push_text(1000 + index % 7, f"message {index}")
            await server.wait_sent(index + 1, within=5)
            latencies.append((time.perf_counter() - pushed_at) * 1000)
    finally:
        elapsed = time.perf_counter() - started
        await adapter.stop()
        await server.stop()
    latencies.sort()
    print(f"adapter round trip, {count} messages: {count / elapsed:.0f} msg/s")
    print(
        f"  latency ms: p50 {statistics.median(latencies):.1f}  "
        f"p95 {percentile(latencies, 0.95):.1f}  max {latencies[-1]:.1f}"
    )


# -- 2. through the gateway -------------------------------------------------------------


@dataclass
class GatewayUsage:
    cpu_seconds: float
    peak_rss_mb: float
    cpu_after_start: float
    rss_after_start_mb: float


def serve_gateway(raw_config: dict[str, Any], stop: Any, report: Any) -> None:
    """Child process: the gateway as ``nightowl run`` builds it, until ``stop`` is set."""
    logging.basicConfig(level=logging.WARNING)
    if raw_config.get("tracemalloc"):  # before any import: their tables count too
        import tracemalloc

        tracemalloc.start(1)
    asyncio.run(_serve_gateway(raw_config, stop, report))


async def _serve_gateway(raw_config: dict[str, Any], stop: Any, report: Any) -> None:
    from gateway.app import Gateway
    from gateway.build import telegram_adapter
    from gateway.config.schema import parse_config

    profile = raw_config.pop("profile", None)
    traced = raw_config.pop("tracemalloc", None)
    if "turns_at_once" in raw_config:  # an A/B of the bound (docs/design.md#memory-footprint)
        from gateway.conversation import lanes

        lanes.TURNS_AT_ONCE = raw_config.pop("turns_at_once")
    cprofile = profile if profile and profile.endswith(".pstats") else None
    profile = None if cprofile else profile
    config = parse_config(raw_config, {})
    gateway = Gateway(config, [telegram_adapter(config)])
    await gateway.start()
    started, rss_at_start = resource.getrusage(resource.RUSAGE_SELF), peak_rss_mb()
    profiler = _start_profiler() if profile else None
    if cprofile:
        import cProfile

        cprof = cProfile.Profile()
        cprof.enable()
    try:
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
    finally:
        if traced:  # every chat done, nothing closed yet: the load's peak
            _write_allocations(Path(traced))
        if profiler is not None:
            _write_profile(profiler, Path(profile))
        if cprofile:
            cprof.disable()
            cprof.dump_stats(cprofile)
        await gateway.stop(drain_seconds=5)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        # A plain tuple: the child's classes live in __mp_main__, which the parent lacks.
        report.put(
            (
                usage.ru_utime + usage.ru_stime,
                peak_rss_mb(),
                started.ru_utime + started.ru_stime,
                rss_at_start,
            )
        )


def _write_allocations(path: Path, top: int = 40) -> None:
    """tracemalloc's biggest holders by line and by file, and the packages imported."""
    import tracemalloc

    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"traced now {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB", "-- by line --"]
    lines += [str(stat) for stat in snapshot.statistics("lineno")[:top]]
    lines += ["-- by file --", *(str(stat) for stat in snapshot.statistics("filename")[:top])]
    packages = sorted({name.split(".")[0] for name in sys.modules})
    lines += ["-- top-level modules imported --", " ".join(packages)]
    path.write_text("\n".join(lines) + "\n")


def _write_profile(profiler: Any, path: Path) -> None:
    """The call tree, then the functions by their own time."""
    profiler.stop()
    tree = profiler.output_text(show_all=False, color=False)
    flat = profiler.output_text(flat=True, color=False)
    path.write_text(f"{tree}\n-- by own time --\n{flat}")


def _start_profiler() -> Any:
    """pyinstrument (``pip install pyinstrument``; not a dependency), sampling the whole
    event loop thread: every task's work, not one coroutine's."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001, async_mode="disabled")
    profiler.start()
    return profiler


class SentCounter:
    """Replies per chat, read by one watcher: a thousand chats each waiting on the fake's
    condition would wake a thousand tasks per reply, and the driver would be the bottleneck."""

    def __init__(self, server: FakeTelegram) -> None:
        self.server = server
        self.seen = 0
        self.per_chat: dict[int, list[float]] = {}
        self._arrived: dict[int, asyncio.Event] = {}

    def replies(self, chat_id: int) -> list[float]:
        self._take()
        return self.per_chat.get(chat_id, [])

    def _take(self) -> None:
        sent = self.server.sent
        for message in sent[self.seen :]:
            chat_id = int(message.chat_id)
            self.per_chat.setdefault(chat_id, []).append(message.at)
            if chat_id in self._arrived:
                self._arrived[chat_id].set()
        self.seen = len(sent)

    async def watch(self) -> None:
        """Until cancelled: hand each new reply to its chat's waiter."""
        while True:
            await self.server.wait_for(lambda: len(self.server.sent) > self.seen, 3600)
            self._take()

    async def wait_reply(self, chat_id: int, index: int, within: float) -> float:
        """When the chat's ``index``-th reply reached the fake (monotonic seconds)."""
        arrived = self._arrived.setdefault(chat_id, asyncio.Event())
        deadline = time.monotonic() + within
        while len(self.replies(chat_id)) <= index:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), max(0.0, deadline - time.monotonic()))
        return self.per_chat[chat_id][index]


@dataclass
class ChatRun:
    latencies: list[float]
    pushes: list[float]  # when each message was pushed (monotonic seconds)


async def one_chat(
    server: FakeTelegram, counter: SentCounter, chat_id: int, count: int, within: float = 30
) -> ChatRun:
    latencies, pushes = [], []
    for index in range(count):
        pushes.append(time.monotonic())
        server.push_text(chat_id, f"message {index} from chat {chat_id}")
        replied = await counter.wait_reply(chat_id, index, within)
        latencies.append((replied - pushes[-1]) * 1000)
    return ChatRun(latencies, pushes)


def late_typing(server: FakeTelegram, counter: SentCounter, pushes: dict[int, list[float]]) -> int:
    """Typing actions that reached Telegram while nothing ran in their chat: between a
    reply and the chat's next message, "typing…" shows under an answer already there."""
    typing: dict[int, list[float]] = {}
    for action in server.chat_actions:
        typing.setdefault(int(action.chat_id), []).append(action.at)
    late = 0
    for chat_id, at in typing.items():
        replies = counter.per_chat.get(chat_id, [])
        starts = [*pushes.get(chat_id, [])[1:], float("inf")]
        idle = list(zip(replies, starts[: len(replies)], strict=True))
        late += sum(1 for t in at if any(start < t < end for start, end in idle))
    return late


def serve_floor(
    urls: tuple[str, str, str], stop: Any, report: Any, bot: str, data_dir: str
) -> None:
    """Child process: bench/floor_bot.py (``stored``: with its database in ``data_dir``;
    ``raw``: bench/floor_raw.py), reporting its usage as ``serve_gateway`` does."""
    if bot == "raw":
        from floor_raw import serve  # bench/floor_raw.py
    else:
        from floor_bot import serve  # bench/floor_bot.py

        if bot == "stored":
            serve = functools.partial(serve, database=str(Path(data_dir) / "floor.db"))

    logging.basicConfig(level=logging.WARNING)
    started: list[tuple[resource.struct_rusage, float]] = []

    def polling() -> None:  # up, as nightowl is after ``gateway.start()``
        started.append((resource.getrusage(resource.RUSAGE_SELF), peak_rss_mb()))

    asyncio.run(serve(*urls, stop=stop, polling=polling))
    usage, (first, rss_at_start) = resource.getrusage(resource.RUSAGE_SELF), started[0]
    report.put(
        (
            usage.ru_utime + usage.ru_stime,
            peak_rss_mb(),
            first.ru_utime + first.ru_stime,
            rss_at_start,
        )
    )


@dataclass
class Run:
    """One bot under one load: what the tables print."""

    bot: str
    chats: int
    per_chat: int
    turns: int
    elapsed: float
    latencies: list[float]  # sorted, ms
    usage: GatewayUsage
    start_to_poll: float  # seconds from spawning the process to its first getUpdates
    late_typing: int
    pushes: dict[int, list[float]]  # per chat: when each message was pushed (monotonic s)
    replies: dict[int, list[float]]  # per chat: when each reply reached the fake

    @property
    def cpu_per_turn_ms(self) -> float:
        return (self.usage.cpu_seconds - self.usage.cpu_after_start) / self.turns * 1000

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)


async def run_bot(
    bot: str,
    chats: int,
    per_chat: int,
    dashboard: bool = False,
    profile: str | None = None,
    traced: str | None = None,
    turns_at_once: int | None = None,
) -> Run:
    """``bot`` is "nightowl" (the gateway as ``nightowl run`` builds it), "floor"
    (bench/floor_bot.py) or "raw" (bench/floor_raw.py)."""
    from tests.fakes.llm_server import FakeLLM
    from tests.fakes.telegram_server import FakeTelegram

    server = FakeTelegram()
    await server.start()
    context = multiprocessing.get_context("spawn")
    stop, report = context.Event(), context.Queue()
    async with FakeLLM(record_limit=10) as llm:
        with tempfile.TemporaryDirectory() as data_dir:
            chat_ids = [5000 + n for n in range(chats)]
            raw = {
                "data_dir": data_dir,
                "model": {"base_url": llm.openai_base_url, "name": "fake-model",
                          "api_key": "bench", "max_retries": 0},
                "platforms": {"telegram": {"enabled": True, "token": server.token,
                                           "base_url": server.base_url,
                                           "allowed_users": chat_ids}},
            }  # fmt: skip
            if profile:
                raw["profile"] = profile
            if traced:
                raw["tracemalloc"] = traced
            if turns_at_once:
                raw["turns_at_once"] = turns_at_once
            if dashboard:  # idle: nobody looks at it while the chats talk
                raw["dashboard"] = {"enabled": True, "port": 0, "token": "bench-token-0123456789"}
            if bot in FLOORS:
                urls = (server.token, server.base_url, llm.openai_base_url)
                floor_args = (urls, stop, report, bot, data_dir)
                child = context.Process(target=serve_floor, args=floor_args)
            else:
                child = context.Process(target=serve_gateway, args=(raw, stop, report))
            spawned = time.perf_counter()
            child.start()
            try:
                await server.wait_for(lambda: bool(server.method_calls("getUpdates")), 60)
                start_to_poll = time.perf_counter() - spawned
                counter = SentCounter(server)
                watcher = asyncio.create_task(counter.watch())
                within = max(30.0, chats / 10)  # a message waits for the turns ahead of it
                started = time.perf_counter()
                results = await asyncio.gather(
                    *(one_chat(server, counter, c, per_chat, within) for c in chat_ids)
                )
                elapsed = time.perf_counter() - started
                watcher.cancel()
            finally:
                stop.set()
                usage = GatewayUsage(*await asyncio.to_thread(report.get, True, 30))
                await asyncio.to_thread(child.join, 30)
                await server.stop()
    latencies = sorted(value for chat in results for value in chat.latencies)
    pushes = dict(zip(chat_ids, (chat.pushes for chat in results), strict=True))
    late = late_typing(server, counter, pushes)
    return Run(bot, chats, per_chat, llm.request_count, elapsed, latencies, usage,
               start_to_poll, late, pushes, counter.per_chat)  # fmt: skip


async def gateway_round_trip(
    chats: int,
    per_chat: int,
    dashboard: bool = False,
    profile: str | None = None,
    traced: str | None = None,
) -> None:
    run = await run_bot("nightowl", chats, per_chat, dashboard, profile, traced)
    usage, turns = run.usage, len(run.latencies)
    print(
        f"gateway round trip, {chats} chats x {per_chat} messages ({run.turns} turns),"
        f" dashboard {'on' if dashboard else 'off'}:"
    )
    print(
        f"  update -> sendMessage ms: median {run.p50:.1f}  "
        f"p99 {run.p99:.1f}  max {run.latencies[-1]:.1f}"
    )
    print(f"  {turns / run.elapsed:.0f} turns/s over {run.elapsed:.1f} s")
    under_load = usage.cpu_seconds - usage.cpu_after_start
    print(
        f"  gateway process: {usage.cpu_seconds:.2f} CPU s, {under_load:.2f} of them after "
        f"start ({under_load / turns * 1000:.1f} ms/turn); peak RSS {usage.peak_rss_mb:.0f} MB "
        f"({usage.rss_after_start_mb:.0f} MB after start)"
    )
    print(f"  typing actions arriving after their reply: {run.late_typing} of {turns} turns")


Loads = dict[str, tuple[int, int]]
FLOORS = ("raw", "floor", "stored")
BOTS = (*FLOORS, "nightowl")


async def against_the_floor(loads: Loads, rounds: int) -> None:
    """The floors (raw, python-telegram-bot, and that bot storing each message) and
    nightowl back to back on fresh fakes under each load, ``rounds`` times in turn; each
    figure the median of the rounds (one run varies by 10-20%). Ratios: nightowl to the
    floor (the targets of issues 18 and 31), to the stored floor, and to the raw floor
    (the limit)."""
    tables = []
    for _ in range(rounds):
        runs: dict[tuple[str, str], Run] = {}
        for load, (c, m) in loads.items():
            for bot in BOTS:
                runs[bot, load] = await run_bot(bot, c, m)
        tables.append(_floor_table(runs, loads))
    print(f"median of {rounds} round(s)")
    print(
        f"{'':40} {'raw':>8} {'floor':>8} {'stored':>8} {'nightowl':>8}"
        f" {'/floor':>7} {'/stored':>7} {'/raw':>7}  target"
    )
    for cells in zip(*tables, strict=True):
        name, target = cells[0][0], cells[0][-1]
        raw, floor, stored, night = (
            statistics.median(cell[i] for cell in cells) for i in (1, 2, 3, 4)
        )
        figures = f"{raw:8.2f} {floor:8.2f} {stored:8.2f} {night:8.2f}"
        if name.startswith("start"):
            ratios = f"{night - floor:+6.2f}s {night - stored:+6.2f}s {night - raw:+6.2f}s"
        else:
            figures = f"{raw:8.1f} {floor:8.1f} {stored:8.1f} {night:8.1f}"
            ratios = f"{night / floor:6.2f}x {night / stored:6.2f}x {night / raw:6.2f}x"
        print(f"{name:40} {figures} {ratios}  {target}")


def _floor_table(runs: dict[tuple[str, str], Run], loads: Loads) -> list[tuple[Any, ...]]:
    def rate(run: Run) -> float:
        return len(run.latencies) / run.elapsed

    def row(name: str, load: str, value: Any, target: str) -> tuple[Any, ...]:
        return (name, *(value(runs[bot, load]) for bot in BOTS), target)

    def rss_after_start(run: Run) -> float:
        return run.usage.rss_after_start_mb

    def peak(run: Run) -> float:
        return run.usage.peak_rss_mb

    def cpu(run: Run) -> float:
        return run.cpu_per_turn_ms

    def p50(run: Run) -> float:
        return run.p50

    def p99(run: Run) -> float:
        return run.p99

    turns = loads["one"][1]
    rows = [
        row(f"one chat, {turns} turns: p50 ms", "one", p50, "<= 1.0"),
        row("one chat: p99 ms", "one", p99, ""),
        row("one chat: CPU ms per turn", "one", cpu, "<= 1.0"),
        row("idle RSS MB (after start)", "one", rss_after_start, ""),
        row("one chat: peak RSS MB", "one", peak, "<= 1.0"),
    ]
    for load, target_rate in (("many", ">= 0.95"), ("big", ">= 1.3")):
        if load not in loads:
            continue
        chats, per_chat = loads[load]
        rows += [
            row(f"{chats} chats x {per_chat}: turns/s", load, rate, target_rate),
            row(f"{chats} chats: p50 ms", load, p50, ""),
            row(f"{chats} chats: p99 ms", load, p99, "<= 1.0" if load == "many" else ""),
            row(f"{chats} chats: CPU ms per turn", load, cpu, ""),
            row(f"{chats} chats: peak RSS MB", load, peak, "<= 1.0"),
        ]
    rows.append(
        ("start to first poll s",
         *(min(runs[bot, load].start_to_poll for load in loads) for bot in BOTS), "<= +0.3 s")
    )  # fmt: skip
    return rows


# -- 3. split and format ----------------------------------------------------------------


def split_and_format() -> None:
    from adapters.telegram import TelegramSettings
    from adapters.telegram.delivery import Sender
    from adapters.telegram.formatting import markdown_to_telegram_html

    prose = "Here is the reasoning, step by step, with *emphasis* and `code`. " * 80
    code = "\n".join(f"    total_{i} = add(value_{i}, 1)" for i in range(150))
    text = f"{prose}\n\n```python\n{code}\n```\n\nDone."
    settings = TelegramSettings(token="1:bench")
    sender = Sender(settings, bot=None, caller=None)  # type: ignore[arg-type]  # no sends
    runs = 50
    started = time.perf_counter()
    for _ in range(runs):
        chunks = sender.split(text)
        for chunk in chunks:
            markdown_to_telegram_html(chunk)
    per_run = (time.perf_counter() - started) / runs * 1000
    print(f"split + format {len(text):,} chars into {len(chunks)} messages: {per_run:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode", choices=("adapter", "gateway", "floor", "all"), default="all",
        help="floor: bench/floor_raw.py, floor_bot.py and nightowl back to back, with ratios",
    )  # fmt: skip
    parser.add_argument("--messages", type=int, default=200, help="adapter round trips")
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--one-chat-turns", type=int, default=200, help="floor mode")
    parser.add_argument("--per-chat", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="floor mode: median of rounds")
    parser.add_argument(
        "--big-chats", type=int, default=1000, help="floor mode: a third load (0: none)"
    )
    parser.add_argument("--big-per-chat", type=int, default=3, help="floor mode")
    parser.add_argument(
        "--dashboard", action="store_true", help="the gateway with its dashboard on (idle)"
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="gateway mode: write a pyinstrument profile here (FILE.pstats: cProfile's)",
    )
    parser.add_argument(
        "--tracemalloc",
        metavar="FILE",
        help="gateway mode: the top allocations (tracemalloc) at the load's end, to FILE",
    )
    args = parser.parse_args()
    from support import bytecode_as_installed  # bench/support.py

    bytecode_as_installed()  # the children load nightowl as installed, like the libraries
    logging.basicConfig(level=logging.WARNING)
    # A turn that ends while its typing request is still being sent drops that request;
    # the fake's server then logs "Connection lost" for it, which is expected here.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    if args.mode in ("adapter", "all"):
        asyncio.run(adapter_round_trip(args.messages))
    if args.mode in ("gateway", "all"):
        asyncio.run(
            gateway_round_trip(
                args.chats, args.per_chat, args.dashboard, args.profile, args.tracemalloc
            )
        )
    if args.mode in ("adapter", "all"):
        split_and_format()
    if args.mode == "floor":
        chats = 50 if args.chats == 20 else args.chats  # the load unless told
        per_chat = 20 if args.per_chat == 50 else args.per_chat
        loads = {"one": (1, args.one_chat_turns), "many": (chats, per_chat)}
        if args.big_chats:
            loads["big"] = (args.big_chats, args.big_per_chat)
        asyncio.run(against_the_floor(loads, args.rounds))


if __name__ == "__main__":
    main()
