"""Per-chat model choice (docs/design.md#model-choice): /model shows and switches, the
choice survives restarts and /new, and a smaller window is made to fit before any
request reaches it."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from agent.providers import ProviderError, ProviderSettings
from agent.providers.openai import OpenAIProvider
from gateway.config.schema import Config
from tests.db import stored_messages
from tests.fakes.llm_server import FakeLLM, Recorded
from tests.harness import (
    HeldAnswers,
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)
from tests.waiting import CEILING

SMALL = 8_192


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def models(**small: object) -> dict[str, object]:
    return {"small": {"name": "small-model", "context_length": SMALL, **small}}


async def test_the_choice_survives_a_restart_and_new(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        config = make_config(tmp_path, llm, models=models())
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("/model")
            shown = (await adapter.wait_sent(1))[-1]
            assert "This chat uses default: fake-model" in shown
            assert f"• small — small-model at 127.0.0.1:{llm.port}, 8,192 tokens" in shown
            await adapter.say("/model small")
            assert (await adapter.wait_sent(2))[-1].startswith("This chat now uses small")
            await adapter.say("hi")
            await adapter.wait_sent(3)
            await adapter.say("/status")  # names the choice, not only its model
            status = (await adapter.wait_sent(4))[-1]
            assert status.startswith(f"Model: small — small-model at 127.0.0.1:{llm.port} · ")
        assert llm.requests[-1].body["model"] == "small-model"

        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("still there?")
            await adapter.wait_sent(1)
            assert llm.requests[-1].body["model"] == "small-model"
            await adapter.say("/new")
            await adapter.wait_sent(2)
            await adapter.say("fresh start")
            await adapter.wait_sent(3)
            assert llm.requests[-1].body["model"] == "small-model"
            await adapter.say("/model default")
            await adapter.wait_sent(4)
            await adapter.say("back")
            await adapter.wait_sent(5)
        assert llm.requests[-1].body["model"] == "fake-model"


async def test_only_allowed_users_switch_a_group(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        telegram = {
            "enabled": True,
            "token": "t",
            "allowed_users": ["boss"],
            "allowed_chats": ["-100"],
            "group_members": "all",
        }
        config = make_config(tmp_path, llm, models=models(), platforms={"telegram": telegram})
        adapter = RecordingAdapter("telegram")
        group = {"chat_id": "-100", "chat_type": "group", "addressed": True}
        async with running_gateway(config, adapter):
            await adapter.say("/model small", user_id="member", **group)
            assert "Only an owner" in (await adapter.wait_sent(1))[-1]
            await adapter.say("/model", user_id="member", **group)  # looking is fine
            assert "This chat uses default" in (await adapter.wait_sent(2))[-1]
            await adapter.say("/model small", user_id="boss", **group)
            assert "now uses small" in (await adapter.wait_sent(3))[-1]


async def test_a_smaller_window_is_made_to_fit_before_the_next_request(tmp_path: Path) -> None:
    held = HeldAnswers(matching=lambda request: request.last_user_text == "start")
    async with FakeLLM(responder=summarizing(held.respond)) as llm:
        config = make_config(
            tmp_path,
            llm,
            model={"context_length": 128_000},
            models=models(max_output_tokens=1024),
        )
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            await adapter.say("start")
            await held.wait_held()
            for n in range(59):  # ~60K tokens, answered together in the next turn
                await adapter.say(f"fact: item {n} " + "words " * 660)
            held.release()
            await adapter.wait_sent(2)
            await turns_done(gateway)
            assert max(r.prompt_tokens for r in llm.requests) > 55_000
            before = len(llm.requests)
            llm.context_window = SMALL  # from now on the server refuses what passes 8K

            await adapter.say("/model small")
            answer = (await adapter.wait_sent(3))[-1]
            assert "now uses small" in answer and "summarized to fit" in answer
            await adapter.say("what do you know?")
            assert (await adapter.wait_sent(4))[-1].startswith("ok")
        after: list[Recorded] = llm.requests[before:]
        summaries = [r for r in after if is_summary_request(r)]
        assert summaries and all(r.body["model"] == "small-model" for r in summaries)
        assert after[-1].body["model"] == "small-model"  # the answer
        small = [r for r in after if r.body["model"] == "small-model"]
        assert all(r.prompt_tokens + r.max_tokens <= SMALL for r in small)  # never over
        assert not any("too long" in text for text in adapter.texts())
        users = [content for content, _, _ in stored_messages(tmp_path, "user")]
        assert all(any(f"fact: item {n} " in c for c in users) for n in range(59))  # kept


class Said(logging.Handler):
    """The start's lines about a hosted API, and an event once one is said: the listing
    is asked beside the start, never waited for."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "at start" in record.getMessage() or "does not list" in record.getMessage():
            self.lines.append(record.getMessage())
            self.event.set()


