"""Pages from Jinja2 templates (``gateway/dashboard/templates``), escaped by default.

A page is answered as HTML, or — when the page's own script polls it (``Accept:
application/json``) — as its data plus its ``live_*`` blocks rendered again, which the
script puts in place: one template draws a page and its refreshes.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    import jinja2

#: Set by the guard for a logged-in request: what every page template gets.
PAGE: web.RequestKey[dict[str, object]] = web.RequestKey("page", dict)


@functools.cache
def environment() -> jinja2.Environment:
    """The templates, loaded at the first page anyone asks for: an idle dashboard does
    not hold Jinja2 in memory (docs/design.md#dashboard)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gateway.dashboard", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, ago=ago, duration=duration, number=number)
    env.globals.update(bar=bar)
    return env


def when(at: float | None) -> str:
    """``14:05`` today, ``Mar 02 14:05`` before; ``—`` for never."""
    if not at:
        return "—"
    same_day = time.localtime(at)[:3] == time.localtime()[:3]
    return time.strftime("%H:%M:%S" if same_day else "%b %d %H:%M", time.localtime(at))


def ago(at: float | None, now: float | None = None) -> str:
    """``12 s ago``, ``5 min ago``, ``3 h ago``, ``2 d ago``; ``never``."""
    if not at:
        return "never"
    seconds = max(0.0, (now or time.time()) - at)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 60:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"


def number(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def bar(value: float, total: float, kind: str = "") -> str:
    """A horizontal bar, ``value`` of ``total``, as inline SVG (no inline styles: the
    pages' Content-Security-Policy allows none); templates mark it ``|safe``: it holds
    numbers and the literal ``kind`` only."""
    share = 0.0 if total <= 0 else min(1.0, max(0.0, value / total))
    level = "high" if share >= 0.85 else "mid" if share >= 0.5 else "low"
    return (
        f'<svg class="bar {kind} {level}" viewBox="0 0 100 8" preserveAspectRatio="none" '
        f'aria-hidden="true"><rect class="track" width="100" height="8"/>'
        f'<rect class="fill" width="{share * 100:.1f}" height="8"/></svg>'
    )


def wants_json(request: web.Request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def render_page(
    request: web.Request, template_name: str, context: dict[str, Any], *, status: int = 200
) -> web.Response:
    """The page as HTML, or its data and live blocks as JSON for the page's refresh."""
    template = environment().get_template(template_name)
    context = {**context, **request.get(PAGE, {})}
    if wants_json(request):
        live = template.new_context(context)
        fragments = {
            name: "".join(block(live))
            for name, block in template.blocks.items()
            if name.startswith("live_")
        }
        return web.json_response(
            {"data": context.get("data"), "fragments": fragments}, status=status
        )
    return web.Response(
        text=template.render(context), content_type="text/html", charset="utf-8", status=status
    )
