"""Telegram receiving: exactly-once offsets, restarts, failing sinks, webhooks, health."""

from __future__ import annotations

import asyncio
import logging
import socket

import aiohttp
import pytest

from adapters.base import BotBlocked, ChatMoved, InboundMessage, OutboundMessage
from adapters.telegram import (
    TelegramAdapter,
    TelegramSettings,
    TelegramStartError,
    WebhookSettings,
)
from tests.adapters.conftest import fast_settings
from tests.waiting import CEILING


async def test_offset_is_confirmed_only_after_the_sink_returns(
    telegram_server, sink, start_telegram
):
    sink.gate = asyncio.Event()
    await start_telegram()
    update_id = telegram_server.push_update(
        {"message": telegram_server.make_message(5, "remember this")}
    )
    await asyncio.wait_for(sink.entered.wait(), CEILING)

    with pytest.raises(TimeoutError):  # the store has not returned: Telegram must not forget
        await telegram_server.wait_for(
            lambda: telegram_server.confirmed_offset > update_id, within=0.3
        )
    assert telegram_server.pending, "the update is still queued at Telegram"

    sink.gate.set()
    await sink.wait_for(1)
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset > update_id)


async def test_restart_processes_pending_updates(telegram_server, sink, start_telegram):
    first = await start_telegram()
    telegram_server.push_text(5, "before restart")
    await sink.wait_for(1)
    await first.stop()
    assert telegram_server.confirmed_offset == 2, "stop confirms what was stored"

    telegram_server.push_text(5, "while down 1")
    telegram_server.push_text(5, "while down 2")
    await start_telegram()
    received = await sink.wait_for(3)
    assert [m.text for m in received] == ["before restart", "while down 1", "while down 2"]
    deletes = telegram_server.method_calls("deleteWebhook")
    assert deletes and all(not d.get("drop_pending_updates") for d in deletes)


async def test_update_in_the_sink_at_stop_is_redelivered_after_restart(
    telegram_server, sink, start_telegram
):
    sink.gate = asyncio.Event()  # the store never finishes before shutdown
    first = await start_telegram(stop_timeout=0.1)
    telegram_server.push_text(5, "in flight")
    await asyncio.wait_for(sink.entered.wait(), CEILING)
    await first.stop()
    assert telegram_server.confirmed_offset <= 1

    sink.gate = None
    await start_telegram()
    [message] = await sink.wait_for(1)
    assert message.text == "in flight"


async def test_failing_sink_does_not_confirm_and_the_update_is_retried(
    telegram_server, sink, start_telegram
):
    sink.fail_times = 2
    await start_telegram()
    telegram_server.push_text(5, "first")
    telegram_server.push_text(5, "second")
    received = await sink.wait_for(2)
    assert [m.text for m in received] == ["first", "second"], "order kept across retries"
    assert sink.calls == 4
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset >= 3)


async def test_a_store_that_keeps_failing_never_gets_its_update_confirmed(
    telegram_server, sink, start_telegram, caplog
):
    """A full disk for longer than the failure limit: the update waits at Telegram."""
    sink.fail_times = 8
    await start_telegram(max_update_failures=3)
    first = telegram_server.push_text(5, "written while the disk is full")["message_id"]
    telegram_server.push_text(5, "after it")
    await telegram_server.wait_for(lambda: sink.calls >= 5)
    assert telegram_server.confirmed_offset <= 1, "a failed store write was acknowledged"
    assert sink.received == []
    received = await sink.wait_for(2)  # space returns: stored in order, then confirmed
    assert [m.text for m in received] == ["written while the disk is full", "after it"]
    assert received[0].platform_message_id == str(first)
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset >= 3)
    assert "skipped" not in caplog.text
    assert "not stored (attempt 8); it stays unconfirmed" in caplog.text
    assert telegram_server.token not in caplog.text


async def test_an_update_that_cannot_be_read_is_skipped_after_the_failure_limit(
    telegram_server, sink, start_telegram, caplog
):
    await start_telegram(max_update_failures=3)
    unreadable = {"file_id": "p1", "file_unique_id": "u1", "width": "wide", "height": 1}
    telegram_server.push_update({"message": telegram_server.make_message(5, photo=[unreadable])})
    telegram_server.push_text(5, "fine")
    [message] = await sink.wait_for(1)
    assert message.text == "fine"
    assert sink.calls == 1
    assert "skipped after 3 failed attempts" in caplog.text
    assert telegram_server.token not in caplog.text