async def told_at_start(config: Config, *, silent: bool = False) -> list[str]:
    said = Said()
    logger = logging.getLogger("gateway.conversation.model_choice")
    logger.addHandler(said)
    try:
        async with running_gateway(config) as gateway:
            if silent:  # the listing's task ends; nothing was said
                await asyncio.wait_for(asyncio.gather(*gateway.asking), CEILING)
            else:
                await asyncio.wait_for(said.event.wait(), CEILING)
    finally:
        logger.removeHandler(said)
    return said.lines


async def test_a_hosted_api_that_refuses_the_key_is_told_at_start_for_nothing(
    tmp_path: Path,
) -> None:
    """A paid API's key is tried at start by its model listing, which costs nothing:
    the operator reads why every reply will fail before anyone writes
    (docs/design.md#hosted-api-at-start). The key that works says nothing."""
    async with FakeLLM(api_key="the-right-key") as llm:

        def config(key: str) -> Config:
            model = {"provider": "anthropic", "base_url": llm.anthropic_base_url, "api_key": key}
            return make_config(tmp_path / key, llm, model=model)

        [refused] = await told_at_start(config("a-revoked-key"))
        assert await told_at_start(config("the-right-key"), silent=True) == []
    assert refused.startswith(
        f"model: fake-model at 127.0.0.1:{llm.port}: the API refused the key at start ("
    )
    assert refused.endswith(
        "every reply fails until model.api_key holds one it takes (`nightowl doctor` tries it)"
    )
    assert not llm.requests  # no message was asked for it


async def test_openai_s_api_names_a_model_it_does_not_list_and_a_silent_api_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No base_url: OpenAI's own API (here where the SDK's own variable points), whose
    listing is whole: a typo in the model's name is told with the nearest names."""
    async with FakeLLM(models=("gpt-4o-mini", "gpt-4o")) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
        model = {"base_url": None, "name": "gpt-4o-mni", "api_key": "k"}
        [typo] = await told_at_start(make_config(tmp_path / "a", llm, model=model))
        model["name"] = "gpt-4o"  # its dated snapshots are listed too: a name it takes
        assert await told_at_start(make_config(tmp_path / "b", llm, model=model), silent=True) == []
    assert typo.endswith(
        "the API does not list that model for this key, so every reply fails: set model.name"
        " to one it lists (gpt-4o-mini, gpt-4o?)"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    [silent] = await told_at_start(make_config(tmp_path / "c", llm, model=model))
    # The host the SDK asked, from its own variable: not OpenAI's, which nobody asked.
    assert ": the API did not answer at start (cannot reach 127.0.0.1" in silent


async def test_the_listing_is_read_through_the_sdk_with_its_errors(fake_llm: FakeLLM) -> None:
    provider = OpenAIProvider(
        ProviderSettings("openai", "fake-model", api_key="k", base_url=fake_llm.openai_base_url)
    )
    assert await provider.listed_models() == ["fake-model"]
    fake_llm.api_key = "another"
    with pytest.raises(ProviderError) as refused:
        await provider.listed_models()
    assert refused.value.kind == "auth" and refused.value.status == 401
    await provider.aclose()
