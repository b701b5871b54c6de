"""What the gateway asks of a platform, not its name (docs/design.md#platform-traits):
session keys, private chats, trust, group-wide commands, chat events, and the one
command registry every list of commands is read from (docs/design.md#commands)."""

from __future__ import annotations

from pathlib import Path

from adapters.base import ChatMoved, InboundMessage, PlatformTraits
from gateway.build import discord_adapter, telegram_adapter
from gateway.config import parse_config
from gateway.conversation.access import Access
from gateway.conversation.command_registry import COMMANDS, HELP, MENU, command, is_group_wide
from gateway.platforms import Platforms
from tests.fakes.llm_server import FakeLLM, Reply
from tests.harness import RecordingAdapter, make_config, running_gateway, turns_done

BY_USER = PlatformTraits(private_session_by_user=True)
POSITIVE = PlatformTraits(private_ids_positive=True)


def registry(**traits: PlatformTraits) -> Platforms:
    platforms = Platforms()
    for name, declared in traits.items():
        platforms.add(name, declared)
    return platforms


def message(platform: str, chat: str, user: str = "7", **fields: object) -> InboundMessage:
    return InboundMessage(platform, chat, user, "hi", **fields)  # type: ignore[arg-type]


def test_session_keys_follow_what_the_platform_declares() -> None:
    platforms = registry(chat=POSITIVE, dms=BY_USER)
    assert platforms.session_key(message("chat", "-5", thread_id="3")) == "chat:-5:3"
    assert platforms.session_key(message("dms", "555", chat_type="private")) == "dms:dm:7"
    assert platforms.session_key(message("dms", "9", chat_type="group")) == "dms:9"
    # Another platform with the same chat: keyed by the chat, by the same rule.
    assert platforms.session_key(message("chat", "555", chat_type="private")) == "chat:555"


def test_a_session_key_is_private_only_when_its_platform_can_tell() -> None:
    operator = PlatformTraits(operator_only=True)
    platforms = registry(chat=POSITIVE, dms=BY_USER, terminal=operator, plain=PlatformTraits())
    assert platforms.is_private_chat("chat:42") and not platforms.is_private_chat("chat:-42")
    assert platforms.is_private_chat("dms:dm:7") and not platforms.is_private_chat("dms:42")
    assert platforms.is_private_chat("terminal:local")
    assert not platforms.is_private_chat("plain:42")  # cannot tell: a group's (fails closed)
    assert not platforms.is_private_chat("unknown:42")


def config(tmp_path: Path, platform: str = "discord", places: str = "allowed_channels"):
    allowed = {"allowed_users": ["7"], places: ["9"], "pairing": False}
    return parse_config({"data_dir": str(tmp_path), "platforms": {platform: allowed}}, {})


async def test_a_platform_no_adapter_declared_is_refused_whatever_the_config_says(
    tmp_path: Path,
) -> None:
    judged = await Access(config(tmp_path), platforms=Platforms()).judge(
        message("discord", "9", chat_type="group")
    )
    assert not judged.turn and not judged.observe and judged.refusal is None
    declared = Access(config(tmp_path), platforms=registry(discord=PlatformTraits()))
    assert (await declared.judge(message("discord", "9", chat_type="group"))).turn


def test_group_wide_commands_need_a_moderator_only_where_groups_have_them(
    tmp_path: Path,
) -> None:
    platforms = registry(discord=PlatformTraits(moderated_groups=True), plain=PlatformTraits())
    access = Access(config(tmp_path), platforms=platforms)
    owner = message("discord", "9", chat_type="group")
    assert not access.may_use_group_commands(owner, trusted=True)
    moderator = message("discord", "9", chat_type="group", can_moderate=True)
    assert access.may_use_group_commands(moderator, trusted=True)
    plain = Access(config(tmp_path, "telegram", "allowed_chats"), platforms=platforms)
    assert plain.may_use_group_commands(message("telegram", "9", chat_type="group"), trusted=True)


async def test_a_chat_move_event_takes_the_session_to_the_new_id(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter("telegram")
    allowed = {"allowed_users": ["u1"], "allowed_chats": ["-5"]}
    settings = make_config(tmp_path, fake_llm, platforms={"telegram": allowed})
    async with running_gateway(settings, adapter) as gateway:
        fake_llm.script(Reply("one"), Reply("two"))
        await adapter.say("fact: one", chat_id="-5", chat_type="group")
        await adapter.wait_sent(1)
        await turns_done(gateway)
        await adapter.tell(ChatMoved("telegram", "-5", "-1005"))
        # The new id is allowed where the old one was: nobody edits the config.
        await adapter.say("which fact?", chat_id="-1005", chat_type="group")
        await adapter.wait_sent(2)
        await turns_done(gateway)
        moved = await gateway.store.conversation.current_session("telegram:-1005")
        left = await gateway.store.conversation.current_session("telegram:-5")
    assert moved is not None and left is None
    assert "fact: one" in fake_llm.requests[-1].all_text


def test_every_list_of_commands_is_read_from_the_registry(tmp_path: Path) -> None:
    tokens = {"enabled": True, "token": "123:abc"}
    settings = parse_config(
        {"data_dir": str(tmp_path), "platforms": {"telegram": tokens, "discord": tokens}}, {}
    )
    assert telegram_adapter(settings).settings.bot_commands == MENU  # type: ignore[attr-defined]
    assert discord_adapter(settings).settings.slash_commands == MENU  # type: ignore[attr-defined]
    assert [line.split()[0] for line in HELP.splitlines()[1:]] == [f"/{c.name}" for c in COMMANDS]
    assert ("pair", "") not in MENU and all(description for _, description in MENU)
    assert command("reset") == command("new") and command("start") == command("help")
    assert is_group_wide("reset", "") and is_group_wide("model", "big")
    assert not is_group_wide("model", " ") and not is_group_wide("status", "x")
