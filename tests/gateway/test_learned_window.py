"""A window the provider stated (smaller than ``model.context_length``) outlives a restart;
``/status`` says where each chosen model's window came from."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing

LEARNED = "window 3,000 tokens (learned from an overflow error; model.context_length says 8,192)"


async def status(adapter: RecordingAdapter) -> str:
    count = len(adapter.sent)
    await adapter.say("/status")
    return (await adapter.wait_sent(count + 1))[-1]


async def test_a_smaller_learned_window_beats_the_configured_one_after_a_restart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 3_000  # the server's real window; config claims 8,192
    fake_llm.responder = summarizing()
    config = make_config(
        tmp_path, fake_llm, model={"context_length": 8_192, "max_output_tokens": 512}
    )
    first = RecordingAdapter()
    async with running_gateway(config, first):
        for i in range(3):
            await first.say(f"part {i}: " + "lorem ipsum dolor " * 250)
            await first.wait_sent(i + 1)
        assert LEARNED in await status(first)

    fake_llm.requests.clear()
    restarted = RecordingAdapter()
    async with running_gateway(config, restarted) as gateway:
        assert gateway.current_window() == 3_000
        assert LEARNED in await status(restarted)
        await restarted.say("and now?")
        (reply,) = (await restarted.wait_sent(2))[1:]
    assert reply == "ok"
    (sent,) = [r for r in fake_llm.requests if "and now?" in r.all_text][-1:]
    assert sent.prompt_tokens + sent.max_tokens <= 3_000


async def test_a_window_learned_in_one_chat_applies_to_the_others_before_they_overflow(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 3_000  # config claims 8,192
    fake_llm.responder = summarizing()
    config = make_config(
        tmp_path, fake_llm, model={"context_length": 8_192, "max_output_tokens": 512}
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("hello from the other chat", chat_id="other")
        await adapter.wait_sent(1)  # this session is open, with the configured window
        for i in range(3):  # this chat runs into the server's real window and learns it
            await adapter.say(f"part {i}: " + "lorem ipsum dolor " * 250)
            await adapter.wait_sent(i + 2)
        assert gateway.current_window() == 3_000
        before = len(fake_llm.requests)
        await adapter.say("and here? " + "sit amet " * 1_100, chat_id="other")
        await adapter.wait_sent(5)
    later = fake_llm.requests[before:]
    assert later and all(r.prompt_tokens + r.max_tokens <= 3_000 for r in later)


async def switch(adapter: RecordingAdapter, name: str) -> None:
    count = len(adapter.sent)
    await adapter.say(f"/model {name}")
    assert "now uses" in (await adapter.wait_sent(count + 1))[-1]


async def test_status_names_where_the_chosen_models_window_came_from(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 3_000  # what the server serves, whichever model is asked
    fake_llm.responder = summarizing()
    models = {  # the same model on the same server as model:, configured otherwise
        "small": {"name": "fake-model", "context_length": 2_048},
        "roomy": {"name": "fake-model", "context_length": 4_096},
        "guess": {"name": "other-model"},  # no context_length, not in the table
    }
    config = make_config(
        tmp_path,
        fake_llm,
        model={"context_length": 8_192, "max_output_tokens": 512},
        models=models,
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter):
        for i in range(3):  # the configured model runs into the server's window
            await adapter.say(f"part {i}: " + "lorem ipsum dolor " * 250)
            await adapter.wait_sent(i + 1)
        assert LEARNED in await status(adapter)

        await switch(adapter, "small")
        assert "window 2,048 tokens (set by models.small.context_length)" in await status(adapter)
        await switch(adapter, "roomy")
        assert (
            "window 3,000 tokens (learned from an overflow error; "
            "models.roomy.context_length says 4,096)"
        ) in await status(adapter)
        await switch(adapter, "guess")
        assert "(a cautious guess: set models.guess.context_length)" in await status(adapter)
        await switch(adapter, "default")
        assert LEARNED in await status(adapter)
