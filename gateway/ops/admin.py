"""``nightowl sessions``: list, show, export and forget the sessions in the database.

``forget`` is a user's right to erase and the ONLY deletion path in nightowl: every row
ever stored under the key (archived included), the chat's memory notes, its waiting inbox
and its reminders go, and the file is scrubbed so the text cannot be recovered from free
pages, the WAL or the search index. It works beside a running gateway (one transaction through WAL and the
busy timeout; the gateway opens a fresh session for the chat next time, and re-reads a
reminder before sending it, so a forgotten one never goes out); beside one, the other
actions open the database read-only.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from agent.compression.markers import is_summary_message, text_of
from gateway.config.schema import Config
from gateway.connecting import os_reason
from gateway.ops.store_command import no_database, with_store
from gateway.private_files import write_private
from gateway.store import MemoryOwner, OperatorStore, SessionSummary, Store, StoredMessage
from nightowl_errors import NightowlError

#: Messages longer than this are shortened in ``show`` (``--full`` prints them whole).
SHOW_CHARS = 300

Confirm = Callable[[str], str]

#: C0 and C1 control characters and DEL, except newline and tab.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` for the operator's terminal: each control character shown as ``\\xNN``, so
    what a model or a pasted log wrote (colours, a window title, an OSC 52 clipboard
    write, a carriage return hiding a line) is read, never acted on by the terminal."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


async def run_sessions_command(
    config: Config,
    args: Any,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    confirm: Confirm = input,
) -> int:
    """Dispatch ``nightowl sessions <action>``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    nothing = "No sessions yet" if args.action == "list" else None
    missing = no_database(config, out, err, nothing=nothing)
    if missing is not None:
        return missing

    async def act(store: Store) -> int:
        if args.action == "forget":
            return await forget_session(
                store,
                args.key,
                out,
                err,
                yes=args.yes,
                confirm=confirm,
                running=store.beside_gateway,
            )
        return await _read_only_action(store, args, out, err)

    # Beside a running gateway: read-only to read; a forget is one transaction
    # through WAL and the busy timeout (on PostgreSQL, beside the replicas), and the
    # gateway opens a fresh session for the chat next time.
    return await with_store(
        config, "write" if args.action == "forget" else "read", err, act, nothing=nothing, out=out
    )


async def _read_only_action(store: Store, args: Any, out: TextIO, err: TextIO) -> int:
    if args.action == "list":
        sessions = await store.operator.list_sessions()
        ended = await store.operator.ended_sessions() if not sessions else 0
        if ended:
            print(f"No current sessions; {ended} ended {EXPORT_HINT}.", file=out)
        else:
            print_table(sessions, out)
        return 0
    if args.action == "show":
        return await show_session(store, args.key, out, err, full=args.full)
    if args.action == "export":
        return await export_session(
            store.operator, args.key, args.output, out, err, force=args.force
        )
    raise ValueError(f"unknown sessions action {args.action!r}")


# -- list ----------------------------------------------------------------------------------

#: Where an ended session's messages are (a chat's /new or /reset ends its session).
EXPORT_HINT = "by /new, /reset or a compression: `nightowl sessions export KEY` writes them out"


