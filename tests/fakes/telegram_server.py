"""A fake Telegram Bot API server for tests: the real python-telegram-bot talks to it.

Requests arrive at ``/bot<token>/<method>`` (form, multipart or JSON bodies) and file
downloads at ``/file/bot<token>/<path>``. getUpdates is a real long poll with Telegram's
offset semantics: asking with ``offset=N`` confirms (and forgets) every update below N.

Tests push updates (:meth:`FakeTelegram.push_text`, :meth:`push_photo`,
:meth:`push_file`, :meth:`push_update`), upgrade a group (:meth:`migrate_group`), read what the bot did (:attr:`sent`, :attr:`edits`,
:attr:`chat_actions`, :attr:`commands`, :attr:`confirmed_offset`), inject failures
(:meth:`fail_next`, :attr:`get_updates_empty`: updates pending that getUpdates never
returns, as ``getWebhookInfo`` shows) and wait for conditions with a timeout (:meth:`wait_for`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.waiting import CEILING

# Fields python-telegram-bot sends as plain strings; every other field is JSON-encoded.
_STRING_FIELDS = {"text", "caption", "parse_mode", "action", "url", "secret_token", "file_id"}


@dataclass
class SentMessage:
    """A message the bot sent (sendMessage or sendDocument)."""

    method: str
    chat_id: int | str
    message_id: int
    text: str
    parse_mode: str | None = None
    thread_id: int | None = None
    reply_to_message_id: int | None = None
    allow_sending_without_reply: bool | None = None
    document: bytes | None = None
    filename: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Edit:
    chat_id: int | str
    message_id: int
    text: str
    parse_mode: str | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class ChatAction:
    chat_id: int | str
    action: str
    thread_id: int | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class ApiRequest:
    """Any Bot API call the fake received, failed ones included."""

    method: str
    params: dict
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: float | None


class FakeTelegram:
    """The fake server; ``await start()`` before use, ``await stop()`` after."""

    def __init__(
        self,
        token: str = "123456:TEST-TOKEN",
        *,
        bot_id: int = 777000111,
        bot_username: str = "NightowlBot",
        bot_name: str = "Nightowl",
    ) -> None:
        self.token = token
        self.bot_user = {
            "id": bot_id,
            "is_bot": True,
            "first_name": bot_name,
            "username": bot_username,
        }
        self.port = 0
        self.pending: list[dict] = []
        self.confirmed_offset = 0
        #: The update_id of the last update queued (fetched or not).
        self.last_pushed = 0
        self.sent: list[SentMessage] = []
        self.edits: list[Edit] = []
        self.chat_actions: list[ChatAction] = []
        self.commands: list[list[dict]] = []
        self.webhooks: list[dict] = []
        self.requests: list[ApiRequest] = []
        self.get_updates_paused = False
        #: getUpdates answers with no updates (after its long poll) while they stay
        #: pending: Telegram's side stuck, as getWebhookInfo's pending_update_count shows
        #: (core.telegram.org/bots/api#getwebhookinfo: the count of updates awaiting
        #: delivery, reported for a bot that polls too). Operators report updates piling
        #: up there unanswered (github.com/tdlib/telegram-bot-api/issues/422 for a
        #: webhook); for getUpdates this is a failure we stage, not one read in a report.
        self.get_updates_empty = False
        #: What getWebhookInfo reports as the last error delivering to the webhook.
        self.webhook_error: str | None = None
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._file_ids = itertools.count(1)
        self._files: dict[str, bytes] = {}
        self._texts: dict[tuple[str, int], tuple[str, str | None]] = {}
        #: Groups upgraded to supergroups: old id -> new id (sends to the old id fail).
        self.migrated: dict[int, int] = {}
        #: Failures to answer, per method; None closes the connection unanswered.
        self._failures: dict[str, deque[_Failure | None]] = defaultdict(deque)
        self._held: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Condition()
        self._stopping = False
        self._notifications: set[asyncio.Task] = set()
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=50 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._handle_method)
        app.router.add_get("/bot{token}/{method}", self._handle_method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        # shutdown_timeout: pending long polls are woken by _stopping; do not wait them out.
        self._runner = web.AppRunner(app, shutdown_timeout=1, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._stopping = True
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # -- test API: inbound -----------------------------------------------------------
    def push_update(self, update: dict) -> int:
        """Queue an update (``update_id`` assigned when missing); returns its id."""
        update.setdefault("update_id", next(self._update_ids))
        self.last_pushed = update["update_id"]
        self.pending.append(update)
        self._notify_soon()
        return update["update_id"]

    def make_message(
        self,
        chat_id: int,
        text: str | None = None,
        *,
        user: dict | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: dict | None = None,
        entities: list[dict] | None = None,
        message_id: int | None = None,
        **extra: Any,
    ) -> dict:
        """A Message dict as Telegram sends it (not queued)."""
        user = user or {"id": chat_id if chat_id > 0 else 42, "is_bot": False, "first_name": "Ann"}
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = user.get("first_name", "")
        else:
            chat["title"] = "Test group"
            if thread_id is not None:
                chat["is_forum"] = True
        message: dict[str, Any] = {
            "message_id": message_id or next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
            **extra,
        }
        if text is not None:
            message["text"] = text
        if entities:
            message["entities" if text is not None else "caption_entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        return message

    def push_text(self, chat_id: int, text: str, *, edited: bool = False, **kwargs: Any) -> dict:
        """Queue a text message (or an edit of one); returns the Message dict."""
        message = self.make_message(chat_id, text, **kwargs)
        if edited:
            message["edit_date"] = message["date"]
        self.push_update({"edited_message" if edited else "message": message})
        return message

    def push_photo(
        self, chat_id: int, sizes: list[tuple[int, int, bytes]], *, caption: str = "", **kwargs: Any
    ) -> dict:
        """Queue a photo message; ``sizes`` are (width, height, jpeg bytes), small to large."""
        photo = [
            {
                "file_id": self.add_file(data),
                "file_unique_id": f"u{width}x{height}",
                "width": width,
                "height": height,
                "file_size": len(data),
            }
            for width, height, data in sizes
        ]
        extra = {"caption": caption} if caption else {}
        message = self.make_message(chat_id, None, photo=photo, **extra, **kwargs)
        self.push_update({"message": message})
        return message

    def push_file(
        self, chat_id: int, field: str, data: bytes, *, caption: str = "", **kwargs: Any
    ) -> dict:
        """Queue a message carrying a file: ``field`` is voice, audio, video_note or
        document; keyword arguments that are not make_message's go into the file's
        object (duration, mime_type, file_name...)."""
        names = {"user", "chat_type", "thread_id", "reply_to", "entities", "message_id"}
        file = {
            "file_id": self.add_file(data),
            "file_unique_id": f"u{len(self._files)}",
            "file_size": len(data),
            **{k: v for k, v in kwargs.items() if k not in names},
        }
        extra = {"caption": caption} if caption else {}
        options = {k: v for k, v in kwargs.items() if k in names}
        message = self.make_message(chat_id, None, **{field: file}, **extra, **options)
        self.push_update({"message": message})
        return message

    def migrate_group(self, old_id: int, new_id: int, *, service_messages: bool = True) -> None:
        """Upgrade the group ``old_id`` to the supergroup ``new_id``: from now on a send
        to the old id fails as Telegram's does (ChatMigrated); the two service messages
        Telegram sends (one in each chat) are queued unless ``service_messages`` is off."""
        self.migrated[old_id] = new_id
        if service_messages:
            old = self.make_message(old_id, None, chat_type="group", migrate_to_chat_id=new_id)
            new = self.make_message(
                new_id, None, chat_type="supergroup", migrate_from_chat_id=old_id
            )
            self.push_update({"message": old})
            self.push_update({"message": new})

    def add_file(self, data: bytes) -> str:
        file_id = f"file-{next(self._file_ids)}"
        self._files[file_id] = data
        return file_id

    def bot_message(self, chat_id: int, text: str, message_id: int | None = None) -> dict:
        """A message from the bot itself, e.g. to reply to."""
        return self.make_message(chat_id, text, user=self.bot_user, message_id=message_id)

    # -- test API: faults and waiting ------------------------------------------------
    def fail_next(
        self,
        method: str,
        status: int = 400,
        description: str = "Bad Request: can't parse entities: unexpected end tag",
        *,
        retry_after: float | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error."""
        for _ in range(times):
            self._failures[method].append(_Failure(status, description, retry_after))

    def clear_failures(self, method: str) -> None:
        """Forget the failures still queued for ``method``: it works again."""
        self._failures[method].clear()

    def drop_next(self, method: str, *, times: int = 1) -> None:
        """Close the connection on the next ``times`` calls of ``method``, unanswered."""
        self._failures[method].extend([None] * times)

    def hold(self, method: str) -> None:
        """Make calls of ``method`` wait (after being recorded) until :meth:`release`."""
        self._held[method] = asyncio.Event()

    def release(self, method: str) -> None:
        self._held.pop(method).set()

    def pause_get_updates(self) -> None:
        """Make getUpdates hang (ignoring its timeout) until :meth:`resume_get_updates`."""
        self.get_updates_paused = True

    def resume_get_updates(self) -> None:
        self.get_updates_paused = False
        self._notify_soon()

    async def wait_for(self, predicate: Callable[[], bool], within: float = CEILING) -> None:
        """Wait until ``predicate()`` holds (re-checked on every request); raises TimeoutError."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), within)

    async def wait_sent(self, count: int, within: float = CEILING) -> list[SentMessage]:
        await self.wait_for(lambda: len(self.sent) >= count, within)
        return self.sent

    def shown(self, message: SentMessage) -> str:
        """What ``message`` shows now: its text after every edit."""
        return self._texts.get((str(message.chat_id), message.message_id), (message.text,))[0]

    def method_calls(self, method: str) -> list[dict]:
        return [request.params for request in self.requests if request.method == method]

    # -- server ----------------------------------------------------------------------
    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _notify_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self._notify())
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    async def _handle_method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await _read_params(request)
        self.requests.append(ApiRequest(method, params))
        await self._notify()
        if method in self._held:
            await self._held[method].wait()
        if self._failures[method]:
            failure = self._failures[method].popleft()
            if failure is None:
                return _dropped(request)
            extra = {"retry_after": failure.retry_after} if failure.retry_after else None
            return _error(failure.status, failure.description, extra)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        try:
            result = await handler(params)
        except _ApiError as exc:
            return _error(400, exc.description, exc.parameters)
        finally:
            await self._notify()
        return web.json_response({"ok": True, "result": result})

    async def _handle_file(self, request: web.Request) -> web.Response:
        file_id = request.match_info["path"].rsplit("/", 1)[-1]
        if request.match_info["token"] != self.token or file_id not in self._files:
            return web.Response(status=404)
        return web.Response(body=self._files[file_id], content_type="image/jpeg")

    async def _api_getMe(self, params: dict) -> dict:
        return {**self.bot_user, "can_join_groups": True, "supports_inline_queries": False}

    async def _api_deleteWebhook(self, params: dict) -> bool:
        self.webhooks.append({"deleted": True, **params})
        return True

    async def _api_setWebhook(self, params: dict) -> bool:
        self.webhooks.append(params)
        return True

    async def _api_setMyCommands(self, params: dict) -> bool:
        self.commands.append(params.get("commands", []))
        return True

    async def _api_getUpdates(self, params: dict) -> list[dict]:
        offset = int(params.get("offset") or 0)
        if offset > 0:
            self.pending = [u for u in self.pending if u["update_id"] >= offset]
            self.confirmed_offset = max(self.confirmed_offset, offset)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)

        def ready() -> bool:
            if self._stopping:
                return True
            if self.get_updates_empty:
                return False
            return not self.get_updates_paused and any(
                u["update_id"] >= offset for u in self.pending
            )

        if not ready() and (timeout > 0 or self.get_updates_paused):
            async with self._changed:
                wait = self._changed.wait_for(ready)
                try:
                    await asyncio.wait_for(wait, None if self.get_updates_paused else timeout)
                except TimeoutError:
                    pass
        if self.get_updates_empty:
            return []
        return [u for u in self.pending if u["update_id"] >= offset][:limit]

    async def _api_getWebhookInfo(self, params: dict) -> dict:
        """The webhook last set ("" after deleteWebhook: polling); ``pending_update_count``:
        the updates not confirmed (nor delivered to a webhook) yet; ``last_error_date`` and
        ``last_error_message`` only while delivering to the webhook fails. The fields and
        their absence when unset are the Bot API's WebhookInfo
        (core.telegram.org/bots/api#webhookinfo); getWebhookInfo answers in polling mode
        too, with ``url`` empty."""
        url = next((w.get("url", "") for w in reversed(self.webhooks)), "")
        info: dict[str, Any] = {
            "url": url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.pending),
        }
        if self.webhook_error:
            info["last_error_date"] = int(time.time())
            info["last_error_message"] = self.webhook_error
        return info

    async def _api_sendMessage(self, params: dict) -> dict:
        return self._record_sent("sendMessage", params, params["text"])

    async def _api_sendDocument(self, params: dict) -> dict:
        return self._record_sent("sendDocument", params, params.get("caption", ""))

    def _record_sent(self, method: str, params: dict, text: str) -> dict:
        chat_id = params["chat_id"]
        self._refuse_migrated(chat_id)
        reply = params.get("reply_parameters") or {}
        message_id = next(self._message_ids)
        document = params.get("document")
        self.sent.append(
            SentMessage(
                method=method,
                chat_id=chat_id,
                message_id=message_id,
                text=text,
                parse_mode=params.get("parse_mode"),
                thread_id=params.get("message_thread_id"),
                reply_to_message_id=reply.get("message_id") or params.get("reply_to_message_id"),
                allow_sending_without_reply=reply.get("allow_sending_without_reply"),
                document=document[1] if document else None,
                filename=document[0] if document else None,
            )
        )
        self._texts[(str(chat_id), message_id)] = (text, params.get("parse_mode"))
        result = self._message_result(chat_id, message_id, params)
        result["text" if method == "sendMessage" else "caption"] = text
        if document:
            result["document"] = {
                "file_id": "doc",
                "file_unique_id": "doc",
                "file_name": document[0],
            }
        return result

    def _refuse_migrated(self, chat_id: int | str) -> None:
        if isinstance(chat_id, int) and chat_id in self.migrated:
            raise _ApiError(
                "Bad Request: group chat was upgraded to a supergroup chat",
                {"migrate_to_chat_id": self.migrated[chat_id]},
            )

    async def _api_editMessageText(self, params: dict) -> dict:
        chat_id, message_id = params["chat_id"], int(params["message_id"])
        self._refuse_migrated(chat_id)
        key = (str(chat_id), message_id)
        if key not in self._texts:
            raise _ApiError("Bad Request: message to edit not found")
        if self._texts[key][0] == params["text"]:  # Telegram compares the rendered text
            raise _ApiError(
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message"
            )
        self._texts[key] = (params["text"], params.get("parse_mode"))
        self.edits.append(Edit(chat_id, message_id, params["text"], params.get("parse_mode")))
        result = self._message_result(chat_id, message_id, params)
        return {**result, "text": params["text"], "edit_date": int(time.time())}

    async def _api_sendChatAction(self, params: dict) -> bool:
        self.chat_actions.append(
            ChatAction(params["chat_id"], params["action"], params.get("message_thread_id"))
        )
        return True

    async def _api_getFile(self, params: dict) -> dict:
        file_id = params["file_id"]
        if file_id not in self._files:
            raise _ApiError("Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(self._files[file_id]),
            "file_path": f"photos/{file_id}",
        }

    def _message_result(self, chat_id: int | str, message_id: int, params: dict) -> dict:
        chat_type = "private" if isinstance(chat_id, int) and chat_id > 0 else "supergroup"
        result: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type},
            "from": self.bot_user,
        }
        if params.get("message_thread_id"):
            result["message_thread_id"] = params["message_thread_id"]
        return result


class _ApiError(Exception):
    def __init__(self, description: str, parameters: dict | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.parameters = parameters


def _dropped(request: web.Request) -> web.Response:
    """Close the connection: the client sees it dropped before any answer."""
    assert request.transport is not None
    request.transport.close()
    return web.Response(status=204)  # never reaches the client


def _error(status: int, description: str, parameters: dict | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)


async def _read_params(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        return await request.json()
    params: dict[str, Any] = {}
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.filename:
                params[part.name] = (part.filename, bytes(await part.read()))
            else:
                params[part.name] = _decode_field(part.name, await part.text())
        return params
    form = await request.post()
    for name, value in form.items():
        params[name] = _decode_field(name, str(value))
    return params


def _decode_field(name: str | None, value: str) -> Any:
    if name in _STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value
