"""Every edge keeps its library's errors to itself: whatever the platform answers, a reply
(sent whole, or streamed and finished) is delivered or fails with :class:`DeliveryError`
— never a ``telegram.error.*``, a ``discord.HTTPException`` or an aiohttp/httpx error,
which the gateway would not catch (issue 28: one error map per edge).

The real python-telegram-bot and discord.py talk to the fakes in tests/fakes, which
refuse every delivering call (posts, edits, documents) the way the platforms do. The
console adapter writes to a terminal and has no server to refuse it: not covered here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace

import aiohttp
import discord
import pytest
from telegram.error import ChatMigrated, Forbidden, RetryAfter, TelegramError

from adapters.base import Adapter, DeliveryError, OutboundMessage
from adapters.discord_adapter.outbound import DiscordCallFailed, discord_errors
from adapters.telegram import TelegramAdapter
from adapters.telegram.calls import TelegramCallFailed, telegram_errors
from tests.adapters.conftest import fast_settings
from tests.adapters.discord_fixtures import TOKEN as DISCORD_TOKEN
from tests.adapters.discord_fixtures import fake_and_adapter
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.discord_world import CHANNEL_ID
from tests.fakes.sink import RecordingSink
from tests.fakes.telegram_server import FakeTelegram

# PTB warns about its own RetryAfter.retry_after type when it builds the exception.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

GROUP = -4001
SUPERGROUP = -1004001
#: More refusals than any reply's calls and retries use up.
_ALWAYS = 40
_TELEGRAM_METHODS = ("sendMessage", "editMessageText", "sendDocument")


@dataclass
class Edge:
    """One running adapter and its fake, as the shared test sees them."""

    adapter: Adapter
    target: OutboundMessage
    #: Makes every delivering call fail with the named fault from now on.
    refuse: Callable[[str], None]
    #: Where a reply went when the platform followed the chat elsewhere (Telegram).
    last_sent_chat: Callable[[], str]
    token: str


def _refuse_telegram(server: FakeTelegram) -> Callable[[str], None]:
    def refuse(fault: str) -> None:
        if fault == "chat moved":
            server.migrate_group(GROUP, SUPERGROUP, service_messages=False)
            return
        for method in _TELEGRAM_METHODS:
            if fault == "chat not found":
                server.fail_next(method, 400, "Bad Request: chat not found", times=_ALWAYS)
            elif fault == "blocked":
                server.fail_next(
                    method, 403, "Forbidden: bot was blocked by the user", times=_ALWAYS
                )
            elif fault == "flood wait":  # longer than max_retry_after: not waited out
                server.fail_next(
                    method,
                    429,
                    "Too Many Requests: retry after 3600",
                    retry_after=3600,
                    times=_ALWAYS,
                )
            elif fault == "server error":
                server.fail_next(method, 500, "Internal Server Error", times=_ALWAYS)
            elif fault == "connection dropped":
                server.drop_next(method, times=_ALWAYS)
            else:
                raise AssertionError(fault)

    return refuse


def _refuse_discord(fake: FakeDiscord) -> Callable[[str], None]:
    def refuse(fault: str) -> None:
        if fault == "chat not found":
            fake.refuse_messages(404, code=10003, message="Unknown Channel")
        elif fault == "blocked":
            fake.refuse_messages(403, code=50007, message="Cannot send messages to this user")
        elif fault == "flood wait":  # behind Discord's proxy: retried five times first
            fake.refuse_messages(429, message="You are being rate limited.", retry_after=0.01)
        elif fault == "server error":
            # 503: discord.py raises DiscordServerError at once; a 500 takes the same
            # path after five retries that sleep 25 s in all.
            fake.refuse_messages(503, message="upstream connect error")
        elif fault == "connection dropped":
            fake.refuse_messages(None)
        else:
            raise AssertionError(fault)

    return refuse


@contextlib.asynccontextmanager
async def running_edge(platform: str) -> AsyncIterator[Edge]:
    if platform == "telegram":
        server = FakeTelegram()
        await server.start()
        adapter = TelegramAdapter(fast_settings(server, stream=True))
        try:
            await adapter.start(RecordingSink())
            yield Edge(
                adapter,
                OutboundMessage("telegram", str(GROUP), "", reply_to_message_id="12"),
                _refuse_telegram(server),
                lambda: str(server.sent[-1].chat_id) if server.sent else "",
                server.token,
            )
        finally:
            await adapter.stop()
            await server.stop()
        return
    async with fake_and_adapter(echo=False, stream=True, stream_edit_interval=0.0) as (
        fake,
        discord_adapter,
        _sink,
    ):
        yield Edge(
            discord_adapter,
            OutboundMessage("discord", str(CHANNEL_ID), ""),
            _refuse_discord(fake),
            lambda: str(fake.sent[-1].channel_id) if fake.sent else "",
            DISCORD_TOKEN,
        )


async def _send_whole(edge: Edge, fault: str) -> list[str]:
    edge.refuse(fault)
    return await edge.adapter.send(replace(edge.target, text="The **whole** answer."))


async def _stream_then_finish(edge: Edge, fault: str) -> list[str]:
    stream = edge.adapter.open_stream(edge.target)
    assert stream is not None
    await stream.update("The whole")  # the first message is out before the fault
    edge.refuse(fault)
    return await stream.finish("The **whole** answer.")


FAULTS = ["chat not found", "blocked", "flood wait", "server error", "connection dropped"]
CASES = [
    *(("telegram", fault) for fault in [*FAULTS, "chat moved"]),
    *(("discord", fault) for fault in FAULTS),  # a Discord channel never changes its id
]
PATHS: dict[str, Callable[[Edge, str], Awaitable[list[str]]]] = {
    "send": _send_whole,
    "streamed reply": _stream_then_finish,
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(("platform", "fault"), CASES, ids=[f"{p}-{f}" for p, f in CASES])
async def test_a_refused_reply_raises_delivery_error_only(
    platform: str, fault: str, path: str
) -> None:
    async with running_edge(platform) as edge:
        try:
            outcome: list[str] | DeliveryError = await PATHS[path](edge, fault)
        except DeliveryError as error:  # anything else fails the test as it is
            outcome = error
        where = edge.last_sent_chat()

    if fault == "chat moved":  # followed: the reply is delivered where the chat continues
        assert not isinstance(outcome, DeliveryError), outcome
        assert outcome and where == str(SUPERGROUP)
        return
    assert isinstance(outcome, DeliveryError), f"delivered despite {fault}: {outcome}"
    assert (outcome.platform, outcome.chat_id) == (platform, edge.target.chat_id)
    assert edge.token not in str(outcome)


def _every_subclass(cls: type[BaseException]) -> list[type[BaseException]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_every_subclass(sub)]
    return found


def _telegram_error(cls: type[TelegramError], text: str) -> TelegramError:
    if cls is ChatMigrated:
        return ChatMigrated(SUPERGROUP)
    if cls is RetryAfter:
        return RetryAfter(30)
    return cls(text)  # type: ignore[call-arg]


TELEGRAM_ERRORS = [TelegramError, *_every_subclass(TelegramError)]


@pytest.mark.parametrize("cls", TELEGRAM_ERRORS, ids=lambda cls: cls.__name__)
def test_every_telegram_error_is_mapped_with_the_token_blanked(cls: type[TelegramError]) -> None:
    token = "123456789:" + "T" * 35
    with pytest.raises(TelegramCallFailed) as raised:
        with telegram_errors("sendMessage", "42", token):
            raise _telegram_error(cls, f"https://api.telegram.org/bot{token}/sendMessage failed")
    failed = raised.value
    assert isinstance(failed, DeliveryError) and failed.chat_id == "42"
    assert token not in str(failed) and failed.__cause__ is None
    expected = {ChatMigrated: "moved", RetryAfter: "flood", Forbidden: "forbidden"}
    assert failed.kind == expected.get(cls, failed.kind)
    assert (failed.new_chat_id is not None) == (cls is ChatMigrated)
    assert (failed.retry_after == 30) == (cls is RetryAfter)


@pytest.mark.parametrize(
    "error",
    [
        discord.RateLimited(120.0),  # discord.py's own give-up (max_ratelimit_timeout)
        discord.ClientException("Interaction has already been responded to"),
        aiohttp.ServerDisconnectedError(),
        TimeoutError(),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_every_discord_error_is_mapped(error: BaseException) -> None:
    with pytest.raises(DiscordCallFailed) as raised:
        with discord_errors(str(CHANNEL_ID)):
            raise error
    failed = raised.value
    assert isinstance(failed, DeliveryError) and failed.chat_id == str(CHANNEL_ID)
    assert failed.__cause__ is error
    if isinstance(error, discord.RateLimited):
        assert (failed.kind, failed.retry_after) == ("rate_limited", 120.0)


async def test_a_stream_whose_partial_edit_meets_the_move_sends_the_reply_where_it_went() -> None:
    """Streaming edits about once a second, so a partial edit is usually the first to
    hear that the group became a supergroup; the final edit must not then aim at the old
    message id in the new chat ("message to edit not found")."""
    server = FakeTelegram()
    await server.start()
    adapter = TelegramAdapter(fast_settings(server, stream=True))
    try:
        await adapter.start(RecordingSink())
        stream = adapter.open_stream(
            OutboundMessage("telegram", str(GROUP), "", reply_to_message_id="12")
        )
        assert stream is not None
        await stream.update("The whole")
        server.migrate_group(GROUP, SUPERGROUP, service_messages=False)
        await stream.update("The whole answer so far")
        await server.wait_for(lambda: bool(server.method_calls("editMessageText")))
        ids = await stream.finish("The **whole** answer.")
    finally:
        await adapter.stop()
        await server.stop()
    assert ids
    assert str(server.sent[-1].chat_id) == str(SUPERGROUP)
    assert "answer." in server.sent[-1].text
