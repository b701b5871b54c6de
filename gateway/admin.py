"""``nightowl sessions``: list, show, export and forget the sessions in the database.

``forget`` is a user's right to erase and the ONLY deletion path in nightowl: every row
ever stored under the key (archived included) and its waiting inbox go, and the file is
scrubbed so the text cannot be recovered from free pages, the WAL or the search index.
Run it while the gateway is stopped: a gateway that has the session open would write to
it again.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from agent.compression.markers import SUMMARY_PREFIX, text_of
from gateway.config import Config
from gateway.store import SessionSummary, SQLiteStore, StoredMessage

#: Messages longer than this are shortened in ``show`` (``--full`` prints them whole).
SHOW_CHARS = 300

Confirm = Callable[[str], str]


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
    if not config.database_path.exists():
        if args.action == "list":
            print(f"No sessions yet ({config.database_path} does not exist).", file=out)
            return 0
        print(f"nightowl: no database at {config.database_path}", file=err)
        return 1
    async with SQLiteStore(config.database_path) as store:
        if args.action == "list":
            print_table(await store.list_sessions(), out)
            return 0
        if args.action == "show":
            return await show_session(store, args.key, out, err, full=args.full)
        if args.action == "export":
            return await export_session(store, args.key, args.output, out, err)
        if args.action == "forget":
            return await forget_session(store, args.key, out, err, yes=args.yes, confirm=confirm)
    raise ValueError(f"unknown sessions action {args.action!r}")


# -- list ----------------------------------------------------------------------------------


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
        print("  ".join(cells).rstrip(), file=out)


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


# -- show ----------------------------------------------------------------------------------


async def show_session(
    store: SQLiteStore, key: str, out: TextIO, err: TextIO, *, full: bool = False
) -> int:
    record = await store.current_session(key)
    if record is None:
        print(f"nightowl: no current session {key!r} (see: nightowl sessions list)", file=err)
        return 1
    rows = await store.load_active(record.id)
    archived = next(
        (s.archived_messages for s in await store.list_sessions() if s.session_id == record.id), 0
    )
    tokens = sum(row.token_count for row in rows)
    print(f"{key}  ({record.platform}, session {record.id}, model {record.model})", file=out)
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
    if record.anchor is not None:
        print(f"last reported prompt: {record.anchor.prompt_tokens:,} tokens", file=out)
    summary = current_summary(rows)
    print("\n── current summary ──", file=out)
    print(text_of(summary.message) if summary else "(none: nothing compressed yet)", file=out)
    print("\n── active context ──", file=out)
    for row in rows:
        print(describe_row(row, full=full), file=out)
    return 0


def current_summary(rows: list[StoredMessage]) -> StoredMessage | None:
    """The active hand-off summary: the active row that starts with the compaction marker."""
    return next((r for r in rows if text_of(r.message).startswith(SUMMARY_PREFIX)), None)


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
    """One JSONL line: the message as the agent sees it plus what the store keeps beside it."""
    entry: dict[str, Any] = {
        "session_id": session_id,
        "id": row.id,
        "created_at": row.created_at,
        "active": row.active,
        "compacted": row.compacted,
        "token_count": row.token_count,
        "platform_message_id": row.platform_message_id,
        **row.message,
    }
    return json.dumps(entry, ensure_ascii=False)


async def export_session(
    store: SQLiteStore, key: str, output: str | None, out: TextIO, err: TextIO
) -> int:
    rows = await store.export_rows(key)
    if not rows:
        print(f"nightowl: nothing stored under {key!r}", file=err)
        return 1
    lines = [export_line(session_id, row) for session_id, row in rows]
    archived = sum(1 for _, row in rows if not row.active)
    if output is None:
        for line in lines:
            print(line, file=out)
    else:
        _write_private(output, "".join(line + "\n" for line in lines))
    where = "" if output is None else f" to {output}"
    print(f"exported {len(rows):,} rows ({archived:,} archived){where}", file=err)
    return 0


def _write_private(output: str, text: str) -> None:
    """A transcript export is as private as the database: mode 0600 from the start."""
    path = Path(output).expanduser()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(0o600)  # an existing file keeps its old mode through O_TRUNC


# -- forget --------------------------------------------------------------------------------


async def forget_session(
    store: SQLiteStore,
    key: str,
    out: TextIO,
    err: TextIO,
    *,
    yes: bool = False,
    confirm: Confirm = input,
) -> int:
    rows = await store.export_rows(key)
    if not rows and not await store.inbox(key):
        print(f"nightowl: nothing stored under {key!r}", file=err)
        return 1
    if not yes:
        print(
            f"This erases every message of {key} ({len(rows):,} rows, archived included) "
            "for good. A running gateway starts that chat afresh with its next message.",
            file=out,
        )
        try:
            answer = confirm(f"Type {key} to confirm: ")
        except EOFError:
            answer = ""
        if answer.strip() != key:
            print("Nothing erased.", file=out)
            return 1
    deleted = await store.forget(key)
    await store.scrub()
    print(f"Forgot {key}: {deleted:,} messages erased.", file=out)
    return 0
