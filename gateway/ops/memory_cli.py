"""``nightowl memory``: list, export and forget long-term memory notes
(docs/design.md#memory-operator).

The scopes are the ones the chats use: ``--user telegram:12345`` (a person's notes) and
``--chat telegram:-100123`` (a chat's, by session key). ``forget`` deletes — a note with
the older versions it replaced, or everything of a person or a chat — and scrubs the
file; it works beside a running gateway (one transaction through WAL and the busy
timeout, or beside the replicas on PostgreSQL), whose next turn no longer sees the notes.
``list`` and ``export`` open the database read-only beside a running gateway. The store
is the one the config names (gateway/store/opening.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from typing import Any, TextIO

from gateway.config.schema import Config
from gateway.ops.admin import Confirm, ExportRefused, visible, write_export
from gateway.ops.store_command import no_database, with_store
from gateway.store import MemoryEntry, MemoryOwner, Store

#: Notes longer than this are shortened in ``list``.
LIST_CHARS = 120


def add_memory_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """``nightowl memory list|export|forget`` (parsed in gateway/ops/cli.py's way)."""
    memory = commands.add_parser("memory", help="list, export or forget long-term memory")
    actions = memory.add_subparsers(dest="action", required=True)
    scopes = argparse.ArgumentParser(add_help=False)
    scopes.add_argument("--user", metavar="PLATFORM:ID", help="a person's notes, e.g. telegram:42")
    scopes.add_argument("--chat", metavar="KEY", help="a chat's notes, by session key")
    listing = actions.add_parser("list", parents=[common, scopes], help="notes, newest use first")
    listing.add_argument("--archived", action="store_true", help="replaced notes too")
    export = actions.add_parser(
        "export", parents=[common, scopes], help="every note as JSONL, replaced ones included"
    )
    export.add_argument("-o", "--output", help="write to this file (private) instead of stdout")
    export.add_argument("--force", action="store_true", help="overwrite an existing file")
    forget = actions.add_parser(
        "forget", parents=[common, scopes], help="delete a note, or a person's or chat's notes"
    )
    forget.add_argument("id", nargs="?", type=int, help="the note's id (see: nightowl memory list)")
    forget.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    memory.set_defaults(handler=cmd_memory)


def cmd_memory(config: Config, args: argparse.Namespace) -> int:
    return asyncio.run(run_memory_command(config, args))


async def run_memory_command(
    config: Config,
    args: Any,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    confirm: Confirm = input,
) -> int:
    """Dispatch ``nightowl memory <action>``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        owners = _owners(args)
    except ValueError as exc:
        print(f"nightowl: {exc}", file=err)
        return 1
    nothing = "No memory notes yet" if args.action == "list" else None
    missing = no_database(config, out, err, nothing=nothing, hint=" (start the gateway once)")
    if missing is not None:
        return missing

    async def act(store: Store) -> int:
        if args.action == "list":
            return await list_memory(store, owners, out, archived=args.archived)
        if args.action == "export":
            return await export_memory(store, owners, args.output, out, err, args.force)
        if args.action == "forget":
            return await forget_memory(store, owners, args.id, out, err, args.yes, confirm)
        raise ValueError(f"unknown memory action {args.action!r}")

    return await with_store(
        config, "write" if args.action == "forget" else "read", err, act, nothing=nothing, out=out
    )


def _owners(args: Any) -> list[MemoryOwner] | None:
    owners = []
    if args.user:
        if ":" not in args.user:
            raise ValueError(f"{visible(args.user)} is not PLATFORM:ID (e.g. telegram:12345)")
        owners.append(MemoryOwner("user", args.user))
    if args.chat:
        owners.append(MemoryOwner("chat", args.chat))
    return owners or None


async def list_memory(
    store: Store, owners: list[MemoryOwner] | None, out: TextIO, *, archived: bool = False
) -> int:
    entries = await store.memory.memories(owners, archived=archived)
    if not entries:
        print("No memory notes" + (" for that scope." if owners else " yet."), file=out)
        return 0
    for entry in entries:
        print(visible(describe(entry)), file=out)
    return 0


def describe(entry: MemoryEntry) -> str:
    text = " ".join(entry.text.split())
    if len(text) > LIST_CHARS:
        text = text[:LIST_CHARS] + "…"
    state = f" (replaced by #{entry.replaced_by})" if entry.archived_at is not None else ""
    return (
        f"#{entry.id} {entry.owner.scope} {entry.owner.owner}  learned {_when(entry.created_at)}"
        f" ({entry.learned_by}), used {_when(entry.last_used_at)}{state}: {text}"
    )


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


async def export_memory(
    store: Store,
    owners: list[MemoryOwner] | None,
    output: str | None,
    out: TextIO,
    err: TextIO,
    force: bool = False,
) -> int:
    entries = await store.memory.memories(owners, archived=True)
    if not entries:
        print("nightowl: no memory notes to export", file=err)
        return 1
    lines = []
    for entry in sorted(entries, key=lambda e: e.id):
        fields = asdict(entry)
        scope, owner = fields.pop("owner")
        lines.append(json.dumps({"scope": scope, "owner": owner, **fields}, ensure_ascii=False))
    text = "".join(line + "\n" for line in lines)
    try:
        if output is None:
            out.write(text)
            out.flush()
        else:
            await asyncio.to_thread(write_export, output, text, force=force)
    except (ExportRefused, OSError) as exc:
        print(f"nightowl: {exc}", file=err)
        return 1
    where = "" if output is None else f" to {output}"
    print(f"exported {len(entries):,} memory notes{where}", file=err)
    return 0


async def forget_memory(
    store: Store,
    owners: list[MemoryOwner] | None,
    memory_id: int | None,
    out: TextIO,
    err: TextIO,
    yes: bool = False,
    confirm: Confirm = input,
) -> int:
    """Delete note ``memory_id`` (with the versions it replaced), or every note of
    ``owners``; then scrub the file so the text cannot be read back from it."""
    if (memory_id is None) == (owners is None):
        print("nightowl: give a note's id, or --user / --chat (one of them)", file=err)
        return 1
    if memory_id is not None:
        entry = await store.memory.get_memory(memory_id)
        if entry is None:
            print(f"nightowl: there is no memory note #{memory_id}", file=err)
            return 1
        what, token = f"note #{memory_id} ({visible(entry.text[:80])})", str(memory_id)
    else:
        assert owners is not None
        count = len(await store.memory.memories(owners, archived=True))
        if not count:
            print("nightowl: no memory notes for that scope", file=err)
            return 1
        token = " ".join(owner.owner for owner in owners)
        what = f"{count:,} memory note(s) of {visible(token)}"
    if not yes:
        print(f"This erases {what} for good, older versions included.", file=out)
        try:
            answer = confirm(f"Type {token} to confirm: ")
        except EOFError:
            answer = ""
        if answer.strip() != token:
            print("Nothing erased.", file=out)
            return 1
    if memory_id is not None:
        gone = await store.memory.forget_memory(memory_id)
    else:
        gone = sum([await store.memory.forget_memories(owner) for owner in owners or []])
    await store.operator.scrub()
    print(f"Forgot {gone:,} memory note(s).", file=out)
    return 0
