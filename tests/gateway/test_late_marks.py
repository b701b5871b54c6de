"""A late message's row says when it was sent (docs/design.md#late-messages)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from adapters.base import InboundMessage
from gateway.conversation.user_rows import LateMarks, sent_mark, user_row

NOW = datetime(2026, 12, 6, 7, 30, tzinfo=UTC)


def marks(late: LateMarks, key: str, *minutes_ago: float) -> list[str | None]:
    """Each message's mark, each stored after it (as the router does)."""
    said = []
    for minutes in minutes_ago:
        sent = NOW - timedelta(minutes=minutes)
        said.append(mark := late.mark(key, sent, NOW))
        late.stored(key, sent, NOW, marked=mark is not None)
    return said


def test_a_message_on_time_says_nothing() -> None:
    assert marks(LateMarks(UTC), "telegram:1", 0, 1.5) == [None, None]


def test_late_rows_are_marked_once_per_ten_minutes_and_the_first_on_time_row_too() -> None:
    late = LateMarks(UTC)
    said = marks(late, "telegram:1", 480, 476, 471, 470, 445, 3, 0, 0)
    assert said == [
        "(sent Dec 5, 23:30 UTC)",  # the night's first line: yesterday, so dated
        None,
        None,
        "(sent Dec 5, 23:40 UTC)",  # ten minutes of sending after the last mark
        "(sent 00:05 UTC)",
        "(sent 07:27 UTC)",  # three minutes late is still late
        "(sent 07:30 UTC)",  # the first on time: where the night ends
        None,
    ]


def test_each_chat_is_marked_on_its_own() -> None:
    late = LateMarks(UTC)
    assert marks(late, "telegram:1", 60) == ["(sent 06:30 UTC)"]
    assert marks(late, "telegram:2", 59) == ["(sent 06:31 UTC)"]
    assert marks(late, "telegram:1", 58) == [None]


def test_the_mark_is_in_the_configured_zone_and_a_naive_time_is_utc() -> None:
    late = LateMarks(ZoneInfo("Europe/Berlin"))
    sent = datetime(2026, 12, 6, 5, 0)  # naive: taken as UTC
    assert late.mark("telegram:1", sent, NOW) == "(sent 06:00 CET)"
    assert sent_mark(NOW - timedelta(days=3), NOW, UTC) == "(sent Dec 3, 07:30 UTC)"


def test_chats_remembered_are_bounded_and_a_forgotten_one_is_marked_again() -> None:
    late = LateMarks(UTC, limit=2)
    for key in ("a", "b", "c"):  # "a" is forgotten when "c" comes
        assert marks(late, key, 60) == ["(sent 06:30 UTC)"]
    assert marks(late, "a", 59) == ["(sent 06:31 UTC)"]
    assert marks(late, "c", 59) == [None]


def test_a_row_not_stored_moves_nothing_on() -> None:
    """A redelivered duplicate (or a row the store refused) is asked for its mark but
    never stored: the next late row still carries the mark the night needs."""
    late = LateMarks(UTC)
    duplicate = NOW - timedelta(minutes=30)
    assert late.mark("telegram:1", duplicate, NOW) == "(sent 07:00 UTC)"  # not stored
    assert marks(late, "telegram:1", 25) == ["(sent 07:05 UTC)"]


async def test_the_mark_is_a_line_of_its_own_before_a_group_members_named_lines() -> None:
    message = InboundMessage(
        "telegram", "-1001", "7", "server down\nagain", user_name="Bob", chat_type="group"
    )
    row = await user_row(
        message,
        instructs=False,
        take_images=False,
        vision=False,
        max_image_bytes=0,
        sent="(sent 23:30 UTC)",
    )
    assert row["content"] == (
        "(sent 23:30 UTC)\n(untrusted) Bob: server down\n(untrusted) Bob: again"
    )
