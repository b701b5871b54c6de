"""Long-term memory seen from the chats (docs/design.md#memory): what the model is told,
what it may write, who sees what, and /memory and /forget.

The model is the fake LLM answering like :class:`tests.fakes.memory_model.MemoryModel`
(it calls remember when asked to); everything else is the real gateway and store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.store import MemoryOwner, NewMemory
from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded
from tests.fakes.memory_model import MemoryModel
from tests.harness import (
    RecordingAdapter,
    conversation_of,
    is_turn_request,
    make_config,
    memory_block,
    running_gateway,
    turns_done,
)

ALLOWED = {"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1"]}}
PRIVATE: dict[str, Any] = {"chat_id": "u1", "chat_type": "private", "user_name": "Ann"}
GROUP: dict[str, Any] = {"chat_id": "-7", "chat_type": "group", "user_name": "Ann"}
PEANUTS = "my daughter is allergic to peanuts"


def config_for(tmp_path: Path, llm: FakeLLM, **sections: Any):
    """A window small enough that a few long messages give a compression something to do."""
    model = {"context_length": 8_192, "max_output_tokens": 512}
    return make_config(tmp_path, llm, model=model, platforms=ALLOWED, **sections)


async def ask(adapter: RecordingAdapter, text: str, **where: Any) -> str:
    """Say ``text`` and wait for the answer (a command's, or a turn's reply)."""
    count = len(adapter.sent)
    await adapter.say(text, **where)
    return (await adapter.wait_sent(count + 1))[-1]


def turn_requests(llm: FakeLLM) -> list[Recorded]:
    return [r for r in llm.requests if is_turn_request(r)]


async def test_a_fact_told_in_private_survives_new_and_ten_compactions(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    model = fake_llm.responder = MemoryModel(lossy=True)  # every summary loses every fact
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm), adapter) as gateway:
        assert await ask(adapter, f"remember me: {PEANUTS}", **PRIVATE) == "Noted."
        for i in range(4):  # the first exchange stays until the second compression
            await ask(adapter, f"warming up {i} " + "w" * 1_500, **PRIVATE)
        for round_ in range(10):
            for i in range(4):
                await ask(adapter, f"round {round_} note {i} " + "w" * 1_500, **PRIVATE)
            assert (await ask(adapter, "/compress", **PRIVATE)).startswith("Compressed:")
        await ask(adapter, "/new", **PRIVATE)
        await ask(adapter, "what should I pack for lunch?", **PRIVATE)
        await turns_done(gateway)
    [(count,)] = db.rows(tmp_path, "SELECT sum(compression_count) FROM sessions")
    assert count == 10 and len(model.flushes) == 10  # one flush before each compression
    summaries = db.rows(tmp_path, "SELECT content FROM messages WHERE content LIKE '[CONTEXT%'")
    assert summaries and not any("peanuts" in text for (text,) in summaries)
    last = turn_requests(fake_llm)[-1]
    assert "allergic to peanuts" in (memory_block(last) or "")
    assert not any("peanuts" in str(m["content"]) for m in conversation_of(last))
    [(scope, owner, learned_by)] = db.rows(
        tmp_path, "SELECT scope, owner, learned_by FROM memories WHERE text LIKE '%peanuts%'"
    )
    assert (scope, owner, learned_by) == ("user", "telegram:u1", "tool")


async def test_a_personal_fact_never_reaches_a_request_made_for_a_group(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm), adapter) as gateway:
        await ask(adapter, "remember me: fact: my salary is 91377 a year", **PRIVATE)
        await ask(adapter, "remember chat: fact: the team meets on Thursdays", **GROUP)
        group_from = len(fake_llm.requests)
        # The same person in the group: the block, a search, /memory, compressions with
        # their flushes — none of it may show what they said in private.
        for i in range(12):
            await ask(adapter, f"fact: group note {i} " + "g" * 1_500, **GROUP)
        await ask(adapter, "search: salary year", **GROUP)
        listed = await ask(adapter, "/memory", **GROUP)
        assert (await ask(adapter, "/compress", **GROUP)).startswith("Compressed:")
        await ask(adapter, "what do you know about me?", **GROUP)
        group_to = len(fake_llm.requests)
        await ask(adapter, "and in private?", **PRIVATE)
        await turns_done(gateway)
    group = fake_llm.requests[group_from:group_to]
    assert any(is_turn_request(r) for r in group) and any(not is_turn_request(r) for r in group)
    for request in group:
        assert "91377" not in json.dumps(request.body), request.body
    assert "91377" not in listed and "Thursdays" in listed
    searched = next(r for r in group if after_tool(r))
    assert "No earlier messages match" in searched.messages[-1]["content"]
    assert "91377" in (memory_block(fake_llm.requests[-1]) or "")  # in private it is there


async def test_a_group_turn_cannot_write_into_a_persons_private_notes(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A group's rows hold anyone's words; a personal note would carry them into that
    person's private chat (docs/design.md#memory-scopes)."""
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm), adapter) as gateway:
        await ask(adapter, "remember me: fact: my pin is 4471", **GROUP)
        await ask(adapter, "remember chat: fact: standup is at ten", **GROUP)
        await ask(adapter, "what do you know about me?", **PRIVATE)
        await turns_done(gateway)
    refused = next(r for r in fake_llm.requests if after_tool(r))
    assert "kept only in their private chat" in refused.messages[-1]["content"]
    assert db.rows(tmp_path, "SELECT scope, text FROM memories") == [
        ("chat", "fact: standup is at ten")
    ]
    assert "4471" not in (memory_block(fake_llm.requests[-1]) or "")


