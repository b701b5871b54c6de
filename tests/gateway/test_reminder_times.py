"""Reading ``when`` for schedule_message: the forms people use, and clear refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.tools import ToolInputError
from gateway.scheduling.reminder_times import (
    check_due,
    describe_delay,
    describe_moment,
    parse_when,
    zone_named,
)

NOW = datetime(2025, 3, 4, 21, 30, tzinfo=UTC)  # a Tuesday evening
BERLIN = ZoneInfo("Europe/Berlin")  # UTC+1 in March before the switch


def when(text: str, zone=UTC) -> datetime:
    moment = parse_when(text, NOW, zone)
    check_due(moment, NOW, zone)
    return moment


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("in 20 minutes", timedelta(minutes=20)),
        ("in 2 hours", timedelta(hours=2)),
        ("in 3 days", timedelta(days=3)),
        ("in 1 second", timedelta(seconds=1)),
        ("In 1 hour and 30 minutes", timedelta(minutes=90)),
        ("in 1h30m", timedelta(minutes=90)),
        ("in an hour", timedelta(hours=1)),
        ("in 1.5 hours", timedelta(minutes=90)),
        ("in 2 weeks", timedelta(days=14)),
        ("in  45 mins", timedelta(minutes=45)),
    ],
)
def test_delays_count_from_now(text: str, delay: timedelta) -> None:
    assert when(text) == NOW + delay


def test_a_time_of_day_still_ahead_is_today() -> None:
    assert when("23:15") == datetime(2025, 3, 4, 23, 15, tzinfo=UTC)


def test_a_time_of_day_already_past_is_tomorrow() -> None:
    assert when("07:00") == datetime(2025, 3, 5, 7, 0, tzinfo=UTC)
    assert when("7am") == datetime(2025, 3, 5, 7, 0, tzinfo=UTC)
    assert when("9:45 pm") == datetime(2025, 3, 4, 21, 45, tzinfo=UTC)


def test_a_time_of_day_is_read_in_the_chat_time_zone() -> None:
    # 21:30 UTC is 22:30 in Berlin: 22:00 Berlin has passed, so it is tomorrow 21:00 UTC.
    assert when("22:00", BERLIN) == datetime(2025, 3, 5, 21, 0, tzinfo=UTC)
    assert when("23:00", BERLIN) == datetime(2025, 3, 4, 22, 0, tzinfo=UTC)


def test_a_time_of_day_across_a_daylight_saving_switch_keeps_the_wall_clock() -> None:
    saturday = datetime(2025, 3, 29, 12, 0, tzinfo=UTC)  # Berlin springs forward that night
    moment = parse_when("07:00", saturday, BERLIN)
    assert moment == datetime(2025, 3, 30, 5, 0, tzinfo=UTC)  # 07:00 CEST
    assert moment.astimezone(BERLIN).hour == 7


def test_iso_date_times_with_and_without_offsets() -> None:
    assert when("2025-03-05T07:00") == datetime(2025, 3, 5, 7, 0, tzinfo=UTC)
    assert when("2025-03-05T07:00", BERLIN) == datetime(2025, 3, 5, 6, 0, tzinfo=UTC)
    assert when("2025-03-05 07:00+02:00", BERLIN) == datetime(2025, 3, 5, 5, 0, tzinfo=UTC)
    assert when("2025-03-05T06:00:00Z") == datetime(2025, 3, 5, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "required"),
        ("   ", "required"),
        ("tomorrow-ish", "could not read"),
        ("in a while", "could not read"),
        ("in 5 fortnights", "could not read"),
        ("in -5 minutes", "could not read"),
        ("7", "could not read"),
        ("25:00", "not a time of day"),
        ("13pm", "not a time of day"),
        ("in 0 minutes", "not in the future"),
        ("2025-03-04T21:00", "not in the future"),
        ("2020-01-01", "not in the future"),
        ("in 400 days", "too far ahead"),
        ("in 99999999999999 days", "too far ahead"),
        ("2027-01-01T00:00", "too far ahead"),
    ],
)
def test_unusable_times_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(ToolInputError, match=reason) as refused:
        when(text)
    if reason == "could not read":
        assert "in 20 minutes" in str(refused.value)  # the model is told what works


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ToolInputError, match="IANA"):
        zone_named("Mars/Olympus")
    assert zone_named("") is UTC
    assert zone_named("Europe/Berlin") == BERLIN


def test_times_are_said_back_in_the_chat_zone() -> None:
    moment = datetime(2025, 3, 5, 6, 0, tzinfo=UTC)
    assert describe_moment(moment, BERLIN) == "Wednesday, 2025-03-05 07:00 (Europe/Berlin)"
    assert describe_moment(moment, UTC) == "Wednesday, 2025-03-05 06:00 (UTC)"
    assert describe_delay(1) == "1 second"
    assert describe_delay(3 * 3600 + 5 * 60 + 9) == "3 hours 5 minutes"
    assert describe_delay(2 * 86400 + 60) == "2 days 1 minute"
