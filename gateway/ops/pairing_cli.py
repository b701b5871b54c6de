"""``nightowl pairing``: list, approve, deny and revoke pairing requests and users
(docs/design.md#pairing).

It works beside a running gateway: each action is one transaction through WAL and the
busy timeout (the store opened ``shared``), and the gateway sees an approval or a
revocation at the user's next message. The CLI cannot message the user itself; the
approved user's next message gets an answer.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from gateway.config.schema import Config
from gateway.conversation.pairing import (
    Pairing,
    describe_request,
    describe_user,
    normalise_code,
    printable,
    who,
)
from gateway.ops.store_command import no_database, with_store
from gateway.store import Store

#: Who approved, as the approved users list shows it.
APPROVED_BY = "cli"


async def run_pairing_command(
    config: Config, args: Any, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Dispatch ``nightowl pairing <action>``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    nothing = "No pairing requests yet" if args.action == "list" else None
    missing = no_database(config, out, err, nothing=nothing, hint=" (start the gateway once)")
    if missing is not None:
        return missing

    async def act(store: Store) -> int:
        pairing = Pairing(store.pairing)
        if args.action == "list":
            return await list_pairing(pairing, out)
        if args.action == "approve":
            return await approve(pairing, args.code, out, err)
        if args.action == "deny":
            return await deny(pairing, args.code, out, err)
        if args.action == "clear":
            cleared = await pairing.clear(args.platform)
            for request in cleared:
                print(f"denied {describe_request(request, pairing.clock())}", file=out)
            print(f"{len(cleared)} pending request(s) denied.", file=out)
            return 0
        if args.action == "revoke":
            return await revoke(pairing, config, args.user, out, err)
        raise ValueError(f"unknown pairing action {args.action!r}")

    # The data dir locked when no gateway runs; beside one, through WAL without the lock
    # (like ``sessions forget``). On PostgreSQL, beside the replicas.
    return await with_store(config, "write", err, act, nothing=nothing, out=out)


async def list_pairing(pairing: Pairing, out: TextIO) -> int:
    waiting = await pairing.pending()
    users = await pairing.approved()
    now = pairing.clock()
    _section(
        [describe_request(request, now) for request in waiting],
        "Waiting for approval (nightowl pairing approve CODE):",
        "No pairing requests are waiting.",
        out,
    )
    _section(
        [describe_user(user) for user in users],
        "Approved by pairing (nightowl pairing revoke PLATFORM:USER):",
        "No users approved by pairing.",
        out,
    )
    return 0


def _section(lines: list[str], title: str, none: str, out: TextIO) -> None:
    """``title`` and the ``lines`` indented under it, or ``none`` when there are none."""
    if not lines:
        print(none, file=out)
        return
    print(title, file=out)
    for line in lines:
        print(f"  {line}", file=out)


async def approve(pairing: Pairing, code: str, out: TextIO, err: TextIO) -> int:
    user = await pairing.approve(code, APPROVED_BY)
    if user is None:
        _no_request(code, err)
        return 1
    print(
        f"Approved {who(user.platform, user.user_id, user.user_name)}: their next message"
        " gets an answer.",
        file=out,
    )
    return 0


async def deny(pairing: Pairing, code: str, out: TextIO, err: TextIO) -> int:
    request = await pairing.deny_request(code)
    if request is None:
        _no_request(code, err)
        return 1
    print(
        f"Denied {request.code} from {who(request.platform, request.user_id, request.user_name)}.",
        file=out,
    )
    return 0


async def revoke(pairing: Pairing, config: Config, user: str, out: TextIO, err: TextIO) -> int:
    platform, _, user_id = user.partition(":")
    if not platform or not user_id:
        print(
            f"nightowl: {printable(user)} is not PLATFORM:USER (e.g. telegram:12345;"
            " see: nightowl pairing list)",
            file=err,
        )
        return 1
    if not await pairing.revoke(platform, user_id):
        print(
            f"nightowl: {printable(user)} is not approved by pairing (see: nightowl pairing list)",
            file=err,
        )
        return 1
    still = _config_allows(config, platform, user_id)
    print(
        f"Revoked {platform}:{user_id}: "
        + (
            f"still allowed by platforms.{platform}.allowed_users in the config."
            if still
            else "their next message is refused."
        ),
        file=out,
    )
    return 0


def _config_allows(config: Config, platform: str, user_id: str) -> bool:
    settings = getattr(config.platforms, platform, None)
    return user_id in getattr(settings, "allowed_users", ())


def _no_request(code: str, err: TextIO) -> None:
    print(
        f"nightowl: no pending request has the code {printable(normalise_code(code))}: it"
        " expired or was answered already (see: nightowl pairing list)",
        file=err,
    )
