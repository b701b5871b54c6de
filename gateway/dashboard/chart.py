"""A session's chart: the prompt the model saw at every turn, against the window, the
hygiene line (85%) and the compressor's threshold, with a marker at every compression
(trigger, tokens before → after, on hover).

Plain SVG written by hand, inline in the page (no plotting library, no script): it
scales with the page through its viewBox, so it fits a phone as well.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from gateway.charts import OTHER_COLOUR, TRIGGER_COLOURS, Scale, scales
from gateway.store.dashboard_records import CompressionRecord, TurnStat

WIDTH, HEIGHT = 960, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 120, 16, 40
PROMPT_COLOUR = "#2563eb"


@dataclass(frozen=True)
class Limits:
    window: int
    hygiene: int
    threshold: int


def render_chart(
    turns: Sequence[TurnStat], compressions: Sequence[CompressionRecord], limits: Limits
) -> str:
    """The SVG element for a session page."""
    points = [(i + 1, t.prompt_tokens) for i, t in enumerate(turns) if t.prompt_tokens is not None]
    count = max(1, len(turns))
    top = max([limits.window, *(p for _, p in points), 1]) * 1.08
    x, y = scales(count, top, (WIDTH, HEIGHT), (LEFT, RIGHT, TOP, BOTTOM))
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="prompt tokens per turn" font-family="sans-serif" font-size="12">',
        *_axes(turns, top, y),
        *_limit_lines(limits, y),
        *_markers(turns, compressions, x, y),
        *_prompt_line(points, x, y),
        "</svg>",
    ]
    return "\n".join(parts)


def _axes(turns: Sequence[TurnStat], top: float, y: Scale) -> list[str]:
    bottom = HEIGHT - BOTTOM
    parts = [
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#555"/>',
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#555"/>',
    ]
    for share in (0.25, 0.5, 0.75, 1.0):
        tokens = top / 1.08 * share
        parts.append(
            f'<text x="{LEFT - 6}" y="{y(tokens) + 4:.1f}" text-anchor="end" fill="#555">'
            f"{_short(tokens)}</text>"
        )
    if turns:
        first, last = turns[0].at, turns[-1].at
        parts.append(f'<text x="{LEFT}" y="{bottom + 18}" fill="#555">{_when(first, last)}</text>')
        parts.append(
            f'<text x="{WIDTH - RIGHT}" y="{bottom + 18}" text-anchor="end" fill="#555">'
            f"{_when(last, first)} · {len(turns):,} turns</text>"
        )
    else:
        parts.append(f'<text x="{LEFT + 12}" y="{TOP + 24}" fill="#555">no turns yet</text>')
    return parts


def _limit_lines(limits: Limits, y: Scale) -> list[str]:
    parts = []
    for name, tokens, colour, dash in (
        ("window", limits.window, "#111", ""),
        ("hygiene", limits.hygiene, "#c0392b", ' stroke-dasharray="6 4"'),
        ("threshold", limits.threshold, "#e67e22", ' stroke-dasharray="2 4"'),
    ):
        if tokens <= 0:
            continue
        level = y(tokens)
        parts.append(
            f'<line class="limit {name}" x1="{LEFT}" y1="{level:.1f}" x2="{WIDTH - RIGHT}" '
            f'y2="{level:.1f}" stroke="{colour}"{dash}/>'
        )
        parts.append(
            f'<text x="{WIDTH - RIGHT + 6}" y="{level + 4:.1f}" fill="{colour}">'
            f"{name} {_short(tokens)}</text>"
        )
    return parts


def _markers(
    turns: Sequence[TurnStat], compressions: Sequence[CompressionRecord], x: Scale, y: Scale
) -> list[str]:
    """A vertical line between the turns a compression came between (an in-loop one: just
    before the turn it ran in, which committed after it)."""
    times = [t.at for t in turns]
    parts = []
    for record in compressions:
        before = bisect_right(times, record.at)
        mark = record.mark
        colour = TRIGGER_COLOURS.get(mark.trigger_source, OTHER_COLOUR)
        position = x(before + 0.5)
        title = (
            f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(record.at))} "
            f"{mark.trigger_source} ({mark.method}): {mark.tokens_before:,} → "
            f"{mark.tokens_after:,} tokens, {mark.messages_before} → {mark.messages_after} messages"
        )
        parts.append(
            f'<g class="compression" data-trigger={quoteattr(mark.trigger_source)}>'
            f"<title>{escape(title)}</title>"
            f'<line x1="{position:.1f}" y1="{TOP + 6}" x2="{position:.1f}" y2="{HEIGHT - BOTTOM}" '
            f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="3 3" opacity="0.6"/>'
            f'<path d="M{position - 4:.1f},{TOP} h8 l-4,7 z" fill="{colour}"/></g>'
        )
    return parts


def _prompt_line(points: list[tuple[int, int]], x: Scale, y: Scale) -> list[str]:
    if not points:
        return []
    coordinates = " ".join(f"{x(turn):.1f},{y(tokens):.1f}" for turn, tokens in points)
    parts = [
        f'<polyline class="prompt" points="{coordinates}" fill="none" '
        f'stroke="{PROMPT_COLOUR}" stroke-width="1.6"/>'
    ]
    if len(points) <= 200:  # a dot per turn while they stay apart
        parts += [
            f'<circle cx="{x(turn):.1f}" cy="{y(tokens):.1f}" r="2" fill="{PROMPT_COLOUR}">'
            f"<title>turn {turn}: {tokens:,} prompt tokens</title></circle>"
            for turn, tokens in points
        ]
    return parts


def _short(tokens: float) -> str:
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else f"{tokens:.0f}"


def _when(at: float, other: float) -> str:
    same_day = time.localtime(at)[:3] == time.localtime(other)[:3]
    return time.strftime("%H:%M" if same_day else "%b %d %H:%M", time.localtime(at))