def print_table(sessions: list[SessionSummary], out: TextIO) -> None:
    if not sessions:
        print("No sessions yet.", file=out)
        return
    header = ("KEY", "PLATFORM", "ACTIVE", "ARCHIVED", "TOKENS", "LAST ACTIVITY")
    rows = [
        (
            s.session_key,
            s.platform,
            f"{s.active_messages:,}",
            f"{s.archived_messages:,}",
            f"{s.active_tokens:,}",
            _when(s.updated_at),
        )
        for s in sessions
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    numeric = {2, 3, 4}
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        print(visible("  ".join(cells).rstrip()), file=out)


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


# -- show ----------------------------------------------------------------------------------


async def show_session(
    store: Store, key: str, out: TextIO, err: TextIO, *, full: bool = False
) -> int:
    record = await store.conversation.current_session(key)
    if record is None:
        ended = await store.operator.ended_sessions(key)
        why = f"{ended} ended {EXPORT_HINT}" if ended else "see: nightowl sessions list"
        print(f"nightowl: no current session {key!r} ({why})", file=err)
        return 1
    rows = await store.conversation.load_active(record.id)
    sessions = await store.operator.list_sessions()
    listed = next((s for s in sessions if s.session_id == record.id), None)
    archived = listed.archived_messages if listed else 0
    refused = listed.refused_messages if listed else 0
    tokens = sum(row.token_count for row in rows)
    header = f"{key}  ({record.platform}, session {record.id}, model {record.model})"
    print(visible(header), file=out)
    print(
        f"started {_when(record.created_at)}, last activity {_when(record.updated_at)}, "
        f"{record.compression_count} compression(s)",
        file=out,
    )
    print(
        f"active context: {len(rows)} messages, {tokens:,} tokens (stored counts); "
        f"{archived:,} archived messages",
        file=out,
    )
    if refused:  # kept, never sent to a model: only the export shows them
        print(
            f"{refused:,} message(s) a budget refused, kept out of the context"
            f" (nightowl sessions export {key} has them)",
            file=out,
        )
    if record.anchor is not None:
        print(f"last reported prompt: {record.anchor.prompt_tokens:,} tokens", file=out)
    summary = current_summary(rows)
    print("\n── current summary ──", file=out)
    print(
        visible(text_of(summary.message)) if summary else "(none: nothing compressed yet)", file=out
    )
    print("\n── active context ──", file=out)
    for row in rows:
        print(visible(describe_row(row, full=full)), file=out)
    return 0


def current_summary(rows: list[StoredMessage]) -> StoredMessage | None:
    """The active hand-off summary: the active row that carries the compression marker."""
    return next((r for r in rows if is_summary_message(r.message)), None)


def describe_row(row: StoredMessage, *, full: bool) -> str:
    message = row.message
    text = text_of(message)
    if not full:
        text = " ".join(text.split())  # one line per message
        if len(text) > SHOW_CHARS:
            text = f"{text[:SHOW_CHARS]}… ({len(text) - SHOW_CHARS:,} more characters)"
    calls = ", ".join(
        f"{call.get('function', {}).get('name', '?')}(…)"
        for call in message.get("tool_calls") or []
    )
    who = message["role"] + (f" {message['name']}" if message.get("name") else "")
    line = f"#{row.id} {who} ({row.token_count} tok): {text}"
    return line + (f" → calls {calls}" if calls else "")


# -- export --------------------------------------------------------------------------------


def export_line(session_id: str, row: StoredMessage) -> str:
    """One JSONL line: the message as the agent sees it plus what the store keeps beside
    it; ``summary`` and ``refused`` only on the rows they mark
    (docs/operations.md#sessions lists every field)."""
    entry: dict[str, Any] = {
        "session_id": session_id,
        "id": row.id,
        "created_at": row.created_at,
        "active": row.active,
        "compacted": row.compacted,
        "token_count": row.token_count,
        "platform_message_id": row.platform_message_id,
    }
    if is_summary_message(row.message):  # the rule compression finds its summary by
        entry["summary"] = True
    if row.refused:
        entry["refused"] = True
    return json.dumps({**entry, **row.message}, ensure_ascii=False)


async def export_session(
    store: OperatorStore,
    key: str,
    output: str | None,
    out: TextIO,
    err: TextIO,
    *,
    force: bool = False,
) -> int:
    rows = await store.export_rows(key)
    if not rows:
        print(f"nightowl: nothing stored under {key!r}", file=err)
        return 1
    text = "".join(export_line(session_id, row) + "\n" for session_id, row in rows)
    # Compressed, or in a session /new ended; a refused row is neither.
    archived = sum(1 for _, row in rows if not row.active and not row.refused)
    try:
        if output is None:
            out.write(text)
            out.flush()
        else:
            await asyncio.to_thread(write_export, output, text, force=force)
    except ExportRefused as exc:
        print(f"nightowl: {exc}", file=err)
        return 1
    except OSError as exc:
        where = "standard output" if output is None else output
        print(f"nightowl: could not write {where}: {os_reason(exc)}", file=err)
        return 1
    where = "" if output is None else f" to {output}"
    print(f"exported {len(rows):,} rows ({archived:,} archived){where}", file=err)
    return 0


class ExportRefused(NightowlError):
    """The export target is not one to write (a directory; a file, without --force)."""


def write_export(output: str, text: str, *, force: bool = False) -> None:
    """Write a transcript export, as private as the database (mode 0600 from the start).

    A regular file is written beside the target and renamed over it, so a failed write
    (a full disk) never leaves half an export, nor destroys the file it was to replace. A
    device or a pipe (``/dev/stdout``) is written to directly.
    """
    path = Path(output).expanduser()
    if path.is_dir():
        raise ExportRefused(
            f"{path} is a directory: give a file name, e.g. {path / 'export.jsonl'}"
        )
    if not path.parent.is_dir():
        raise ExportRefused(f"cannot write {path}: the directory {path.parent} does not exist")
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as device:
            device.write(text)
        return
    if path.exists() and not force:
        raise ExportRefused(f"{path} exists; pass --force to overwrite it")
    write_private(path, text, make_dir=False)


# -- forget --------------------------------------------------------------------------------


async def forget_session(
    store: Store,
    key: str,
    out: TextIO,
    err: TextIO,
    *,
    yes: bool = False,
    confirm: Confirm = input,
    running: int | None = None,
) -> int:
    """Erase ``key`` for good. ``running``: the pid of a gateway open on the same file."""
    rows = await store.operator.export_rows(key)
    reminders = len(await store.scheduling.pending_reminders(key))
    notes = len(await store.memory.memories([MemoryOwner("chat", key)], archived=True))
    if not rows and not reminders and not notes and not await store.conversation.inbox(key):
        print(f"nightowl: nothing stored under {key!r}", file=err)
        return 1
    if not yes:
        print(
            f"This erases every message of {key} ({len(rows):,} rows, archived included), "
            f"its memory ({notes:,} notes) and its reminders ({reminders:,} pending) for good."
            " A running gateway starts that chat afresh with its next message.",
            file=out,
        )
        try:
            answer = confirm(f"Type {key} to confirm: ")
        except EOFError:
            answer = ""
        if answer.strip() != key:
            print("Nothing erased.", file=out)
            return 1
    deleted = await store.operator.forget(key)
    scrubbed = await store.operator.scrub()
    cancelled = f", {reminders:,} pending reminder{'s' * (reminders != 1)} cancelled"
    forgotten = f", {notes:,} memory note{'s' * (notes != 1)} erased" * bool(notes)
    print(
        f"Forgot {key}: {deleted:,} messages erased{forgotten}{cancelled * bool(reminders)}.",
        file=out,
    )
    if running is not None:
        print(
            f"A gateway is running on this data dir (pid {running}): that chat starts afresh"
            " with its next message.",
            file=out,
        )
    if not scrubbed:
        print(
            "nightowl: the running gateway kept the write-ahead log busy: erased text may"
            " remain in state.db-wal until the gateway stops (SQLite removes that file then)",
            file=err,
        )
    return 0
