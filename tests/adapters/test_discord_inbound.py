"""Discord messages in: DMs, channels, threads, addressing, replies, attachments, dedupe."""

from __future__ import annotations

from adapters.base import InboundMessage
from tests.adapters.discord_fixtures import fake_and_adapter
from tests.fakes.discord_world import (
    ALICE,
    BOT_ID,
    BOT_ROLE_ID,
    BOT_USER,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    FREE_CHANNEL_ID,
    OTHER_BOT,
    THREAD_ID,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


async def test_dm_round_trip_replies_in_the_dm_referencing_the_message() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        sent_by_alice = await fake.dispatch_message(DM_CHANNEL_ID, "hello owl")

        [inbound] = await sink.wait_for(1)
        [reply] = await fake.wait_for_sent(1)

    assert inbound.platform == "discord"
    assert inbound.chat_type == "private"
    assert inbound.chat_id == str(DM_CHANNEL_ID)
    assert inbound.user_id == ALICE["id"]
    assert inbound.user_name == "Alice"
    assert inbound.text == "hello owl"
    assert inbound.addressed
    assert inbound.platform_message_id == sent_by_alice["id"]
    assert inbound.dedupe_key == f"discord:{sent_by_alice['id']}"
    assert reply.channel_id == DM_CHANNEL_ID
    assert reply.content == "echo: hello owl"
    assert reply.payload["message_reference"]["message_id"] == int(sent_by_alice["id"])
    assert reply.payload["message_reference"]["fail_if_not_exists"] is False


async def test_channel_message_without_mention_is_observed_and_not_answered() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, "chatting among humans")
        addressed = await fake.dispatch_message(CHANNEL_ID, f"<@{BOT_ID}> now you")

        observed, spoken_to = await sink.wait_for(2)
        await fake.wait_for_sent(1)

    assert observed.chat_type == "group"
    assert observed.chat_id == str(CHANNEL_ID)
    assert observed.text == "chatting among humans"
    assert not observed.addressed
    assert spoken_to.addressed
    assert [s.payload["message_reference"]["message_id"] for s in fake.sent] == [
        int(addressed["id"])
    ]


async def test_mention_is_stripped_and_the_reply_references_the_message() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        question = await fake.dispatch_message(
            CHANNEL_ID, f"<@{BOT_ID}> what did <@{ALICE['id']}> ask, @{BOT_USER['username']}?"
        )

        [inbound] = await sink.wait_for(1)
        [reply] = await fake.wait_for_sent(1)

    assert inbound.addressed
    assert inbound.text == "what did @Alice ask, @nightowl?"
    assert reply.channel_id == CHANNEL_ID
    assert reply.payload["message_reference"]["message_id"] == int(question["id"])


async def test_mentioning_the_bots_role_addresses_it() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, f"<@&{BOT_ROLE_ID}> status please")

        [inbound] = await sink.wait_for(1)

    assert inbound.addressed
    assert inbound.text == "status please"


async def test_a_reply_to_the_bot_is_addressed_and_carries_the_quoted_text() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(DM_CHANNEL_ID, "warm-up")
        [bot_reply] = await fake.wait_for_sent(1)
        await fake.dispatch_message(CHANNEL_ID, "not for the bot")
        await fake.dispatch_message(CHANNEL_ID, "and why is that?", referenced=bot_reply.message_id)

        _, human_chatter, follow_up = await sink.wait_for(3)

    assert not human_chatter.addressed
    assert follow_up.addressed
    assert follow_up.reply_to is not None
    assert follow_up.reply_to.text == "echo: warm-up"
    assert follow_up.reply_to.from_bot


async def test_a_reply_to_a_human_is_quoted_but_not_addressed() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        original = await fake.dispatch_message(CHANNEL_ID, "the plan is to ship friday")
        await fake.dispatch_message(CHANNEL_ID, "agreed", referenced=int(original["id"]))

        _, agreed = await sink.wait_for(2)

    assert not agreed.addressed
    assert agreed.reply_to is not None
    assert agreed.reply_to.text == "the plan is to ship friday"
    assert agreed.reply_to.author == "Alice"
    assert not agreed.reply_to.from_bot


async def test_thread_message_has_its_own_chat_and_is_answered_in_the_thread() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(THREAD_ID, f"<@{BOT_ID}> in the thread")

        [inbound] = await sink.wait_for(1)
        [reply] = await fake.wait_for_sent(1)

    assert inbound.chat_type == "thread"
    assert inbound.chat_id == str(THREAD_ID)
    assert inbound.thread_id is None
    assert reply.channel_id == THREAD_ID


