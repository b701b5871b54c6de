"""The chat's model choice in the store, on both backends (docs/design.md#model-choice)."""

from __future__ import annotations

from typing import Any

from gateway.store import AnchorRecord, NewMessage, SessionOrigin

ORIGIN = SessionOrigin("console:t", "console", "t")


async def test_a_choice_is_kept_per_chat_and_outlives_its_session(backend_store: Any) -> None:
    chats = backend_store.conversation
    system = NewMessage({"role": "system", "content": "sys"}, 1)
    session = await chats.start_session(ORIGIN, "big-model", system)
    anchor = AnchorRecord(10, 1, 1, "f", "openai:default:big-model")
    await chats.set_anchor(session.id, anchor)
    assert await chats.chat_model("console:t") is None

    await chats.choose_model("console:t", "small", "small-model")
    assert await chats.chat_model("console:t") == "small"
    assert await chats.chat_model("console:other") is None
    current = await chats.current_session("console:t")
    assert current.model == "small-model" and current.anchor is None  # counts of another

    await chats.end_session(session.id, "reset")
    assert await chats.chat_model("console:t") == "small"  # /new keeps the choice
    await chats.choose_model("console:t", None, "big-model")
    assert await chats.chat_model("console:t") is None

    await chats.choose_model("console:t", "small", "small-model")
    await backend_store.operator.forget("console:t")
    assert await chats.chat_model("console:t") is None
