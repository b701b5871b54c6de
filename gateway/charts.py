"""What the two prompt-token charts share, the dashboard's (gateway/dashboard/chart.py)
and the replay's (gateway/ops/replay/chart.py): a turn or a token count placed on the
plot, and a colour for what triggered each compression."""

from __future__ import annotations

from collections.abc import Callable

#: A turn number or a token count to an SVG coordinate.
Scale = Callable[[float], float]

TRIGGER_COLOURS = {
    "turn_start_threshold": "#e67e22",
    "pre_api": "#d35400",
    "post_tool": "#8e44ad",
    "gateway_hygiene": "#c0392b",
    "overflow": "#7f0000",
    "manual": "#16a085",
    "idle": "#2c3e50",
}
#: A trigger not in :data:`TRIGGER_COLOURS`.
OTHER_COLOUR = "#7f8c8d"


def scales(
    turns: int, top_tokens: float, size: tuple[int, int], margins: tuple[int, int, int, int]
) -> tuple[Scale, Scale]:
    """``x`` (turn 1..``turns``, each in the middle of its slot) and ``y`` (0..``top_tokens``,
    upwards) on an SVG of ``size`` (width, height) inside ``margins`` (left, right, top,
    bottom)."""
    width, height = size
    left, right, top, bottom = margins
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(turn: float) -> float:
        return left + (turn - 0.5) / turns * plot_w

    def y(tokens: float) -> float:
        return top + plot_h - tokens / top_tokens * plot_h

    return x, y
