"""The replay chart: prompt tokens per turn against the window, compressions marked.

Plain SVG written by hand (no plotting dependency): a line of the prompt size the model
saw at each turn, dashed lines for the window, the hygiene threshold (85%) and the
compression threshold, and a vertical marker for every compression, coloured by what
triggered it (hover a marker for the numbers).
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from gateway.charts import OTHER_COLOUR, TRIGGER_COLOURS, Scale, scales
from gateway.ops.replay.results import ReplayResult

WIDTH, HEIGHT = 960, 440
LEFT, RIGHT, TOP, BOTTOM = 78, 24, 64, 52


def render_chart(result: ReplayResult, *, title: str = "nightowl replay") -> str:
    """The SVG document for ``result``."""
    turns = max(1, len(result.turns))
    top_value = max(result.window, result.max_prompt, 1) * 1.08
    x, y = scales(turns, top_value, (WIDTH, HEIGHT), (LEFT, RIGHT, TOP, BOTTOM))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
        *_axes(turns, top_value, x, y),
        *_limit_lines(result, y),
        *_compression_markers(result, x, y),
        *_prompt_line(result, x, y),
        *_legend(result),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def _axes(turns: int, top_value: float, x: Scale, y: Scale) -> list[str]:
    out = [
        f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - RIGHT}" y2="{y(0):.1f}" stroke="#333"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{y(0):.1f}" stroke="#333"/>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle">'
        "turn</text>",
        f'<text x="16" y="{(TOP + y(0)) / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(TOP + y(0)) / 2:.0f})">prompt tokens</text>',
    ]
    for value in _ticks(top_value):
        out.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - RIGHT}" y2="{y(value):.1f}" '
            'stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_short(value)}</text>'
        )
    for turn in _ticks(turns, start=1):
        out.append(
            f'<text x="{x(turn):.1f}" y="{y(0) + 18:.1f}" text-anchor="middle">{int(turn)}</text>'
        )
    return out


def _limit_lines(result: ReplayResult, y: Scale) -> list[str]:
    lines = [
        (result.window, "#c0392b", "8 4", f"window {result.window:,}"),
        (result.hygiene_threshold, "#8e44ad", "3 3", f"hygiene 85% {result.hygiene_threshold:,}"),
        (result.threshold, "#e67e22", "6 3", f"compression threshold {result.threshold:,}"),
    ]
    out = []
    for value, colour, dash, label in lines:
        if value <= 0:
            continue
        out.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - RIGHT}" y2="{y(value):.1f}" '
            f'stroke="{colour}" stroke-dasharray="{dash}" class="limit"/>'
            f'<text x="{WIDTH - RIGHT - 4}" y="{y(value) - 4:.1f}" text-anchor="end" '
            f'fill="{colour}">{escape(label)}</text>'
        )
    return out


def _compression_markers(result: ReplayResult, x: Scale, y: Scale) -> list[str]:
    out = []
    for mark in result.compressions:
        colour = TRIGGER_COLOURS.get(mark.trigger_source, OTHER_COLOUR)
        where = x(max(mark.turn, 1) - 0.5)
        tip = (
            f"turn {mark.turn} (message {mark.message}): {mark.trigger_source} via "
            f"{mark.method}, {mark.tokens_before:,} → {mark.tokens_after:,} tokens, "
            f"{mark.messages_before} → {mark.messages_after} messages"
        )
        out.append(
            f'<line class="compression" data-trigger="{escape(mark.trigger_source)}" '
            f'x1="{where:.1f}" y1="{TOP}" x2="{where:.1f}" y2="{y(0):.1f}" stroke="{colour}" '
            f'stroke-width="1.5" opacity="0.8"><title>{escape(tip)}</title></line>'
        )
    return out


def _prompt_line(result: ReplayResult, x: Scale, y: Scale) -> list[str]:
    if not result.turns:
        return [f'<text x="{LEFT + 20}" y="{TOP + 30}">no turns (nothing was addressed)</text>']
    points = " ".join(f"{x(t.turn):.1f},{y(t.prompt_tokens):.1f}" for t in result.turns)
    out = [
        f'<polyline class="prompt" points="{points}" fill="none" stroke="#2471a3" '
        'stroke-width="1.6"/>'
    ]
    if len(result.turns) <= 300:
        for t in result.turns:
            out.append(
                f'<circle cx="{x(t.turn):.1f}" cy="{y(t.prompt_tokens):.1f}" r="2" '
                f'fill="#2471a3"><title>turn {t.turn}: {t.prompt_tokens:,} tokens '
                f"({t.source})</title></circle>"
            )
    return out


def _legend(result: ReplayResult) -> list[str]:
    entries = [("prompt tokens per turn", "#2471a3")]
    for trigger in dict.fromkeys(c.trigger_source for c in result.compressions):
        entries.append((f"compression: {trigger}", TRIGGER_COLOURS.get(trigger, OTHER_COLOUR)))
    out, cursor = [], LEFT
    for label, colour in entries:
        out.append(
            f'<rect x="{cursor}" y="36" width="14" height="4" fill="{colour}"/>'
            f'<text x="{cursor + 18}" y="42">{escape(label)}</text>'
        )
        cursor += 26 + 7 * len(label)
    return out


def _ticks(top: float, start: float = 0, count: int = 5) -> list[float]:
    """About ``count`` round tick values from ``start`` up to ``top``."""
    span = max(top - start, 1)
    raw = span / count
    magnitude = 10 ** (len(str(int(raw))) - 1)
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = start if start == 0 else max(start, step)
    values = [first]
    while values[-1] + step <= top:
        values.append(values[-1] + step)
    return values


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"
