"""``nightowl replay FILE``: a recorded chat through the real gateway, to tune compression.

Each JSONL line is one message: ``{"text": "...", "sender": "Alice", "addressed": true,
"chat": "group"}`` (only ``text`` is required; ``chat`` is ``private`` (default) or
``group``; ``addressed`` defaults to true). Messages go through the real router, inbox,
lane, hygiene, agent loop and compressor against the configured model or the instant
:class:`~agent.scripted.ScriptedProvider`, one after another, into a scratch
database (the live one is never touched). After every turn the prompt size the provider
reported is recorded; every ``session:compress`` event is recorded where it happened.
The result is an SVG chart (prompt tokens per turn against the window, compressions
marked) and a one-screen summary.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from adapters.base import Adapter, InboundMessage, InboundSink, OutboundMessage, PlatformTraits
from agent.scripted import ScriptedProvider
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import Config
from gateway.events import Payload
from gateway.ops.replay.chart import render_chart
from gateway.ops.replay.results import ReplayCompression, ReplayResult, TurnPoint

SESSION_CHAT = "replay"
SESSION_KEY = f"console:{SESSION_CHAT}"


@dataclass(frozen=True)
class ReplayLine:
    text: str
    sender: str = "user"
    addressed: bool = True
    chat: Literal["private", "group"] = "private"


def read_replay_file(path: str | Path) -> list[ReplayLine]:
    """Parse the JSONL file; a bad line raises ValueError naming its line number."""
    lines: list[ReplayLine] = []
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg}, column {exc.colno})") from exc
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError(f'line {number}: expected an object with a "text" string')
        chat = item.get("chat", "private")
        if chat not in ("private", "group"):
            raise ValueError(f'line {number}: "chat" must be "private" or "group", got {chat!r}')
        lines.append(
            ReplayLine(
                text=item["text"],
                sender=str(item.get("sender") or "user"),
                addressed=bool(item.get("addressed", True)),
                chat=chat,
            )
        )
    return lines


class ReplayAdapter(Adapter):
    """A console-like chat the replay speaks through; replies are only counted."""

    platform = "console"
    traits = PlatformTraits(operator_only=True)  # as the console's (docs/design.md#platform-traits)

    def __init__(self) -> None:
        self.sink: InboundSink | None = None
        self.replies = 0

    async def start(self, sink: InboundSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        self.sink = None

    async def send(self, message: OutboundMessage) -> list[str]:
        self.replies += 1
        return [str(self.replies)]

    async def post(self, line: ReplayLine, number: int) -> None:
        assert self.sink is not None, "replay adapter not started"
        await self.sink(
            InboundMessage(
                platform="console",
                chat_id=SESSION_CHAT,
                user_id=line.sender,
                user_name=line.sender,
                text=line.text,
                chat_type="group" if line.chat == "group" else "console",
                addressed=line.addressed,
                platform_message_id=str(number),
            )
        )


def replay_config(config: Config, data_dir: Path, window: int | None) -> Config:
    """The config for a replay: a scratch data dir, no user hooks, optionally a forced window."""
    model = config.model
    if window is not None:
        model = dataclasses.replace(model, context_length=window)
    return dataclasses.replace(config, data_dir=data_dir, model=model, hooks=())


async def replay(
    config: Config, lines: list[ReplayLine], *, scripted: bool = False
) -> ReplayResult:
    """Feed ``lines`` through a gateway built from ``config``; returns what happened."""
    providers = Providers(ScriptedProvider(config.model.name)) if scripted else None
    adapter = ReplayAdapter()
    gateway = Gateway(config, [adapter], providers=providers)
    main = gateway.providers.main
    result = ReplayResult(config.model.name, main.name, gateway.current_window(), 0)
    current = {"turn": 0, "message": 0}

    def on_compress(event: str, payload: Payload) -> None:
        result.compressions.append(
            ReplayCompression(
                turn=current["turn"],
                message=current["message"],
                trigger_source=str(payload.get("trigger_source")),
                method=str(payload.get("method")),
                tokens_before=int(payload.get("tokens_before") or 0),
                tokens_after=int(payload.get("tokens_after") or 0),
                messages_before=int(payload.get("messages_before") or 0),
                messages_after=int(payload.get("messages_after") or 0),
            )
        )

    def on_error(event: str, payload: Payload) -> None:
        result.errors[str(payload.get("kind"))] += 1

    gateway.events.subscribe(["session:compress"], on_compress, name="replay")
    gateway.events.subscribe(["agent:error"], on_error, name="replay")
    started = time.perf_counter()
    await gateway.start()
    try:
        for number, line in enumerate(lines, 1):
            current["message"] = number
            current["turn"] = len(result.turns) + (1 if line.addressed else 0)
            await adapter.post(line, number)
            await gateway.lanes.wait_idle()
            await gateway.events.drain()  # the compress events of this message land here
            result.messages += 1
            if not line.addressed:
                result.observed += 1
                continue
            result.turns.append(await _turn_point(gateway, len(result.turns) + 1, number))
        await _final_counts(gateway, result)
    finally:
        await gateway.stop()
    result.seconds = time.perf_counter() - started
    return result


async def _turn_point(gateway: Gateway, turn: int, message: int) -> TurnPoint:
    record = await gateway.store.conversation.current_session(SESSION_KEY)
    if record is not None and record.anchor is not None:
        return TurnPoint(turn, message, record.anchor.prompt_tokens, "reported")
    rows = await gateway.store.conversation.load_active(record.id) if record is not None else []
    return TurnPoint(turn, message, sum(r.token_count for r in rows), "estimated")


async def _final_counts(gateway: Gateway, result: ReplayResult) -> None:
    runtime = gateway.sessions.cached(SESSION_KEY)
    if runtime is not None:
        result.window = runtime.engine.context_length
        result.threshold = runtime.engine.threshold_tokens
    record = await gateway.store.conversation.current_session(SESSION_KEY)
    rows = await gateway.store.operator.export_rows(SESSION_KEY)
    current = {r.id for s, r in rows if record is not None and s == record.id and r.active}
    result.active_rows = len(current)
    result.active_tokens = sum(r.token_count for _, r in rows if r.id in current)
    result.archived_rows = len(rows) - len(current)


def summarize(result: ReplayResult, source: str, chart: Path | None) -> str:
    """The one-screen text summary."""
    window = result.window
    prompts = [t.prompt_tokens for t in result.turns]
    errors = sum(result.errors.values())
    lines = [
        f"Replayed {result.messages:,} messages from {source}: {len(result.turns):,} turns, "
        f"{result.observed:,} observed, {errors} failed turns in {result.seconds:.1f} s",
        f"Model {result.model} via {result.provider}; window {window:,} tokens; compression "
        f"threshold {result.threshold:,}; hygiene {result.hygiene_threshold:,}",
    ]
    if prompts:
        lines.append(
            f"Prompt tokens per turn: max {max(prompts):,} ({max(prompts) / window:.0%} of the "
            f"window), median {int(statistics.median(prompts)):,}, last {prompts[-1]:,}"
        )
    by_trigger = Counter(c.trigger_source for c in result.compressions)
    by_method = Counter(c.method for c in result.compressions)
    lines.append(
        f"Compressions: {len(result.compressions)}"
        + (f" ({_counts(by_trigger)}); methods: {_counts(by_method)}" if by_trigger else "")
    )
    for mark in result.compressions[:8]:
        lines.append(
            f"  turn {mark.turn:>4} (message {mark.message:>5}): {mark.trigger_source}, "
            f"{mark.tokens_before:,} → {mark.tokens_after:,} tokens, "
            f"{mark.messages_before} → {mark.messages_after} messages"
        )
    if len(result.compressions) > 8:
        lines.append(f"  … and {len(result.compressions) - 8} more (see the chart)")
    if result.turns and len(result.compressions) > len(result.turns) / 3:
        lines.append(
            f"Note: compressed on {len(result.compressions)} of {len(result.turns)} turns: what "
            "survives a compression (system prompt, summary, protected tail) is close to the "
            "threshold. A larger window, a higher compression.threshold or a smaller "
            "protect_last_n gives each compression more room."
        )
    if result.errors:
        lines.append(f"Failed turns by kind: {_counts(result.errors)}")
    lines.append(
        f"Rows archived: {result.archived_rows:,}; active now: {result.active_rows:,} "
        f"({result.active_tokens:,} tokens)"
    )
    if chart is not None:
        lines.append(f"Chart: {chart}")
    return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common())


async def run_replay_command(config: Config, args: Any) -> int:
    """``nightowl replay``: read, replay, write the chart, print the summary."""
    source = Path(args.file)
    try:
        lines = read_replay_file(source)
    except (OSError, ValueError) as exc:
        print(f"nightowl: {source}: {exc}", file=sys.stderr)
        return 1
    if args.window is not None and args.window < 512:
        print("nightowl: --window must be at least 512 tokens", file=sys.stderr)
        return 2
    if args.keep_data and (Path(args.keep_data) / "state.db").exists():
        print(
            f"nightowl: {args.keep_data} already holds a database; give --keep-data an empty "
            "directory (a replay never writes into an existing one)",
            file=sys.stderr,
        )
        return 2
    chart = Path(args.chart) if args.chart else source.with_suffix(".svg")
    with tempfile.TemporaryDirectory(prefix="nightowl-replay-") as scratch:
        data_dir = Path(args.keep_data) if args.keep_data else Path(scratch)
        settings = replay_config(config, data_dir, args.window)
        result = await replay(settings, lines, scripted=args.provider == "scripted")
    chart.write_text(render_chart(result, title=f"nightowl replay: {source.name}"), "utf-8")
    print(summarize(result, source.name, chart))
    return 0
