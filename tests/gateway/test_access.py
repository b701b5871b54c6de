"""The access rule on its own (docs/design.md#authorization): who starts turns, what is
only context, when a refused sender is told."""

from __future__ import annotations

from pathlib import Path

from adapters.base import InboundMessage
from gateway.config import parse_config
from gateway.conversation.access import REFUSAL_PAUSE_SECONDS, Access
from gateway.platforms import Platforms
from tests.harness import RecordingAdapter

#: The platforms judged: Telegram, as its adapter describes it.
TELEGRAM = Platforms([RecordingAdapter("telegram")])


def config(tmp_path: Path, **telegram: object):
    section = {"allowed_users": ["1"], "allowed_chats": ["-5"], "pairing": False, **telegram}
    return parse_config({"data_dir": str(tmp_path), "platforms": {"telegram": section}}, {})


def message(user: str, chat: str, chat_type: str = "group") -> InboundMessage:
    return InboundMessage("telegram", chat, user, "hi", chat_type=chat_type)  # type: ignore[arg-type]


async def test_places_and_people(tmp_path: Path) -> None:
    access = Access(config(tmp_path), platforms=TELEGRAM)
    owner_elsewhere = await access.judge(message("1", "-9"))
    member_here = await access.judge(message("2", "-5"))
    owner_here = await access.judge(message("1", "-5"))
    nobody_here = await access.judge(message("", "-5"))
    assert not owner_elsewhere.turn and not owner_elsewhere.observe
    assert member_here.observe and not member_here.turn and not member_here.trusted
    assert owner_here.turn and owner_here.trusted
    assert not nobody_here.turn


async def test_group_members_all_lets_every_identified_member_start_turns(tmp_path: Path) -> None:
    access = Access(config(tmp_path, group_members="all"), platforms=TELEGRAM)
    member = await access.judge(message("2", "-5"))
    nobody = await access.judge(message("", "-5"))
    assert member.turn and not member.trusted  # a voice, but not an owner (/new stays theirs)
    assert not nobody.turn


async def test_a_refused_sender_is_told_at_most_once_an_hour(tmp_path: Path) -> None:
    now = [1_000.0]
    access = Access(config(tmp_path), clock=lambda: now[0], platforms=TELEGRAM)
    stranger = message("9", "9", "private")
    assert (await access.judge(stranger)).refusal
    assert access.should_tell(stranger)
    now[0] += REFUSAL_PAUSE_SECONDS - 1
    assert not access.should_tell(stranger)
    assert access.should_tell(message("8", "8", "private"))  # keyed by user
    now[0] += 1
    assert access.should_tell(stranger)
