"""Reading the ``when`` of a ``schedule_message`` call, and saying times back to people.

Three forms, all in the chat's time zone unless they carry their own offset:

- an ISO date-time: ``2025-03-01T07:00``, ``2025-03-01 07:00+01:00``, ``2025-03-01T06:00Z``
- a time of day: ``07:00``, ``7:30pm``, ``7am`` — today, or tomorrow once it has passed
- a delay: ``in 20 minutes``, ``in 2 hours``, ``in 3 days``, ``in 1 hour 30 minutes``,
  ``in an hour``, ``in 1h30m``

Anything else, a time in the past or one more than :data:`MAX_AHEAD` away is refused
with a :class:`~agent.tools.ToolInputError` whose message tells the model what works.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.tools import ToolInputError

MAX_AHEAD = timedelta(days=366)

FORMS = (
    "use an ISO date-time like 2025-03-01T07:00, a time of day like 07:00, "
    "or a delay like 'in 20 minutes', 'in 2 hours', 'in 3 days'"
)

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
    "y": 31536000,
    "year": 31536000,
    "years": 31536000,
}
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_FILLER = re.compile(r",|\band\b")
_ONE = re.compile(r"\b(?:an?|one)\b")
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?")


def zone_named(name: str | None) -> tzinfo:
    """The IANA zone ``name`` (UTC when empty); unknown names are the model's mistake."""
    if not name or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolInputError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Berlin"
        ) from None


def parse_when(when: str, now: datetime, zone: tzinfo) -> datetime:
    """The moment ``when`` names, as an aware datetime; ``now`` must be aware.

    Does not judge the result: :func:`check_due` refuses past and far-off moments.
    """
    text = " ".join(when.strip().lower().split())
    if not text:
        raise ToolInputError(f"'when' is required: {FORMS}")
    if text.startswith("in "):
        return now + _delay(text[3:], when)
    clock = _CLOCK.fullmatch(text)
    if clock and (clock.group(2) or clock.group(4)):
        return _next_time_of_day(clock, now, zone, when)
    try:
        moment = datetime.fromisoformat(when.strip())
    except ValueError:
        raise ToolInputError(f"could not read when={when!r}; {FORMS}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment


def check_due(moment: datetime, now: datetime, zone: tzinfo) -> None:
    """Refuse moments that are not in the future or more than :data:`MAX_AHEAD` away."""
    if moment <= now:
        raise ToolInputError(
            f"{describe_moment(moment, zone)} is not in the future "
            f"(it is now {describe_moment(now, zone)}); pick a later time"
        )
    if moment - now > MAX_AHEAD:
        raise ToolInputError(
            f"{describe_moment(moment, zone)} is too far ahead; reminders can be at most "
            f"{MAX_AHEAD.days} days away"
        )


def describe_moment(moment: datetime, zone: tzinfo) -> str:
    """``Tuesday, 2025-03-04 07:00 (Europe/Berlin)`` — what a person reads back."""
    local = moment.astimezone(zone)
    seconds = ":%S" if local.second else ""
    return local.strftime(f"%A, %Y-%m-%d %H:%M{seconds}") + f" ({_zone_label(zone)})"


def describe_delay(seconds: float) -> str:
    """``2 hours 5 minutes`` (whole units, the two largest that matter)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return _plural(seconds, "second")
    parts = []
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(_plural(count, unit))
    return " ".join(parts[:2])


def _delay(text: str, original: str) -> timedelta:
    text = _ONE.sub("1", _FILLER.sub(" ", text)).replace(" ", "")
    total = 0.0
    position = 0
    for match in _AMOUNT.finditer(text):
        unit = _UNITS.get(match.group(2))
        if match.start() != position or unit is None:
            break
        total += float(match.group(1)) * unit
        position = match.end()
    if position == 0 or position != len(text):
        raise ToolInputError(f"could not read when={original!r}; {FORMS}")
    if total > MAX_AHEAD.total_seconds():
        raise ToolInputError(
            f"{original!r} is too far ahead; reminders can be at most {MAX_AHEAD.days} days away"
        )
    return timedelta(seconds=total)


def _next_time_of_day(clock: re.Match[str], now: datetime, zone: tzinfo, original: str) -> datetime:
    hour, minute, second = int(clock.group(1)), int(clock.group(2) or 0), int(clock.group(3) or 0)
    meridiem = (clock.group(4) or "").replace(".", "")
    if meridiem:
        if not 1 <= hour <= 12:
            raise ToolInputError(f"{original!r} is not a time of day; {FORMS}")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ToolInputError(f"{original!r} is not a time of day; {FORMS}")
    today = now.astimezone(zone).date()
    at = time(hour, minute, second)
    moment = datetime.combine(today, at, tzinfo=zone)
    if moment <= now:
        moment = datetime.combine(today + timedelta(days=1), at, tzinfo=zone)
    return moment


def _zone_label(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or str(zone)


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" + ("" if count == 1 else "s")