async def test_redelivered_updates_known_to_the_store_skip_the_sink(
    telegram_server, sink, start_telegram
):
    stored = {"telegram:1"}
    await start_telegram(dedupe=lambda key: key in stored)
    telegram_server.push_text(5, "already stored")
    telegram_server.push_text(5, "new")
    [message] = await sink.wait_for(1)
    assert message.text == "new" and sink.calls == 1


async def test_bot_commands_are_registered_at_start(telegram_server, start_telegram):
    await start_telegram(bot_commands=(("new", "Start a new session"), ("status", "Show status")))
    assert telegram_server.commands == [
        [
            {"command": "new", "description": "Start a new session"},
            {"command": "status", "description": "Show status"},
        ]
    ]


async def test_rejected_token_fails_start_without_revealing_it(telegram_server, sink):
    settings = fast_settings(telegram_server, token="999:WRONG-SECRET", max_attempts=1)
    adapter = TelegramAdapter(settings)
    with pytest.raises(TelegramStartError) as raised:
        await adapter.start(sink)
    assert "WRONG-SECRET" not in str(raised.value)
    await adapter.stop()


async def test_stalled_polling_is_rebuilt(telegram_server, sink, start_telegram, caplog):
    await start_telegram(poll_timeout=0.2, health_timeout_seconds=0.5)
    polls = len(telegram_server.method_calls("getUpdates"))
    telegram_server.pause_get_updates()  # the next long poll hangs, like a dead connection
    await telegram_server.wait_for(
        lambda: len(telegram_server.method_calls("getUpdates")) >= polls + 2
    )
    hung = len(telegram_server.method_calls("getUpdates"))
    await telegram_server.wait_for(lambda: len(telegram_server.method_calls("getUpdates")) > hung)
    assert "rebuilding the polling loop" in caplog.text
    telegram_server.resume_get_updates()
    telegram_server.push_text(5, "still there?")
    [message] = await sink.wait_for(1)
    assert message.text == "still there?"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_webhook_mode(telegram_server, sink, start_telegram):
    port = _free_port()
    webhook = WebhookSettings(
        url="https://bot.example.org/tg/hook", port=port, secret="s3cret-token"
    )
    await start_telegram(webhook=webhook)
    [registered] = [w for w in telegram_server.webhooks if "url" in w]
    assert registered["url"] == "https://bot.example.org/tg/hook"
    assert registered["secret_token"] == "s3cret-token"
    assert not registered.get("drop_pending_updates")
    assert telegram_server.method_calls("getUpdates") == []

    update = {"update_id": 500, "message": telegram_server.make_message(5, "via webhook")}
    url = f"http://127.0.0.1:{port}/tg/hook"
    good = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "x"}
        ) as r:
            assert r.status == 403
        sink.fail_times = 7  # more than max_update_failures: still never acknowledged
        for _ in range(7):
            async with http.post(url, json=update, headers=good) as response:
                assert response.status == 500, "not stored: Telegram must deliver it again"
        async with http.post(url, json=update, headers=good) as response:
            assert response.status == 200
        async with http.post(url, json=update, headers=good) as response:
            assert response.status == 200  # a redelivery is acknowledged, not passed on
    [message] = sink.received
    assert message.text == "via webhook" and message.dedupe_key == "telegram:500"


async def test_stop_is_idempotent_quick_and_clean(telegram_server, start_telegram, caplog):
    caplog.set_level(logging.WARNING)
    # A long poll pending far longer than this test waits: stop must not wait it out.
    adapter = await start_telegram(poll_timeout=4 * CEILING, health_timeout_seconds=8 * CEILING)
    await telegram_server.wait_for(lambda: telegram_server.method_calls("getUpdates"))
    await asyncio.wait_for(adapter.stop(), CEILING)
    await adapter.stop()
    assert [r.getMessage() for r in caplog.records] == []  # e.g. the last offset confirmed


async def test_stop_receiving_keeps_sending(telegram_server, sink, start_telegram):
    adapter = await start_telegram()
    telegram_server.push_text(5, "one")
    await sink.wait_for(1)
    await adapter.stop_receiving()
    telegram_server.push_text(5, "after stop")
    await adapter.send(OutboundMessage("telegram", "5", "reply to one"))
    assert [s.text for s in telegram_server.sent] == ["reply to one"]
    assert [m.text for m in sink.received] == ["one"]
    assert telegram_server.pending, "the later update stays queued for the next start"


