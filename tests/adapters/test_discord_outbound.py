"""Discord replies out: splitting, long replies as files, no pings, typing, failures."""

from __future__ import annotations

import re

import pytest

from adapters.base import DeliveryError, OutboundMessage
from tests.adapters.discord_fixtures import TOKEN, fake_and_adapter
from tests.fakes.discord_world import CHANNEL_ID, DM_CHANNEL_ID, THREAD_ID

_FENCE_LINE = re.compile(r"^```.*$", re.MULTILINE)


def _reply(text: str, chat_id: int = CHANNEL_ID, reply_to: str | None = None) -> OutboundMessage:
    return OutboundMessage(
        platform="discord", chat_id=str(chat_id), text=text, reply_to_message_id=reply_to
    )


def _long_reply_with_a_code_block() -> str:
    prose = " ".join(f"word{i}" for i in range(330))  # ~2,700 chars, so the fence is cut
    code = "\n".join(f"    print('line {i:03d}')" for i in range(90))
    return f"{prose}\n\n```python\n{code}\n```\n\nThat is all."


async def test_a_5000_char_reply_is_split_with_balanced_code_fences() -> None:
    text = _long_reply_with_a_code_block()
    assert 4500 < len(text) < 6000
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        question = await fake.dispatch_message(DM_CHANNEL_ID, "show me code")
        ids = await adapter.send(_reply(text, DM_CHANNEL_ID, question["id"]))

    parts = [s.content for s in fake.sent]
    assert len(parts) == 3
    assert ids == [str(s.message_id) for s in fake.sent]
    assert all(len(part) <= 2000 for part in parts)
    assert all(len(_FENCE_LINE.findall(part)) % 2 == 0 for part in parts)
    assert parts[2].startswith("```python")  # the cut block is reopened with its language
    strip = lambda s: re.sub(r"\s+", "", _FENCE_LINE.sub("", s))  # noqa: E731
    assert strip("".join(parts)) == strip(text)
    references = [s.payload.get("message_reference") for s in fake.sent]
    assert references[0]["message_id"] == int(question["id"])
    assert references[1:] == [None, None]


async def test_a_very_long_reply_is_its_first_part_plus_the_full_text_as_a_file() -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum " * 40 for i in range(40))
    assert len(text) > 4 * 2000
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        ids = await adapter.send(_reply(text))

    [message] = fake.sent
    assert ids == [str(message.message_id)]
    assert len(message.content) <= 2000
    assert message.content.startswith("Paragraph 0: lorem ipsum")
    assert "reply.md" in message.content
    assert message.files == [("reply.md", text.encode())]


async def test_model_output_never_pings_everyone_roles_or_users() -> None:
    text = "@everyone @here <@&123456> <@6000000000000001> look! " + "x " * 1500
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        question = await fake.dispatch_message(DM_CHANNEL_ID, "ping them all")
        await adapter.send(_reply(text, DM_CHANNEL_ID, question["id"]))

    assert len(fake.sent) == 2
    for message in fake.sent:
        allowed = message.payload["allowed_mentions"]
        assert allowed["parse"] == []  # no "everyone", "roles" or "users"
        assert not allowed.get("users") and not allowed.get("roles")
        assert not allowed.get("replied_user")


async def test_reply_to_a_thread_goes_into_the_thread() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        await adapter.send(_reply("in the thread", THREAD_ID))

    assert [(s.channel_id, s.content) for s in fake.sent] == [(THREAD_ID, "in the thread")]


async def test_typing_is_shown_and_refreshed_for_the_whole_block_only() -> None:
    async with fake_and_adapter(echo=False, typing_interval=0.02) as (fake, adapter, _sink):
        async with adapter.typing(str(CHANNEL_ID)):
            await fake.wait_until(lambda: len(fake.typing_calls) >= 3)
        after_block = len(fake.typing_calls)
        # An absence shows only over time: measure it in refreshes of another channel's
        # typing, which run on the same timer a leaked refresh would.
        async with adapter.typing(str(THREAD_ID)):
            await fake.wait_until(lambda: fake.typing_calls.count(THREAD_ID) >= 4)

    assert set(fake.typing_calls[:after_block]) == {CHANNEL_ID}
    assert fake.typing_calls.count(CHANNEL_ID) == after_block


async def test_a_failing_typing_indicator_does_not_break_the_turn() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        fake.fail_typing = True
        async with adapter.typing(str(CHANNEL_ID)):
            await fake.wait_until(lambda: fake.typing_failures >= 1)
        await adapter.send(_reply("still answered"))

    assert [s.content for s in fake.sent] == ["still answered"]


@pytest.mark.parametrize(
    ("status", "reason"), [(403, "Missing Permissions"), (404, "Unknown Channel")]
)
async def test_a_refused_send_raises_delivery_error_with_the_channel(
    status: int, reason: str
) -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        fake.fail_next_sends(status, message=reason)
        with pytest.raises(DeliveryError) as caught:
            await adapter.send(_reply("nobody will see this"))

    assert caught.value.platform == "discord"
    assert caught.value.chat_id == str(CHANNEL_ID)
    assert str(status) in str(caught.value) and reason in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert fake.sent == []


async def test_blank_replies_send_nothing_and_a_stopped_adapter_refuses() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        assert await adapter.send(_reply("  \n")) == []
    assert fake.sent == []

    with pytest.raises(DeliveryError):
        await adapter.send(_reply("too late"))


async def test_a_429_is_waited_out_and_the_reply_still_arrives() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        fake.rate_limit_next_send(retry_after=0.05)
        ids = await adapter.send(_reply("after the flood gate"))

    assert fake.rate_limited_sends == 1
    assert [s.content for s in fake.sent] == ["after the flood gate"]
    assert ids == [str(fake.sent[0].message_id)]


async def test_links_other_than_http_and_mailto_are_sent_as_plain_text() -> None:
    # docs/design.md#outbound-links: a backslash makes Discord show the character, no link.
    text = (
        "Ask [the admin](tg://user?id=777), add <tg://proxy?server=p.example&port=1>,\n"
        "open [app](discord://-/channels/1/2), read [docs](https://example.org/a_(b)) or"
        " [write](mailto:owl@example.org) or <https://example.org>.\n"
        "Code keeps it: `[x](tg://user?id=1)`\n```\n[y](tg://user?id=2)\n```"
    )
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        await adapter.send(_reply(text))

    [message] = fake.sent
    assert message.content == (
        "Ask [the admin]\\(tg://user?id=777), add \\<tg://proxy?server=p.example&port=1>,\n"
        "open [app]\\(discord://-/channels/1/2), read [docs](https://example.org/a_(b)) or"
        " [write](mailto:owl@example.org) or <https://example.org>.\n"
        "Code keeps it: `[x](tg://user?id=1)`\n```\n[y](tg://user?id=2)\n```"
    )