async def test_free_response_channel_and_typed_commands_are_addressed() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(FREE_CHANNEL_ID, "anyone here?")
        await fake.dispatch_message(CHANNEL_ID, "/status")

        free, command = await sink.wait_for(2)

    assert free.addressed
    assert command.addressed
    assert command.text == "/status"


async def test_require_mention_off_addresses_every_channel_message() -> None:
    async with fake_and_adapter(require_mention=False) as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, "no mention at all")

        [inbound] = await sink.wait_for(1)

    assert inbound.addressed


async def test_own_and_other_bots_messages_are_ignored() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, "I said this", author=BOT_USER)
        await fake.dispatch_message(CHANNEL_ID, f"<@{BOT_ID}> beep", author=OTHER_BOT)
        await fake.dispatch_message(CHANNEL_ID, "a human")

        [only] = await sink.wait_for(1)
        await fake.dispatch_message(CHANNEL_ID, "another human")
        await sink.wait_for(2)

    assert only.text == "a human"
    assert [m.text for m in sink.received] == ["a human", "another human"]


async def test_allow_bots_passes_other_bots_but_never_its_own() -> None:
    async with fake_and_adapter(allow_bots=True) as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, "I said this", author=BOT_USER)
        await fake.dispatch_message(CHANNEL_ID, f"<@{BOT_ID}> beep", author=OTHER_BOT)

        [inbound] = await sink.wait_for(1)

    assert inbound.user_id == OTHER_BOT["id"]
    assert inbound.text == "beep"


async def test_a_redelivered_message_is_passed_once() -> None:
    async with fake_and_adapter(echo=False) as (fake, _adapter, sink):
        first = await fake.dispatch_message(CHANNEL_ID, "once")
        await sink.wait_for(1)
        await fake.replay(first)
        await fake.dispatch_message(CHANNEL_ID, "twice")

        messages = await sink.wait_for(2)

    assert [m.text for m in messages] == ["once", "twice"]


async def test_images_and_documents_are_fetched_on_demand_and_large_images_only_named() -> None:
    big = PNG + b"\x00" * 2048
    async with fake_and_adapter(max_image_bytes=1024) as (fake, _adapter, sink):
        await fake.dispatch_message(
            DM_CHANNEL_ID,
            "look",
            attachments=[("cat.png", "image/png", PNG), ("big.png", "image/png", big),
                         ("notes.txt", "text/plain; charset=utf-8", b"hi")],
        )  # fmt: skip

        [inbound] = await sink.wait_for(1)
        assert fake.attachment_downloads == 0  # nothing is fetched on arrival
        cat, huge, notes = inbound.attachments
        assert await cat.read() == PNG  # only when the gateway asks
        assert fake.attachment_downloads == 1

    assert (cat.kind, cat.mime_type, cat.name) == ("image", "image/png", "cat.png")
    assert (huge.kind, huge.data, huge.name, huge.fetch) == ("file", b"", "big.png", None)
    assert (notes.kind, notes.mime_type, notes.data) == ("document", "text/plain", b"")
    assert notes.fetch is not None  # the gateway reads documents (docs/design.md#documents)


async def test_unaddressed_images_are_not_downloaded() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(CHANNEL_ID, "", attachments=[("cat.png", "image/png", PNG)])

        [inbound] = await sink.wait_for(1)

    assert not inbound.addressed
    assert [(a.kind, a.data) for a in inbound.attachments] == [("image", b"")]
    assert fake.attachment_downloads == 0


async def read_images(message: InboundMessage) -> None:
    for attachment in message.attachments:
        await attachment.read()


async def test_messages_of_one_chat_keep_their_order_while_an_image_downloads() -> None:
    async with fake_and_adapter(echo=False) as (fake, _adapter, sink):
        sink.before = read_images  # as the gateway does, before the message is stored
        fake.hold_attachment_downloads()
        await fake.dispatch_message(
            DM_CHANNEL_ID, "picture", attachments=[("a.png", "image/png", PNG)]
        )
        await fake.wait_until(lambda: fake.attachment_downloads == 1)
        await fake.dispatch_message(DM_CHANNEL_ID, "caption for the picture")
        await fake.dispatch_message(CHANNEL_ID, "meanwhile elsewhere")

        [elsewhere] = await sink.wait_for(1)
        fake.release_attachment_downloads()
        _, picture, caption = await sink.wait_for(3)

    assert elsewhere.text == "meanwhile elsewhere"
    assert (picture.text, caption.text) == ("picture", "caption for the picture")


async def test_threads_of_a_free_response_channel_are_free_too() -> None:
    async with fake_and_adapter(free_response_channels=(CHANNEL_ID,)) as (fake, _adapter, sink):
        await fake.dispatch_message(THREAD_ID, "no mention needed here")

        [inbound] = await sink.wait_for(1)

    assert inbound.chat_type == "thread"
    assert inbound.addressed