async def test_failed_webhook_registration_fails_start_and_frees_the_port(telegram_server, sink):
    port = _free_port()
    webhook = WebhookSettings(url="https://bot.example.org/hook", port=port, secret="s3cret")
    telegram_server.fail_next(
        "setWebhook", 400, "Bad Request: bad webhook: HTTPS url must be provided"
    )
    adapter = TelegramAdapter(fast_settings(telegram_server, webhook=webhook))
    with pytest.raises(TelegramStartError, match=r"(?i)bad webhook"):
        await adapter.start(sink)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # the local webhook server is gone


@pytest.mark.parametrize(
    ("base_url", "api", "files"),
    [
        (None, "https://api.telegram.org/bot", "https://api.telegram.org/file/bot"),
        ("http://127.0.0.1:8081", "http://127.0.0.1:8081/bot", "http://127.0.0.1:8081/file/bot"),
        ("http://tg.local/bot/", "http://tg.local/bot", "http://tg.local/file/bot"),
    ],
)
def test_base_url_for_a_self_hosted_bot_api_server(base_url, api, files):
    settings = TelegramSettings(token="1:x", base_url=base_url)
    assert (settings.api_base_url, settings.file_base_url) == (api, files)
    assert "1:x" not in repr(settings)


async def test_a_batchs_chats_are_handed_over_side_by_side_each_in_order(telegram_server):
    """One poll brought two chats' messages: a slow store for one chat does not hold up
    the other (their messages then share a commit), each chat's stay in order, and
    Telegram is told only up to the first message not yet stored."""
    ids = [
        telegram_server.push_update({"message": telegram_server.make_message(chat, text)})
        for chat, text in ((5, "a1"), (5, "a2"), (6, "b1"), (6, "b2"))
    ]
    first, last = ids[0], ids[-1]
    release, other_chat_done = asyncio.Event(), asyncio.Event()
    stored: list[str] = []

    async def sink(message: InboundMessage) -> None:
        if message.text == "a1":
            await release.wait()  # chat 5's first message is slow to store
        stored.append(message.text)
        if message.text == "b2":
            other_chat_done.set()

    adapter = TelegramAdapter(fast_settings(telegram_server))
    await adapter.start(sink)
    try:
        # One after another, b2 would wait behind a1 forever.
        await asyncio.wait_for(other_chat_done.wait(), CEILING)
        assert stored == ["b1", "b2"]
        with pytest.raises(TimeoutError):  # a1 is not stored: nothing from it on is confirmed
            await telegram_server.wait_for(
                lambda: telegram_server.confirmed_offset > first, within=0.3
            )
        release.set()
        await telegram_server.wait_for(lambda: telegram_server.confirmed_offset > last)
        assert stored == ["b1", "b2", "a1", "a2"]
    finally:
        await adapter.stop()


async def test_a_group_upgrade_reaches_the_sink_as_a_chat_move_not_a_message(
    telegram_server, sink, start_telegram
):
    """docs/design.md#chat-moves: both service messages say the same move, explicitly."""
    await start_telegram()
    telegram_server.migrate_group(-5, -1005, service_messages=True)
    received = await sink.wait_for(2)
    assert received == [ChatMoved("telegram", "-5", "-1005")] * 2
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset > 2)


async def test_a_user_blocking_the_bot_reaches_the_sink_as_such(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    bot = {"id": 1, "is_bot": True, "first_name": "owl"}
    telegram_server.push_update(
        {
            "my_chat_member": {
                "chat": {"id": 91, "type": "private", "first_name": "S1"},
                "from": {"id": 91, "is_bot": False, "first_name": "S1"},
                "date": 1_700_000_000,
                "old_chat_member": {"status": "member", "user": bot},
                "new_chat_member": {"status": "kicked", "until_date": 0, "user": bot},
            }
        }
    )
    assert await sink.wait_for(1) == [BotBlocked("telegram", "91", "91")]


async def test_a_chat_move_the_store_cannot_take_is_never_confirmed(
    telegram_server, sink, start_telegram
):
    """A move is as precious as a message: lost, the supergroup's new id is never allowed
    and the bot stays silent there. A store failing past the failure limit keeps it at
    Telegram, like a message."""
    sink.fail_times = 6
    await start_telegram(max_update_failures=3)
    telegram_server.migrate_group(-5, -1005, service_messages=False)
    telegram_server.push_update(
        {
            "message": {
                "message_id": 900,
                "date": 1_700_000_000,
                "chat": {"id": -5, "type": "group", "title": "g"},
                "migrate_to_chat_id": -1005,
            }
        }
    )
    await telegram_server.wait_for(lambda: sink.calls >= 5)
    assert telegram_server.confirmed_offset <= 1, "an unstored move was acknowledged"
    assert await sink.wait_for(1) == [ChatMoved("telegram", "-5", "-1005")]
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset > 1)