async def test_session_search_finds_the_chat_before_new_but_never_another_chat(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await ask(adapter, "our boat is called Minnow", chat_id="a")
        await ask(adapter, "/new", chat_id="a")
        await ask(adapter, "search: boat Minnow", chat_id="a")
        await ask(adapter, "search: boat Minnow", chat_id="b")
    found_here, found_there = [r.messages[-1] for r in fake_llm.requests if after_tool(r)]
    assert "our «boat» is called «Minnow»" in found_here["content"]
    assert "(archived)" in found_here["content"]
    assert "No earlier messages match" in found_there["content"]


async def test_memory_and_forget_in_private_and_in_a_group(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter("telegram")
    members = {"telegram": {**ALLOWED["telegram"], "group_members": "all"}}
    async with running_gateway(make_config(tmp_path, fake_llm, platforms=members), adapter):
        assert await ask(adapter, "/memory", **PRIVATE) == "I don't remember anything here yet."
        await ask(adapter, "remember me: I take my coffee black", **PRIVATE)
        await ask(adapter, "remember chat: we speak German here", **PRIVATE)
        await ask(adapter, "remember chat: the deploy is on Fridays", **GROUP)
        listed = await ask(adapter, "/memory", **PRIVATE)
        assert listed.splitlines()[:4] == [
            "What I remember in this chat:",
            "1. we speak German here",
            "About you (shown only here, in our private chat):",
            "2. I take my coffee black",
        ]
        in_group = await ask(adapter, "/memory", **GROUP)
        assert "1. the deploy is on Fridays" in in_group and "coffee" not in in_group
        assert (await ask(adapter, "/forget all", **GROUP)).startswith(
            "In a group I forget one thing at a time: /forget N."
        )
        # A member who may talk but is no allowed user cannot change the chat's memory.
        refused = await ask(adapter, "/forget 1", **{**GROUP, "user_id": "member"})
        assert refused == "Only an owner of this bot can do that in a group."
        assert await ask(adapter, "/forget 1", **GROUP) == "Forgot: the deploy is on Fridays"
        assert await ask(adapter, "/forget 7", **PRIVATE) == (
            "There is no number 7: /memory lists what I remember here."
        )
        assert "Send /forget all first" in await ask(adapter, "/forget all yes", **PRIVATE)
        asked = await ask(adapter, "/forget all", **PRIVATE)
        assert "removes all 2 things" in asked and "/forget all yes" in asked
        assert "(2 note(s))" in await ask(adapter, "/forget all yes", **PRIVATE)
        assert await ask(adapter, "/memory", **PRIVATE) == "I don't remember anything here yet."
    assert db.value(tmp_path, "SELECT count(*) FROM memories") == 0


async def test_the_model_can_forget_only_what_this_chat_shows(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm), adapter):
        await ask(adapter, "remember me: my PIN hint is the cat", **PRIVATE)
        [(personal,)] = db.rows(tmp_path, "SELECT id FROM memories")
        await ask(adapter, f"forget #{personal}", **GROUP)
        await ask(adapter, f"forget #{personal}", **PRIVATE)
    results = [r.messages[-1]["content"] for r in fake_llm.requests if after_tool(r)]
    assert results[-2] == f"There is no note #{personal} in this chat's memory."
    assert results[-1] == f"Forgot #{personal}."


async def test_the_block_holds_the_most_recently_used_notes_within_max_tokens(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm, memory={"max_tokens": 300})
    async with running_gateway(config, adapter) as gateway:
        for i in range(40):
            await ask(adapter, f"remember chat: fact number {i} is worth keeping for weeks")
        context = await ask(adapter, "/context")
        await ask(adapter, "remember chat: fact number 3 is worth keeping for weeks")  # used again
        await ask(adapter, "hello")
        await turns_done(gateway)
    block = memory_block(turn_requests(fake_llm)[-1]) or ""
    assert len(block) // 4 <= 300
    lines = [line for line in block.splitlines() if line.startswith("- [#")]
    assert "fact number 3 is" in lines[0] and "fact number 39 is" in lines[1]
    assert "fact number 0 is" not in block and "older note(s) not shown" in block
    memory_bar = next(line for line in context.splitlines() if line.startswith("memory"))
    assert 50 < int(memory_bar.split()[-1].replace(",", "")) <= 300


async def test_prompt_caching_holds_while_memory_is_unchanged(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    model = {
        "provider": "anthropic",
        "name": "claude-test-4-5",
        "base_url": fake_llm.anthropic_base_url,
        "api_key": "k",
    }
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm, model=model), adapter):
        await ask(adapter, "hello")
        await ask(adapter, "how are you?")
        await ask(adapter, "remember chat: the cat is called Miso")
        await ask(adapter, "and now?")
    first, second, *_, changed = [r for r in fake_llm.requests if r.api == "anthropic"]
    prompt, block = first.body["system"]
    assert prompt["cache_control"] == {"type": "ephemeral"} and "cache_control" not in block
    assert block["text"].startswith("[nightowl memory]")
    # Unchanged memory: the same system blocks, the earlier messages as they were sent.
    assert second.body["system"] == first.body["system"]
    assert unmarked(second.body["messages"])[:1] == unmarked(first.body["messages"])
    # Changed memory: the cached system prompt stays; only the block after it changes.
    assert changed.body["system"][0] == prompt and "Miso" in changed.body["system"][1]["text"]


