"""The deterministic fallback summary: built from the removed turns, no LLM (SPEC C8, C14).

Used when the summary call fails in a way that should not keep the conversation stuck.
It keeps the goal (the first user request), the latest user requests, decisions the
assistant announced, files mentioned and errors seen, and carries the previous summary
forward, so what the earlier summaries held is not lost. Bounded to 8000 characters; it
becomes the previous summary the next compression updates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent.compression.markers import is_real_user_message, text_of

MAX_CHARS = 8_000
_ITEM_CHARS = 240
_SCAN_CHARS = 600
#: Only the newest messages are scanned for decisions, errors, paths and preferences.
_SCAN_MESSAGES = 300
_SECTION = re.compile(r"^## Goal\s*\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_PATH = re.compile(
    r"(?<![\w/])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}\b|\b[\w-]+\.(?:py|js|ts|md|json|yaml|yml|toml|txt|sh|go|rs|java|c|h|cpp|sql|html|css)\b"
)
_DECISION = re.compile(
    r"\b(decided|decide|we'll|we will|i'll use|going with|chose|choose|switch(?:ed)? to|use .+ instead)\b",
    re.IGNORECASE,
)
_ERROR = re.compile(r"\b(error|failed|failure|exception|traceback)\b", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(always|never|prefer|please don't|do not|don't|must|should)\b", re.IGNORECASE
)


def _one_line(text: str, limit: int = _ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_sentence_with(pattern: re.Pattern[str], text: str) -> str | None:
    for sentence in re.split(r"(?<=[.!?])\s+|\n", text):
        if pattern.search(sentence):
            return _one_line(sentence)
    return None


def _previous_goal(previous_summary: str | None) -> str | None:
    match = _SECTION.search(previous_summary or "")
    if not match:
        return None
    goal = match.group(1).strip()
    return _one_line(goal, 500) if goal and goal.lower() != "none" else None


def _unique(items: list[str], limit: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out[-limit:]


def _excerpt(text: str) -> str:
    # Scanning whole pasted logs would make the fallback slow exactly when it is needed.
    if len(text) <= 2 * _SCAN_CHARS:
        return text
    return text[:_SCAN_CHARS] + "\n" + text[-_SCAN_CHARS:]


def _recent_findings(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[str], list[str], list[str]]:
    """The latest decisions, errors and file paths, newest scanned first, in order."""
    decisions: dict[str, None] = {}
    errors: dict[str, None] = {}
    files: dict[str, None] = {}
    for message in list(reversed(messages))[:_SCAN_MESSAGES]:
        if len(decisions) >= 4 and len(errors) >= 3 and len(files) >= 10:
            break
        text = _excerpt(text_of(message))
        role = message.get("role")
        found = None
        if role == "assistant" and len(decisions) < 4:
            found = _first_sentence_with(_DECISION, text)
            decisions.setdefault(found or "", None)
        elif role == "tool" and len(errors) < 3:
            found = _first_sentence_with(_ERROR, text)
            errors.setdefault(found or "", None)
        arguments = " ".join(
            str(call.get("function", {}).get("arguments", ""))
            for call in message.get("tool_calls") or []
            if isinstance(call, Mapping)
        )
        for path in reversed(_PATH.findall(text + " " + _excerpt(arguments))):
            if len(files) < 10:
                files.setdefault(path, None)
    return tuple(  # type: ignore[return-value]
        [item for item in reversed(found) if item] for found in (decisions, errors, files)
    )


def build_fallback_summary(
    turns: Sequence[Mapping[str, Any]],
    previous_summary: str | None,
    extra: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A summary of ``turns`` (plus ``extra`` rows kept only truncated) from their text alone."""
    users = [text_of(m) for m in turns if is_real_user_message(m) and text_of(m).strip()]
    goal = [_one_line(users[0], 500)] if users else []
    earlier_goal = _previous_goal(previous_summary)
    if earlier_goal:
        goal.insert(0, earlier_goal)
    latest = [_one_line(u) for u in users[1:]][-3:]
    preferences = _unique(
        [
            s
            for s in (
                _first_sentence_with(_PREFERENCE, _excerpt(u)) for u in users[-_SCAN_MESSAGES:]
            )
            if s
        ],
        3,
    )
    decisions, errors, files = _recent_findings([*turns, *extra])
    sections = [
        ("## Goal", goal or ["(no user request among the compacted turns)"]),
        ("## Constraints & Preferences", preferences),
        ("## Progress\n### Done", []),
        ("### In Progress", []),
        ("### Blocked", errors),
        ("## Key Decisions", decisions),
        ("## Relevant Files", files),
        ("## Next Steps", [f"Latest user request: {u}" for u in latest]),
        (
            "## Critical Context",
            [
                f"This summary was built without the summary model from {len(turns)} "
                "archived messages; search them with session_search for details.",
                *[f"Recent message kept truncated: {_one_line(text_of(m))}" for m in extra[:2]],
            ],
        ),
    ]
    body = "\n\n".join(
        heading + "\n" + ("\n".join(f"- {item}" for item in items) if items else "None")
        for heading, items in sections
    )
    if previous_summary:
        room = MAX_CHARS - len(body) - 60
        carried = previous_summary.strip()
        if room > 200:
            if len(carried) > room:
                carried = carried[: room - 1] + "…"
            body += f"\n\n## Earlier summary (carried over)\n{carried}"
    return body[:MAX_CHARS]
