"""The texts compression writes into a conversation, and how to recognise them later.

The summary lives in the transcript itself (a message starting with
:data:`SUMMARY_PREFIX`), so the next compression finds the previous summary there — after
a restart too — instead of in process memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.messages import Message

SUMMARY_PREFIX = "[CONTEXT COMPACTION]"
SUMMARY_INTRO = (
    f"{SUMMARY_PREFIX} Earlier turns of this conversation were compacted into the summary "
    "below. It is background for reference, not new instructions: respond to the latest "
    "user message that follows it. The original messages are archived and can be found "
    "with session_search."
)
SUMMARY_END = "[END OF CONTEXT COMPACTION]"
#: Separates a summary merged into the first tail message from that message's own text.
MERGED_MESSAGE_DELIMITER = "[END OF CONTEXT COMPACTION — the original message follows]"

#: Appended once, at the first compression, to the system prompt (docs/design.md#assembly).
SYSTEM_COMPACTION_NOTE = (
    "[Note: some earlier turns of this conversation have been compacted into a summary "
    "to save context space.]"
)

PRUNED_TOOL_OUTPUT = "[Old tool output cleared to save context space]"
STUB_TOOL_RESULT = "[Result from earlier conversation — see the context summary]"
#: How far into the list a previous summary can sit (after the head of up to 3 rows and
#: any tool results the head absorbed); a user typing the prefix later is not a summary.
SUMMARY_SEARCH_WINDOW = 16


def text_of(message: Message) -> str:
    """The plain text of a message's content (text parts joined; images left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return "" if content is None else str(content)


def is_summary_message(message: Message) -> bool:
    """Whether this message carries a compression summary (standalone or merged)."""
    return message.get("role") in ("user", "assistant") and text_of(message).startswith(
        SUMMARY_PREFIX
    )


def summary_body(message: Message) -> str:
    """The summary text of a summary message, without the intro and end markers."""
    text = text_of(message)
    text = text.split(MERGED_MESSAGE_DELIMITER, 1)[0]
    if text.startswith(SUMMARY_INTRO):
        text = text[len(SUMMARY_INTRO) :]
    elif text.startswith(SUMMARY_PREFIX):
        text = text[len(SUMMARY_PREFIX) :]
    return text.replace(SUMMARY_END, "").strip()


def merged_original_text(message: Message) -> str | None:
    """For a summary merged into a tail message: that message's own text, else None."""
    text = text_of(message)
    if MERGED_MESSAGE_DELIMITER not in text:
        return None
    return text.split(MERGED_MESSAGE_DELIMITER, 1)[1].lstrip("\n")


def find_summary_index(messages: Sequence[Message]) -> int | None:
    """Index of the latest compression summary near the start of the list, or None."""
    found = None
    for index, message in enumerate(messages[:SUMMARY_SEARCH_WINDOW]):
        if is_summary_message(message):
            found = index
    return found


def summary_message_text(body: str) -> str:
    """The content of a standalone summary message."""
    return f"{SUMMARY_INTRO}\n\n{body.strip()}\n\n{SUMMARY_END}"


def is_real_user_message(message: Message) -> bool:
    """A user message a person wrote (not a summary compression inserted)."""
    return message.get("role") == "user" and not is_summary_message(message)
