"""Telegram delivery: splitting, formatting fallback, flood control, documents, typing."""

from __future__ import annotations

import asyncio
import html
import itertools
import logging
import re
import time

import pytest

from adapters.base import DeliveryError, OutboundMessage
from adapters.chunking import utf16_length
from tests.waiting import CEILING

# PTB warns about its own RetryAfter.retry_after type when it builds the exception.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def _reply(text: str, chat_id: str = "5", **kwargs) -> OutboundMessage:
    return OutboundMessage("telegram", chat_id, text, **kwargs)


def _visible(telegram_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", telegram_html))


async def test_ten_thousand_char_reply_with_code_fence_across_the_cut(
    telegram_server, start_telegram
):
    adapter = await start_telegram()
    prose = "Here is the reasoning behind the change, step by step. 🦉 " * 70
    code = "\n".join(f"    total_{i} = add(value_{i}, 1)  # keep <{i}> & go" for i in range(120))
    text = f"{prose}\n\n```python\n{code}\n```\n\nThat is all."
    assert len(text) >= 10_000

    ids = await adapter.send(_reply(text, reply_to_message_id="31"))

    sent = telegram_server.sent
    assert len(sent) == len(ids) >= 3
    assert [s.method for s in sent] == ["sendMessage"] * len(sent)
    for message in sent:
        assert utf16_length(_visible(message.text)) <= 4096
        assert message.parse_mode == "HTML"
        assert message.text.count("<pre>") == message.text.count("</pre>")
    assert [s.reply_to_message_id for s in sent] == [31] + [None] * (len(sent) - 1)
    code_in_messages = [s.text for s in sent if "language-python" in s.text]
    assert len(code_in_messages) >= 2, "the fence crossed a cut and was reopened"
    shown_code = "\n".join(
        line for s in sent for line in _visible(s.text).splitlines() if "total_" in line
    )
    assert shown_code == code, "every code line arrives once, in order, unmangled"
    assert _visible(sent[-1].text).endswith("That is all.")


async def test_rejected_entities_are_resent_as_plain_text(telegram_server, start_telegram):
    adapter = await start_telegram()
    telegram_server.fail_next(
        "sendMessage", 400, "Bad Request: can't parse entities: unsupported start tag"
    )
    ids = await adapter.send(_reply("**bold** claim"))
    [sent] = telegram_server.sent
    assert (sent.text, sent.parse_mode) == ("bold claim", None)  # no raw Markdown either
    assert ids == [str(sent.message_id)]
    assert len(telegram_server.method_calls("sendMessage")) == 2


async def test_flood_control_is_waited_out_and_delivered_once(telegram_server, start_telegram):
    adapter = await start_telegram()
    telegram_server.fail_next(
        "sendMessage", 429, "Too Many Requests: retry after 0.3", retry_after=0.3
    )
    await adapter.send(_reply("hello"))
    assert [s.text for s in telegram_server.sent] == ["hello"]
    first, second = [r for r in telegram_server.requests if r.method == "sendMessage"]
    assert second.at - first.at >= 0.3


async def test_server_errors_are_retried(telegram_server, start_telegram):
    adapter = await start_telegram()
    telegram_server.fail_next("sendMessage", 502, "Bad Gateway", times=2)
    await adapter.send(_reply("hello"))
    assert [s.text for s in telegram_server.sent] == ["hello"]


async def test_final_failure_raises_delivery_error_without_the_token(
    telegram_server, start_telegram, caplog
):
    adapter = await start_telegram(max_attempts=2)
    telegram_server.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    with pytest.raises(DeliveryError) as raised:
        await adapter.send(_reply("hello", chat_id="77"))
    assert raised.value.chat_id == "77" and raised.value.platform == "telegram"
    assert "blocked" in str(raised.value)
    telegram_server.fail_next("sendMessage", 500, "Internal Server Error", times=2)
    with pytest.raises(DeliveryError):
        await adapter.send(_reply("hello", chat_id="77"))
    assert "77" in caplog.text
    assert telegram_server.token not in caplog.text
    assert telegram_server.sent == []


async def test_token_never_reaches_the_logs(telegram_server, sink, start_telegram, caplog):
    caplog.set_level(logging.DEBUG)
    adapter = await start_telegram()
    telegram_server.push_text(5, "hi")
    await sink.wait_for(1)
    await adapter.send(_reply("hello"))
    assert "getUpdates" in caplog.text or "sendMessage" in caplog.text
    assert telegram_server.token not in caplog.text


async def test_very_long_reply_is_sent_as_first_message_plus_markdown_document(
    telegram_server, start_telegram
):
    adapter = await start_telegram(message_limit=200, max_messages_per_reply=4)
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor " * 8 for i in range(12))

    ids = await adapter.send(_reply(text, reply_to_message_id="9", thread_id="3"))

    first, document = telegram_server.sent
    assert len(ids) == 2
    assert first.method == "sendMessage" and first.text.startswith("Paragraph 0:")
    assert document.method == "sendDocument"
    assert document.filename == "reply.md"
    assert document.document == text.encode("utf-8")
    assert "reply.md" in document.text
    assert (document.thread_id, first.thread_id) == (3, 3)


async def test_reply_within_the_limit_is_not_sent_as_document(telegram_server, start_telegram):
    adapter = await start_telegram(message_limit=200, max_messages_per_reply=4)
    text = "\n\n".join("lorem ipsum dolor " * 8 for _ in range(4))
    await adapter.send(_reply(text))
    assert [s.method for s in telegram_server.sent] == ["sendMessage"] * 4


async def test_typing_is_refreshed_and_stops_when_the_block_raises(telegram_server, start_telegram):
    adapter = await start_telegram(typing_interval=0.05)
    with pytest.raises(RuntimeError, match="model failed"):
        async with adapter.typing("5", "77"):
            await telegram_server.wait_for(lambda: len(telegram_server.chat_actions) >= 3)
            raise RuntimeError("model failed")
    actions = list(telegram_server.chat_actions)
    assert {(a.chat_id, a.action, a.thread_id) for a in actions} == {(5, "typing", 77)}
    # An absence shows only over time: measure it in refreshes of another chat's typing,
    # which run on the same timer a leaked refresh of chat 5 would.
    async with adapter.typing("6"):
        await telegram_server.wait_for(
            lambda: sum(a.chat_id == 6 for a in telegram_server.chat_actions) >= 4
        )
    assert [a for a in telegram_server.chat_actions if a.chat_id == 5] == actions


async def test_a_quick_turn_shows_no_typing_and_a_slow_one_shows_it_after_the_delay(
    telegram_server, start_telegram
):
    adapter = await start_telegram(typing_delay=0.2, typing_interval=0.05)
    async with adapter.typing("5"):
        pass  # answered at once: "typing…" would only flash
    started = time.monotonic()
    async with adapter.typing("6"):
        await telegram_server.wait_for(lambda: len(telegram_server.chat_actions) >= 2)
    # Chat 5's first action was due before chat 6's: had it been left running, it showed.
    assert {a.chat_id for a in telegram_server.chat_actions} == {6}
    first = next(r for r in telegram_server.requests if r.method == "sendChatAction")
    assert first.at - started >= 0.2


async def test_a_typing_request_in_flight_finishes_before_the_turn_goes_on(
    telegram_server, start_telegram
):
    adapter = await start_telegram(typing_delay=0.0)
    telegram_server.hold("sendChatAction")

    async def turn() -> None:
        async with adapter.typing("5"):
            await telegram_server.wait_for(
                lambda: bool(telegram_server.method_calls("sendChatAction"))
            )

    task = asyncio.create_task(turn())
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done  # the reply would now wait for the request, not cut it
    telegram_server.release("sendChatAction")
    await asyncio.wait_for(task, 5)
    # It reached Telegram before the turn went on: "typing…" never shows under a reply.
    assert [a.chat_id for a in telegram_server.chat_actions] == [5]


async def test_typing_survives_flood_control(telegram_server, start_telegram):
    adapter = await start_telegram(typing_interval=0.05)
    telegram_server.fail_next("sendChatAction", 429, "Too Many Requests", retry_after=0.1)
    async with adapter.typing("5"):
        await telegram_server.wait_for(lambda: len(telegram_server.chat_actions) >= 1)
    calls = [r for r in telegram_server.requests if r.method == "sendChatAction"]
    assert calls[1].at - calls[0].at >= 0.1


async def test_stream_edits_at_most_once_per_interval_and_formats_the_final_edit(
    telegram_server, start_telegram
):
    adapter = await start_telegram(stream=True, stream_edit_interval=0.1)
    stream = adapter.open_stream(_reply("", reply_to_message_id="4"))
    assert stream is not None
    words: list[str] = []
    async with asyncio.timeout(CEILING):
        while len(telegram_server.edits) < 3:  # the model writes until three edits showed
            words.append(f"word{len(words)}")
            await stream.update(" ".join(words))
            # Tokens arriving from the model: how fast does not matter to any assertion,
            # only that the loop yields between them (as a real stream does).
            await asyncio.sleep(0.008)
    final = "**Done:** " + " ".join(words)
    ids = await stream.finish(final)

    [first] = telegram_server.sent
    assert ids == [str(first.message_id)]
    assert first.parse_mode is None and first.reply_to_message_id == 4
    edits = telegram_server.edits
    # The adapter waits a whole interval after each answer before the next edit, so the
    # fake receives them at least an interval apart however slow the machine is.
    times = [first.at] + [e.at for e in edits]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= 0.1, f"edits closer than the interval: {gaps}"
    assert all(e.parse_mode is None for e in edits[:-1])
    assert (edits[-1].parse_mode, edits[-1].text) == ("HTML", "<b>Done:</b> " + " ".join(words))


async def test_a_stream_that_pauses_shows_its_latest_text_within_an_interval(
    telegram_server, start_telegram
):
    # A model that writes a few words and then pauses (before a tool call, or a slow
    # model between tokens): the words are shown without waiting for more.
    adapter = await start_telegram(stream=True, stream_edit_interval=0.2)
    stream = adapter.open_stream(_reply(""))
    await stream.update("Let me")
    await stream.update("Let me check")  # within the interval: shown when it ends
    await telegram_server.wait_for(lambda: len(telegram_server.edits) == 1)
    [first], [edit] = telegram_server.sent, telegram_server.edits
    assert (first.text, edit.text) == ("Let me", "Let me check")
    assert edit.at - first.at >= 0.2
    await stream.finish("Let me check the weather.")
    assert telegram_server.edits[-1].text == "Let me check the weather."


async def test_a_slow_telegram_never_holds_up_the_stream(telegram_server, start_telegram):
    adapter = await start_telegram(stream=True, stream_edit_interval=0.05)
    stream = adapter.open_stream(_reply(""))
    await stream.update("one")
    telegram_server.hold("editMessageText")  # an edit that takes its time
    await stream.update("one two")
    await telegram_server.wait_for(lambda: bool(telegram_server.method_calls("editMessageText")))
    async with asyncio.timeout(1):  # the model's next tokens are taken at once meanwhile
        await stream.update("one two three")
        await stream.update("one two three four")
    telegram_server.release("editMessageText")
    await stream.finish("one two three four five")
    edits = [e.text for e in telegram_server.edits]
    assert len(telegram_server.sent) == 1  # and still one message, finished whole
    assert (edits[0], edits[-1]) == ("one two", "one two three four five")


async def test_stream_final_text_same_as_shown_does_not_fail(telegram_server, start_telegram):
    adapter = await start_telegram(stream=True, stream_edit_interval=0.05)
    stream = adapter.open_stream(_reply(""))
    await stream.update("plain answer")
    await stream.update("plain answer")
    ids = await stream.finish("plain answer")  # Telegram says "message is not modified"
    assert len(ids) == 1 and telegram_server.edits == []


async def test_stream_overflow_goes_to_follow_up_messages(telegram_server, start_telegram):
    adapter = await start_telegram(stream=True, stream_edit_interval=0.05, message_limit=100)
    stream = adapter.open_stream(_reply("", thread_id="8"))
    text = " ".join(f"w{i}" for i in range(70))  # ~270 characters
    await stream.update(text)
    ids = await stream.finish(text)
    assert len(ids) == 3
    first, *follow_ups = telegram_server.sent
    assert first.text.endswith("…") and len(first.text) <= 100
    assert [s.thread_id for s in telegram_server.sent] == [8, 8, 8]
    shown = [telegram_server.edits[-1].text] + [s.text for s in follow_ups]
    assert " ".join(shown).split() == text.split()


async def test_stream_without_updates_sends_normally(telegram_server, start_telegram):
    adapter = await start_telegram(stream=True)
    stream = adapter.open_stream(_reply(""))
    await stream.finish("*hi*")
    assert [(s.text, s.parse_mode) for s in telegram_server.sent] == [("<i>hi</i>", "HTML")]


async def test_no_stream_unless_configured(start_telegram):
    adapter = await start_telegram()
    assert adapter.open_stream(_reply("")) is None


async def test_stream_final_edit_waits_out_flood_control(telegram_server, start_telegram):
    adapter = await start_telegram(stream=True, stream_edit_interval=0.05)
    stream = adapter.open_stream(_reply(""))
    await stream.update("draft")
    telegram_server.fail_next("editMessageText", 429, "Too Many Requests", retry_after=0.2)
    await stream.finish("**final**")
    [edit] = telegram_server.edits
    assert (edit.text, edit.parse_mode) == ("<b>final</b>", "HTML")
    first, second = [r for r in telegram_server.requests if r.method == "editMessageText"]
    assert second.at - first.at >= 0.2


async def test_a_tg_link_from_the_model_reaches_telegram_as_plain_text(
    telegram_server, start_telegram
):
    adapter = await start_telegram()
    text = (
        "Ask [the admin](tg://user?id=777) or use [this proxy](tg://proxy?server=p.example&port=1)"
        " — docs at [nightowl](https://example.org)."
    )
    await adapter.send(_reply(text))

    [sent] = telegram_server.sent
    assert sent.parse_mode == "HTML"
    assert re.findall(r'<a href="([^"]*)"', sent.text) == ["https://example.org"]
    assert _visible(sent.text) == (
        "Ask [the admin](tg://user?id=777) or use [this proxy](tg://proxy?server=p.example&port=1)"
        " — docs at nightowl."
    )
