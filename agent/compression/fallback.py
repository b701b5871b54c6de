"""The deterministic fallback summary: built from the removed turns, no LLM
(docs/design.md#fallback-summary).

Used when the summary model fails in a way that should not keep the conversation stuck,
and during a cooldown once the conversation reaches the safety line. Three promises:

- **Bounded.** At most ``max_chars`` (a share of the window, see
  :func:`~agent.compression.settings.fallback_max_chars`), whatever it is given. Every
  section has a share of that room; what a section leaves unused goes to the facts.
- **Replaces, never nests.** The previous summary (an LLM's or an earlier fallback's) is
  read section by section and its items are carried into the same sections of the new
  one. A summary is never pasted inside another.
- **Facts first.** The user's own lines are kept verbatim (one line each); lines that
  carry identifiers or numbers ("the staging server is db-2", "code 4471") go into
  Critical Context, where the facts carried from earlier summaries come first, so a fact
  told in the first turn survives any number of fallbacks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from agent.compression.markers import is_real_user_message, text_of
from agent.messages import Message

#: The most any fallback summary holds, on the largest windows.
MAX_CHARS = 8_000
_ITEM_CHARS = 240
_SCAN_CHARS = 600
#: Only the newest messages are scanned for decisions, errors, paths and preferences.
_SCAN_MESSAGES = 300
NO_GOAL = "(no user request among the compacted turns)"
BUILT_NOTE = (
    "Built without the summary model from {count} archived messages; "
    "session_search finds them word for word."
)
#: Of Critical Context, carried facts may fill this share; new facts always get the rest.
_CARRIED_SHARE = 0.6

_HEADING = re.compile(r"^#{2,3}\s+(.+?)\s*$", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+)+")
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
#: A line worth keeping as a fact: it names something (digits, an identifier, an address).
_FACT = re.compile(r"\d|\b[A-Za-z]+[-_][A-Za-z0-9]+\b|@|https?://|\b[A-Z]{2,}\b")

# Sections in the order they are written, with their share of the room.
_SECTIONS: tuple[tuple[str, float], ...] = (
    ("Goal", 0.08),
    ("Constraints & Preferences", 0.12),
    ("Blocked", 0.05),
    ("Key Decisions", 0.10),
    ("Relevant Files", 0.05),
    ("Next Steps", 0.15),
    ("Critical Context", 0.45),
)
#: Where items of an earlier summary's sections go (anything unknown: Critical Context).
_CARRY = {
    "goal": "Goal",
    "constraints & preferences": "Constraints & Preferences",
    "key decisions": "Key Decisions",
    "relevant files": "Relevant Files",
    "blocked": "Blocked",
    "critical context": "Critical Context",
    "done": "Critical Context",
    "in progress": None,
    "progress": None,
    "next steps": None,
}


def _one_line(text: str, limit: int = _ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.strip()]


def _first_sentence_with(pattern: re.Pattern[str], text: str) -> str | None:
    for sentence in _sentences(text):
        if pattern.search(sentence):
            return _one_line(sentence)
    return None


def _excerpt(text: str) -> str:
    # Scanning whole pasted logs would make the fallback slow exactly when it is needed.
    if len(text) <= 2 * _SCAN_CHARS:
        return text
    return text[:_SCAN_CHARS] + "\n" + text[-_SCAN_CHARS:]


def parse_sections(summary: str | None) -> dict[str, list[str]]:
    """The items of an earlier summary, by the section of ours they belong to.

    Bullets and numbering are stripped (so they are never doubled), "None" lines and
    blank lines dropped, and the carried-over block of older fallbacks read as facts.
    """
    carried: dict[str, list[str]] = {name: [] for name, _ in _SECTIONS}
    if not summary:
        return carried
    target: str | None = "Critical Context"
    for line in summary.splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = heading.group(1).strip().lower()
            target = _CARRY.get(title, "Critical Context")
            continue
        item = _BULLET.sub("", line).strip()
        if not item or item.lower() in ("none", "none.", NO_GOAL) or target is None:
            continue
        if item.startswith(BUILT_NOTE.split("{", 1)[0]):
            continue  # the previous fallback's own note, not a fact
        carried[target].append(_one_line(item))
    return carried


def _recent_findings(
    messages: Sequence[Message],
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
        if role == "assistant" and len(decisions) < 4:
            decisions.setdefault(_first_sentence_with(_DECISION, text) or "", None)
        elif role == "tool" and len(errors) < 3:
            errors.setdefault(_first_sentence_with(_ERROR, text) or "", None)
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


def _fill(items: Sequence[str], room: int) -> tuple[list[str], int]:
    """As many ``items`` (deduplicated, in order) as fit in ``room`` characters; the
    first one is shortened to fit rather than left out."""
    kept: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not kept and len(item) + 3 > room and room > 40:
            item = _one_line(item, room - 3)
        cost = len(item) + 3  # "- " and the newline
        if item in seen or cost > room:
            continue
        seen.add(item)
        kept.append(item)
        room -= cost
    return kept, room


def build_fallback_summary(
    turns: Sequence[Message],
    previous_summary: str | None,
    extra: Sequence[Message] = (),
    *,
    max_chars: int = MAX_CHARS,
) -> str:
    """A summary of ``turns`` (plus ``extra`` rows kept only as excerpts) from their text
    alone, replacing ``previous_summary`` and at most ``max_chars`` long."""
    carried = parse_sections(previous_summary)
    users = [_one_line(text_of(m)) for m in turns if is_real_user_message(m)]
    users = [u for u in users if u]
    scanned = [_excerpt(text_of(m)) for m in turns if is_real_user_message(m)][-_SCAN_MESSAGES:]
    decisions, errors, files = _recent_findings([*turns, *extra])
    facts = [_one_line(s) for text in scanned for s in _sentences(text) if _FACT.search(s)]
    found: dict[str, list[str]] = {
        "Goal": carried["Goal"][:1] + users[:1],
        "Constraints & Preferences": carried["Constraints & Preferences"]
        + [s for s in (_first_sentence_with(_PREFERENCE, u) for u in scanned) if s],
        "Blocked": errors,
        "Key Decisions": carried["Key Decisions"] + decisions,
        "Relevant Files": files + carried["Relevant Files"],
        "Next Steps": [f"Latest user request: {u}" for u in users[1:][-3:]],
    }
    overhead = 200 + sum(len(name) + 8 for name, _ in _SECTIONS)
    room = max(0, max_chars - overhead)
    spare = 0
    written: dict[str, list[str]] = {}
    for name, share in _SECTIONS[:-1]:
        written[name], left = _fill(found[name], int(room * share))
        spare += left
    context_room = int(room * _SECTIONS[-1][1]) + spare
    old, left = _fill(carried["Critical Context"], int(context_room * _CARRIED_SHARE))
    recent = [
        *facts,
        *(f"Recent message kept as an excerpt: {_one_line(text_of(m))}" for m in extra[:2]),
    ]
    new, _ = _fill(
        [f for f in recent if f not in old],
        context_room - int(context_room * _CARRIED_SHARE) + left,
    )
    written["Critical Context"] = [*old, *new]
    if not written["Goal"]:
        written["Goal"] = [NO_GOAL]
    note = BUILT_NOTE.format(count=len(turns))
    body = "\n\n".join(
        f"## {name}\n" + ("\n".join(f"- {item}" for item in written[name]) or "None")
        for name, _ in _SECTIONS
    )
    return f"{body}\n\n{note}"[:max_chars]