def after_tool(request: Recorded) -> bool:
    """A request that carries a tool's result as its last message (OpenAI's shape)."""
    return bool(request.messages) and request.messages[-1].get("role") == "tool"


def unmarked(value: Any) -> Any:
    """``value`` without its cache_control markers (they move every turn)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


async def test_with_memory_off_there_is_no_block_no_tool_and_no_flush(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    model = fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm, memory={"enabled": False})
    async with running_gateway(config, adapter):
        for i in range(30):
            await ask(adapter, f"fact: item {i} is noted. " + "w" * 1_500)
        assert (await ask(adapter, "/compress")).startswith("Compressed:")
        assert await ask(adapter, "/memory") == (
            "Memory is turned off for this bot (memory.enabled in its config)."
        )
    assert model.flushes == []
    for request in fake_llm.requests:
        assert memory_block(request) is None
        offered = {tool["function"]["name"] for tool in request.body.get("tools") or []}
        assert not offered & {"remember", "forget"}


async def test_a_full_memory_never_pushes_a_request_past_a_small_window(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    fake_llm.context_window = 8_192  # the server refuses anything bigger
    adapter = RecordingAdapter()
    config = make_config(
        tmp_path, fake_llm, model={"context_length": 8_192, "max_output_tokens": 512}
    )
    async with running_gateway(config, adapter) as gateway:
        for i in range(80):
            await gateway.store.memory.remember(
                NewMemory(MemoryOwner("chat", "console:t"), f"note {i}: " + "m" * 200)
            )
        for i in range(12):
            await ask(adapter, f"message {i} " + "z" * 6_000)
    turns = turn_requests(fake_llm)
    assert len(turns) == 12 and any(not is_turn_request(r) for r in fake_llm.requests)
    for request in fake_llm.requests:  # turns, summaries and flushes alike
        assert request.prompt_tokens + request.max_tokens <= 8_192
    for request in turns:  # an eighth of the input budget at most (docs/design.md#memory-block)
        assert 0 < len(memory_block(request) or "") // 4 <= (8_192 - 512) // 8


async def test_memory_stays_on_down_to_2k_and_says_what_the_window_leaves_out(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    model = fake_llm.responder = MemoryModel(lossy=True)  # summaries lose every fact
    fake_llm.context_window = 4_096  # the server refuses anything bigger
    small = {"name": "fake-model", "context_length": 2_048}
    config = make_config(
        tmp_path, fake_llm, model={"context_length": 4_096}, models={"small": small}
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        assert await ask(adapter, f"remember chat: {PEANUTS}") == "Noted."
        for i in range(12):
            await ask(adapter, f"chatting {i} " + "w" * 1_200)
        assert model.flushes  # compressions at 4K were flushed first
        assert await ask(adapter, "/memory") == (
            f"What I remember in this chat:\n1. {PEANUTS}\n\n"
            "/forget N removes one; /forget all removes everything about you."
        )
        await ask(adapter, "/model small")
        for i in range(20):  # more notes than an eighth of a 2K window holds
            await gateway.store.memory.remember(
                NewMemory(MemoryOwner("chat", "console:t"), f"note {i}: " + "m" * 120)
            )
        await ask(adapter, "what should I pack for lunch?")
        listed = await ask(adapter, "/memory")
        await turns_done(gateway)
    last = turn_requests(fake_llm)[-1]
    block = memory_block(last) or ""
    # An eighth of the input budget at most: the window less its reserve (a quarter).
    assert 0 < len(block) // 4 <= (2_048 - 512) // 8 and "older note(s) not shown" in block
    assert last.prompt_tokens + last.max_tokens <= 2_048
    offered = [
        {t["function"]["name"] for t in r.body.get("tools", [])} for r in turn_requests(fake_llm)
    ]
    assert "remember" in offered[0]  # at 4K, with its schema
    assert {"find_tools", "remember"} <= offered[-1]  # at 2K, lean, remember first
    shown = block.count("- [#")
    assert listed.endswith(
        f"This model's window (2,048 tokens) carries only the {shown} notes used most "
        f"recently; the other {21 - shown} are kept, and I find them when I search."
    )


async def test_forget_in_a_group_reads_the_last_list_posted_there(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Ann's /memory, then Bob's /forget 1 and /memory: the chat now reads "1. b 2. c",
    and Ann's /forget 2 means c — not what her own older list had at 2."""
    fake_llm.responder = MemoryModel()
    adapter = RecordingAdapter("telegram")
    two = {"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1", "u2"]}}
    bob = {**GROUP, "user_id": "u2", "user_name": "Bob"}
    async with running_gateway(make_config(tmp_path, fake_llm, platforms=two), adapter):
        for note in ("a is first", "b is second", "c is third"):
            await ask(adapter, f"remember chat: {note}", **GROUP)
        assert "1. a is first\n2. b is second\n3. c is third" in await ask(
            adapter, "/memory", **GROUP
        )
        assert await ask(adapter, "/forget 1", **bob) == "Forgot: a is first"
        assert "1. b is second\n2. c is third" in await ask(adapter, "/memory", **bob)
        assert await ask(adapter, "/forget 2", **GROUP) == "Forgot: c is third"
