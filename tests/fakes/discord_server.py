"""A fake Discord (REST under /api/v10 + the gateway websocket) for the real discord.py.

One aiohttp app on 127.0.0.1 plays Discord for one bot: HELLO -> heartbeats -> IDENTIFY
-> READY + GUILD_CREATE, then whatever a test dispatches; RESUME after an op 7 RECONNECT
replays what the client missed and answers RESUMED; a RESUME of an invalidated session
gets op 9. Each shard (the IDENTIFY's ``shard``: [id, count]; none means [0, 1]) is a
session of its own, as on Discord: it gets the guilds it carries (``(guild_id >> 22) %
count``; DMs on shard 0), and only their events, with its own sequence numbers. Every
message is kept as channel history (GET /channels/{id}/messages with Discord's
``after``/``before``/``limit`` paging), including ones posted while the bot was
away. REST calls are recorded so tests can assert on what a user would see (content,
mentions allowed, the message replied to) and on what the bot read back.

Use :func:`running_fake_discord`, which also points discord.py at the fake and restores
it afterwards. The world (ids, users, payloads) is fixed in :mod:`tests.fakes.discord_world`;
tests import the ids and users from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import discord.gateway
import discord.http
import yarl
from aiohttp import WSMsgType, web

from tests.fakes import discord_world as world
from tests.fakes.discord_world import (
    ALICE,
    APPLICATION_ID,
    BOT_USER,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    USERS,
)
from tests.waiting import CEILING


def _json(payload: Any, status: int = 200) -> web.Response:
    # discord.py parses JSON only when Content-Type is exactly application/json.
    body = json.dumps(payload).encode()
    return web.Response(body=body, status=status, headers={"Content-Type": "application/json"})


#: The application flag of the portal's Message Content switch (under 100 servers).
MESSAGE_CONTENT_LIMITED = 1 << 19


@dataclass
class SentMessage:
    """One message the bot posted (to a channel, or as an interaction followup)."""

    channel_id: int
    payload: dict[str, Any]
    message_id: int
    #: "channel" for POST /channels/{id}/messages, "followup" for an interaction webhook.
    route: str = "channel"
    files: list[tuple[str, bytes]] = field(default_factory=list)

    @property
    def content(self) -> str:
        return self.payload.get("content") or ""


@dataclass
class ShardSession:
    """One shard's gateway session: what it was sent (for a RESUME) and its socket."""

    shard_id: int
    session_id: str
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    #: Held while READY + GUILD_CREATE (or a RESUME's replay) go out: a test's dispatch
    #: waits, so it never lands between them.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def open(self) -> bool:
        return self.ws is not None and not self.ws.closed


class FakeDiscord:
    """Discord's REST API and gateway for one bot, with a test-facing API.

    ``guilds``: the ids (from :mod:`tests.fakes.discord_world`) of the guilds the bot is
    in; by default only Night Shift.
    """

    def __init__(self, guilds: Iterable[int] = (GUILD_ID,)) -> None:
        self.port = 0
        self.guild_ids = tuple(guilds)
        #: The total number of shards, as the last IDENTIFY said.
        self.shard_count = 1
        self.sent: list[SentMessage] = []
        self.edits: list[tuple[int, int, dict[str, Any]]] = []
        self.typing_calls: list[int] = []
        #: When set, POST /typing answers 403 (counted in ``typing_failures``).
        self.fail_typing = False
        #: When set, login (GET /users/@me) answers 401 as Discord does for a bad token.
        self.reject_token = False
        #: When set, IDENTIFY is answered by closing the socket with this code (4014:
        #: privileged intent not enabled for the bot).
        self.close_on_identify: int | None = None
        #: Gateway connections are dropped and refused (:meth:`cut_gateway`).
        self.gateway_down = False
        self.typing_failures = 0
        self.interaction_callbacks: list[dict[str, Any]] = []
        #: PUT bodies of command registration, keyed by guild id (None = global).
        self.registered_commands: dict[int | None, list[dict[str, Any]]] = {}
        #: The guild id (None = global) of every command registration, in order.
        self.command_registrations: list[int | None] = []
        self.identify_payloads: list[dict[str, Any]] = []
        self.resume_count = 0
        self.messages: dict[int, dict[str, Any]] = {}
        self.attachment_downloads = 0
        self._downloads_open = asyncio.Event()
        self._downloads_open.set()
        self._ids = itertools.count(1)
        self._attachments: dict[str, bytes] = {}
        self._send_failures: list[web.Response] = []
        #: When set, every message post and edit is refused: answered by what this
        #: returns, or dropped unanswered when it returns None (:meth:`refuse_messages`).
        self._refusal: Callable[[], web.Response | None] | None = None
        self.rate_limited_sends = 0
        #: Channel ids of every GET /channels/{id}, in order.
        self.channel_lookups: list[int] = []
        #: (channel id, ``after`` or None) of every history request, in order.
        self.history_requests: list[tuple[int, int | None]] = []
        #: Channels whose history answers 403 Missing Access.
        self.hidden_history: set[int] = set()
        self._history_open = asyncio.Event()
        self._history_open.set()
        self._events: list[dict[str, Any]] = []  # of every shard: followups look here
        self._shards: dict[int, ShardSession] = {}
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{name}", self._attachment)
        api = web.RouteTableDef()
        api.get("/api/v10/users/@me")(self._get_me)
        api.get("/api/v10/oauth2/applications/@me")(self._get_application)
        api.get("/api/v10/gateway/bot")(self._get_gateway_bot)
        api.get("/api/v10/gateway")(self._get_gateway_bot)
        api.post("/api/v10/channels/{cid}/messages")(self._post_message)
        api.get("/api/v10/channels/{cid}")(self._get_channel)
        api.get("/api/v10/channels/{cid}/messages")(self._get_history)
        api.get("/api/v10/channels/{cid}/messages/{mid}")(self._get_message)
        api.patch("/api/v10/channels/{cid}/messages/{mid}")(self._patch_message)
        api.post("/api/v10/channels/{cid}/typing")(self._post_typing)
        api.post("/api/v10/users/@me/channels")(self._open_dm)
        api.put("/api/v10/applications/{aid}/commands")(self._put_commands)
        api.put("/api/v10/applications/{aid}/guilds/{gid}/commands")(self._put_commands)
        api.post("/api/v10/interactions/{iid}/{token}/callback")(self._interaction_callback)
        api.post("/api/v10/webhooks/{aid}/{token}")(self._post_followup)
        api.patch("/api/v10/webhooks/{aid}/{token}/messages/{mid}")(self._patch_followup)
        app.add_routes(api)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        for session in self._shards.values():
            if session.ws is not None and not session.ws.closed:
                await session.ws.close(code=1000)
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- test API --------------------------------------------------------------------

    async def dispatch_message(
        self, channel_id: int, content: str, **options: Any
    ) -> dict[str, Any]:
        """Deliver a MESSAGE_CREATE; returns the payload. ``options`` as for
        :meth:`post_while_away` (the message is in the channel's history too)."""
        data = self.post_while_away(channel_id, content, **options)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    def post_while_away(
        self,
        channel_id: int,
        content: str,
        *,
        author: dict[str, Any] = ALICE,
        mentions: list[dict[str, Any]] | None = None,
        referenced: int | None = None,
        attachments: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
        message_id: int | None = None,
    ) -> dict[str, Any]:
        """A message only in the channel's history, as one posted while the bot was
        disconnected (no MESSAGE_CREATE, none replayed on RESUME); returns the payload.

        Mentions are read from ``content`` (``<@id>``, ``<@&role>``, ``@everyone``) unless
        given. ``referenced`` is the id of a message this one replies to. ``attachments``
        are ``(filename, content_type, data)``, served from the fake's CDN path.
        """
        data = self._message_payload(
            channel_id, content, author=author, mentions=mentions, message_id=message_id
        )
        if referenced is not None:
            data["type"] = 19
            data["message_reference"] = {
                "message_id": str(referenced),
                "channel_id": str(channel_id),
            }
            if referenced in self.messages:
                data["referenced_message"] = self.messages[referenced]
        data["attachments"] = [self._store_attachment(*a) for a in attachments]
        self.messages[int(data["id"])] = data
        return data

    async def dispatch_interaction(
        self,
        name: str,
        args: str | None = None,
        *,
        channel_id: int = CHANNEL_ID,
        user: dict[str, Any] = ALICE,
    ) -> dict[str, Any]:
        """Deliver an INTERACTION_CREATE for the slash command ``/name args``."""
        data = world.interaction(self._new_id(), self._new_id(), name, args, channel_id, user)
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def dispatch(self, event: str, data: dict[str, Any], shard: int | None = None) -> None:
        """Send one DISPATCH on the shard that carries it (or ``shard``), or keep it for
        that shard's next RESUME when its socket is not open."""
        session = self._session(self.shard_of(data) if shard is None else shard)
        async with session.lock:
            await self._send(session, event, data)

    async def _send(self, session: ShardSession, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(frame)
        self._events.append(frame)
        if session.ws is not None and not session.ws.closed:
            await session.ws.send_str(json.dumps(frame))

    def shard_of(self, data: dict[str, Any]) -> int:
        """The shard an event belongs to: its guild's, or 0 (DMs)."""
        guild_id = data.get("guild_id")
        return 0 if guild_id is None else (int(guild_id) >> 22) % self.shard_count

    @property
    def identified_shards(self) -> list[list[int]]:
        """The ``shard`` of every IDENTIFY, in order ([0, 1] when a client sent none)."""
        return [payload.get("shard", [0, 1]) for payload in self.identify_payloads]

    def connected_shards(self) -> set[int]:
        """The shards with an open gateway connection now."""
        return {shard for shard, session in self._shards.items() if session.open}

    async def replay(self, payload: dict[str, Any]) -> None:
        """Deliver the same MESSAGE_CREATE again (Discord may, e.g. around a resume)."""
        await self.dispatch("MESSAGE_CREATE", payload)

    async def reconnect(self, seconds: float = 5.0, *, shard: int = 0) -> None:
        """Send op 7 RECONNECT on ``shard`` and wait until the client resumed its session."""
        resumed = self.resume_count + 1
        ws = self._session(shard).ws
        assert ws is not None, "no gateway connection to reconnect"
        await ws.send_str(json.dumps({"op": 7, "d": None}))
        await self.wait_until(lambda: self.resume_count >= resumed, seconds)

    async def invalidate_session(self, seconds: float = 5.0, *, shard: int = 0) -> None:
        """End ``shard``'s gateway session for good (op 7, then op 9 on the RESUME) and
        wait until the client identified afresh: nothing missed meanwhile is replayed."""
        identified = len(self.identify_payloads) + 1
        session = self._session(shard)
        session.session_id = f"fake-session-{shard}-{identified}"
        assert session.ws is not None, "no gateway connection to invalidate"
        await session.ws.send_str(json.dumps({"op": 7, "d": None}))
        await self.wait_until(lambda: len(self.identify_payloads) >= identified, seconds)

    def hold_history(self) -> None:
        """Make history requests hang (recorded first) until :meth:`release_history`."""
        self._history_open.clear()

    def release_history(self) -> None:
        self._history_open.set()

    def fail_next_sends(
        self,
        status: int,
        *,
        code: int = 50013,
        message: str = "Missing Permissions",
        times: int = 1,
    ) -> None:
        """Make the next ``times`` message posts fail with this HTTP error."""
        for _ in range(times):
            self._send_failures.append(_json({"code": code, "message": message}, status))

    def rate_limit_next_send(self, retry_after: float) -> None:
        """Answer the next message post with Discord's 429 (behind its proxy, so retryable)."""
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": False,
        }
        response = _json(body, 429)
        response.headers.update({"Via": "1.1 google", "X-RateLimit-Scope": "user"})
        self._send_failures.append(response)

    def refuse_messages(
        self,
        status: int | None,
        *,
        code: int = 0,
        message: str = "",
        retry_after: float | None = None,
    ) -> None:
        """From now on answer every message post and edit with this error: ``status``
        None drops the connection unanswered; a ``retry_after`` makes it Discord's 429
        behind its proxy (which discord.py retries, up to five times)."""

        def answer() -> web.Response | None:
            if status is None:
                return None
            if retry_after is None:
                return _json({"code": code, "message": message}, status)
            body = {"message": message, "retry_after": retry_after, "global": False}
            response = _json(body, status)
            response.headers.update({"Via": "1.1 google", "X-RateLimit-Scope": "user"})
            return response

        self._refusal = answer

    def _refused(self, request: web.Request) -> web.Response | None:
        assert self._refusal is not None
        response = self._refusal()
        if response is None:  # dropped: the client sees the connection close
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=204)
        return response

    def hold_attachment_downloads(self) -> None:
        """Make attachment downloads hang until :meth:`release_attachment_downloads`."""
        self._downloads_open.clear()

    def release_attachment_downloads(self) -> None:
        self._downloads_open.set()

    async def wait_until(self, predicate: Callable[[], bool], seconds: float = CEILING) -> None:
        """Wait (bounded) until ``predicate()`` holds; re-checked on every recorded call."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), seconds)

    async def wait_for_sent(self, count: int = 1, seconds: float = CEILING) -> list[SentMessage]:
        """Wait until at least ``count`` messages were sent; returns all sent so far."""
        await self.wait_until(lambda: len(self.sent) >= count, seconds)
        return list(self.sent)

    # ---- payloads ----------------------------------------------------------------------

    def _session(self, shard: int) -> ShardSession:
        if shard not in self._shards:
            self._shards[shard] = ShardSession(shard, f"fake-session-{shard}")
        return self._shards[shard]

    def _new_id(self) -> int:
        return world.snowflake(next(self._ids))

    def _message_payload(
        self, channel_id: int, content: str, *, author: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        message_id = extra.pop("message_id", None) or self._new_id()
        return world.message(message_id, channel_id, content, author=author, **extra)

    def _store_attachment(self, filename: str, content_type: str, blob: bytes) -> dict[str, Any]:
        attachment_id = self._new_id()
        name = f"{attachment_id}-{filename}"
        self._attachments[name] = blob
        url = f"{self.base_url}/attachments/{name}"
        return {"id": str(attachment_id), "filename": filename, "size": len(blob), "url": url,
                "proxy_url": url, "content_type": content_type}  # fmt: skip

    # ---- REST --------------------------------------------------------------------------

    async def _record(self, update: Callable[[], None]) -> None:
        async with self._changed:
            update()
            self._changed.notify_all()

    async def _get_me(self, request: web.Request) -> web.Response:
        if self.reject_token:
            return _json({"code": 0, "message": "401: Unauthorized"}, 401)
        return _json(BOT_USER)

    async def _get_application(self, request: web.Request) -> web.Response:
        # The portal's Message Content switch is the application's flag
        # GATEWAY_MESSAGE_CONTENT_LIMITED (1 << 19) for a bot in under 100 servers
        # (discord.com/developers/docs/resources/application#application-object-application-flags);
        # a bot without it is refused at IDENTIFY with 4014 when it asks for the intent.
        enabled = self.close_on_identify != 4014
        return _json(world.application() | {"flags": MESSAGE_CONTENT_LIMITED if enabled else 0})

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        url = f"ws://127.0.0.1:{self.port}/gateway"
        return _json({"url": url, "shards": 1, "session_start_limit": limit})

    async def _attachment(self, request: web.Request) -> web.Response:
        await self._record(
            lambda: setattr(self, "attachment_downloads", self.attachment_downloads + 1)
        )
        await self._downloads_open.wait()
        blob = self._attachments.get(request.match_info["name"])
        if blob is None:
            return _json({"code": 0, "message": "404: Not Found"}, 404)
        return web.Response(body=blob, headers={"Content-Type": "application/octet-stream"})

    async def _read_body(self, request: web.Request) -> tuple[dict[str, Any], list]:
        if not request.content_type.startswith("multipart/"):
            return await request.json(), []
        payload: dict[str, Any] = {}
        files: list[tuple[str, bytes]] = []
        reader = await request.multipart()
        async for part in reader:
            if part.name == "payload_json":
                payload = json.loads(await part.text())
            else:
                files.append((part.filename or "", bytes(await part.read())))
        return payload, files

    async def _post_message(self, request: web.Request) -> web.Response:
        if self._refusal is not None:
            return self._refused(request)
        if self._send_failures:
            response = self._send_failures.pop(0)
            if response.status == 429:
                await self._record(
                    lambda: setattr(self, "rate_limited_sends", self.rate_limited_sends + 1)
                )
            return response
        channel_id = int(request.match_info["cid"])
        payload, files = await self._read_body(request)
        return await self._create_bot_message(channel_id, payload, files, "channel")

    async def _create_bot_message(
        self, channel_id: int, payload: dict[str, Any], files: list, route: str
    ) -> web.Response:
        data = self._message_payload(channel_id, payload.get("content", ""), author=BOT_USER)
        data["mentions"] = []  # what the bot's text would ping is decided by allowed_mentions
        reference = payload.get("message_reference")
        if reference:
            data["type"] = 19
            data["message_reference"] = {"message_id": str(reference["message_id"]),
                                         "channel_id": str(channel_id)}  # fmt: skip
        data["attachments"] = [
            self._store_attachment(name, "text/markdown", b) for name, b in files
        ]
        if route == "followup":
            data["webhook_id"] = str(APPLICATION_ID)
        message_id = int(data["id"])
        self.messages[message_id] = data
        sent = SentMessage(channel_id, payload, message_id, route, files)
        await self._record(lambda: self.sent.append(sent))
        return _json(data)

    async def _get_channel(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["cid"])
        await self._record(lambda: self.channel_lookups.append(channel_id))
        if channel_id not in world.CHANNEL_IDS:
            return _json({"code": 10003, "message": "Unknown Channel"}, 404)
        return _json(world.channel(channel_id))

    async def _get_history(self, request: web.Request) -> web.Response:
        """Discord's paging: with ``after`` the ``limit`` messages right after it, else the
        newest ``limit`` (before ``before``); always answered newest first."""
        channel_id = int(request.match_info["cid"])
        after = int(request.query["after"]) if "after" in request.query else None
        before = int(request.query.get("before", 0)) or None
        limit = min(int(request.query.get("limit", 50)), 100)
        await self._record(lambda: self.history_requests.append((channel_id, after)))
        await self._history_open.wait()
        if channel_id in self.hidden_history:
            return _json({"code": 50001, "message": "Missing Access"}, 403)
        if channel_id not in world.CHANNEL_IDS:
            return _json({"code": 10003, "message": "Unknown Channel"}, 404)
        found = sorted(
            (m for m in self.messages.values() if int(m["channel_id"]) == channel_id),
            key=lambda m: int(m["id"]),
        )
        if after is not None:
            page = [m for m in found if int(m["id"]) > after][:limit]
        else:
            page = [m for m in found if before is None or int(m["id"]) < before][-limit:]
        # REST messages carry no ``member`` (only gateway events do).
        return _json([{k: v for k, v in m.items() if k != "member"} for m in reversed(page)])

    async def _get_message(self, request: web.Request) -> web.Response:
        data = self.messages.get(int(request.match_info["mid"]))
        if data is None:
            return _json({"code": 10008, "message": "Unknown Message"}, 404)
        return _json(data)

    async def _patch_message(self, request: web.Request) -> web.Response:
        if self._refusal is not None:
            return self._refused(request)
        channel_id, message_id = int(request.match_info["cid"]), int(request.match_info["mid"])
        payload = await request.json()
        data = self.messages.get(message_id)
        if data is None:
            return _json({"code": 10008, "message": "Unknown Message"}, 404)
        data.update(
            {k: v for k, v in payload.items() if k == "content"}, edited_timestamp=world.now()
        )
        await self._record(lambda: self.edits.append((channel_id, message_id, payload)))
        return _json(data)

    async def _post_typing(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["cid"])
        if self.fail_typing:
            await self._record(lambda: setattr(self, "typing_failures", self.typing_failures + 1))
            return _json({"code": 50013, "message": "Missing Permissions"}, 403)
        await self._record(lambda: self.typing_calls.append(channel_id))
        return web.Response(status=204)

    async def _open_dm(self, request: web.Request) -> web.Response:
        recipient = USERS.get(int((await request.json())["recipient_id"]), ALICE)
        return _json({"id": str(DM_CHANNEL_ID), "type": 1, "recipients": [recipient]})

    async def _put_commands(self, request: web.Request) -> web.Response:
        guild = request.match_info.get("gid")
        commands = await request.json()
        key = int(guild) if guild else None
        await self._record(lambda: self.registered_commands.__setitem__(key, commands))
        self.command_registrations.append(key)
        answer = [{**c, "id": str(self._new_id()), "application_id": str(APPLICATION_ID),
                   "version": "1"} for c in commands]  # fmt: skip
        return _json(answer)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        body["interaction_id"] = request.match_info["iid"]
        await self._record(lambda: self.interaction_callbacks.append(body))
        loading = body.get("type") == 5
        return _json({"interaction": {"id": request.match_info["iid"], "type": 2,
                                      "response_message_loading": loading,
                                      "response_message_ephemeral": False}})  # fmt: skip

    async def _post_followup(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        interaction_id = int(token.rsplit("-", 1)[-1])
        event = next(
            (e["d"] for e in self._events if e["d"].get("id") == str(interaction_id)), None
        )
        if event is None:
            return _json({"code": 10015, "message": "Unknown Webhook"}, 404)
        payload, files = await self._read_body(request)
        return await self._create_bot_message(int(event["channel_id"]), payload, files, "followup")

    async def _patch_followup(self, request: web.Request) -> web.Response:
        payload = await request.json()
        await self._record(lambda: self.edits.append((0, 0, payload)))
        data = self._message_payload(CHANNEL_ID, payload.get("content", ""), author=BOT_USER)
        return _json(data)

    # ---- gateway -----------------------------------------------------------------------

    async def cut_gateway(self) -> None:
        """Drop every gateway connection and refuse new ones (as when the network to
        Discord is down) until :meth:`restore_gateway`; REST calls still work. Each is
        closed with 4000, "Unknown error", the close code Discord documents as one to
        reconnect after (docs.discord.com/developers/topics/opcodes-and-status-codes,
        "Gateway Close Event Codes"), so the client keeps trying, as it would."""
        self.gateway_down = True
        for session in self._shards.values():
            if session.ws is not None:
                await session.ws.close(code=4000)

    def restore_gateway(self) -> None:
        self.gateway_down = False

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        if self.gateway_down:
            await ws.close(code=4000)
            return ws
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for msg in ws:
            if msg.type is not WSMsgType.TEXT:
                break
            frame = json.loads(msg.data)
            if frame["op"] == 1:
                await ws.send_str(json.dumps({"op": 11}))
            elif frame["op"] == 2:
                await self._identify(ws, frame["d"])
            elif frame["op"] == 6:
                await self._resume(ws, frame["d"])
        for session in self._shards.values():
            if session.ws is ws:
                session.ws = None
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        shard, count = data.get("shard", [0, 1])
        session = self._session(shard)
        async with session.lock:  # taken before a waiting test learns of the IDENTIFY
            recorded = {k: v for k, v in data.items() if k != "token"}
            await self._record(lambda: self.identify_payloads.append(recorded))
            if self.close_on_identify is not None:
                await ws.close(code=self.close_on_identify)
                return
            self.shard_count = count
            session.ws = ws
            carried = [g for g in self.guild_ids if self.shard_of({"guild_id": g}) == shard]
            await self._send(session, "READY", {
                "v": 10, "user": BOT_USER, "session_id": session.session_id,
                "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
                "guilds": [{"id": str(g), "unavailable": True} for g in carried],
                "application": {"id": str(APPLICATION_ID), "flags": 0},
                "shard": [shard, count],
            })  # fmt: skip
            for guild_id in carried:
                await self._send(session, "GUILD_CREATE", world.guild(guild_id))
        await self._record(lambda: None)  # wake wait_until: a shard connected

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        # RESUME names no shard: Discord knows it by the session.
        session = next(
            (s for s in self._shards.values() if s.session_id == data.get("session_id")), None
        )
        if session is None:
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return
        async with session.lock:
            missed = [e for e in session.events if e["s"] > (data.get("seq") or 0)]
            # As Discord does: the missed events first, then RESUMED.
            for frame in missed:
                await ws.send_str(json.dumps(frame))
            session.seq += 1
            await ws.send_str(json.dumps({"op": 0, "t": "RESUMED", "s": session.seq, "d": {}}))
            session.ws = ws
        await self._record(lambda: setattr(self, "resume_count", self.resume_count + 1))


@contextlib.asynccontextmanager
async def running_fake_discord(guilds: Iterable[int] = (GUILD_ID,)) -> AsyncIterator[FakeDiscord]:
    """Start a :class:`FakeDiscord` (in ``guilds``) and point discord.py's REST and
    gateway at it.

    Both class attributes are restored on exit, even when the test fails.
    """
    fake = FakeDiscord(guilds)
    await fake.start()
    old_base = discord.http.Route.BASE
    old_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = f"{fake.base_url}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(
        f"ws://127.0.0.1:{fake.port}/gateway"
    )
    try:
        yield fake
    finally:
        discord.http.Route.BASE = old_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway
        await fake.stop()
