"""Long chats with small local models, through the real gateway: every message answered,
facts recalled, no request refused when the window is known (docs/design.md#served-window,
#output-reserve, #calibration, #silent-truncation). A sample of bench/local_models.py's
matrix; the fakes behave as the real servers do (tests/fakes/local_servers.py)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from tests.child_process import nightowl, write_config
from tests.e2e.local_models import (
    ERRORS,
    FACTS,
    Outcome,
    TelegramChat,
    model_answer,
    run_chat,
    text_of_length,
)
from tests.fakes.llm_server import Recorded, Reply
from tests.fakes.local_servers import FakeLlamaCpp, FakeOllama, FakeVllm
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    is_turn_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)


def last_turn(server: FakeOllama) -> Recorded:
    return [r for r in server.requests if is_turn_request(r)][-1]


def all_answered(outcome: Outcome) -> None:
    assert outcome.errors == []
    assert outcome.answered == outcome.turns
    assert outcome.recall == 1.0


@pytest.mark.parametrize("language", ["en", "ru"])
async def test_ollama_without_a_configured_window_is_asked_and_nothing_is_cut(
    tmp_path: Path, language: str
) -> None:
    # The model is not loaded at start: Ollama only says what it declares (40,960) until
    # the first request loads it; /v1 serves 4,096 whatever the request says.
    async with FakeOllama(served=4_096, declared=40_960) as ollama:
        outcome = await run_chat(tmp_path, ollama, turns=50, language=language)
    all_answered(outcome)
    assert outcome.cuts == 0 and outcome.refusals == 0
    assert outcome.max_prompt <= 1.0


async def test_a_configured_window_larger_than_ollama_serves_loses_and_the_operator_is_told(
    tmp_path: Path,
) -> None:
    async with FakeOllama(served=4_096, loaded=True) as ollama:
        adapter = RecordingAdapter()
        config = make_config(
            tmp_path, ollama, model={"name": ollama.model, "context_length": 32_768}
        )
        ollama.responder = summarizing()
        async with running_gateway(config, adapter):
            await adapter.say("hello")
            await adapter.wait_sent(1)
            await adapter.say("/status")
            status = (await adapter.wait_sent(2))[-1]
    assert (
        "window 4,096 tokens (the server serves 4,096 tokens, not 32,768: set "
        "OLLAMA_CONTEXT_LENGTH=32768 where Ollama runs (or PARAMETER num_ctx 32768 in the "
        "model's Modelfile), or lower model.context_length)" in status
    )


async def test_a_model_never_pulled_is_told_at_start_and_to_whoever_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # model.name "qwen3:8B" where Ollama has "qwen3:8b": every request is a 404.
    async with FakeOllama(served=4_096, loaded=True) as ollama:
        adapter = RecordingAdapter()
        config = make_config(tmp_path, ollama, model={"name": "qwen3:8B"})
        with caplog.at_level(logging.WARNING):
            async with running_gateway(config, adapter) as gateway:
                told = [r.getMessage() for r in caplog.records if "no model" in r.getMessage()]
                await adapter.say("hello")
                [reply] = await adapter.wait_sent(1)
                await adapter.say("/status")
                status = (await adapter.wait_sent(2))[-1]
                session = await gateway.store.conversation.current_session("console:t")
                assert session is not None
                kept = await gateway.store.conversation.load_active(session.id)
    assert told == [
        f"the model server at http://127.0.0.1:{ollama.port} has no model qwen3:8B (it has "
        "qwen3:8b), so every reply fails: set model.name to qwen3:8b (names are "
        "case-sensitive)"
    ]
    assert reply == (
        "The model server doesn't have the model this bot is set to use. The bot's owner "
        "needs to fix the model's name."
    )
    # /status says its window is a guess, and why.
    assert (
        "(a guess: at start the server had no model qwen3:8B, it has qwen3:8b; set "
        "model.name to qwen3:8b (names are case-sensitive))" in status
    ), status
    # Kept, and answered with what to do; the refused call not tried again.
    said = [row.message.get("content") for row in kept if row.message["role"] == "user"]
    assert said == ["hello"]
    assert len([r for r in ollama.requests if is_turn_request(r)]) == 1


async def test_a_summary_model_never_pulled_is_told_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeOllama(loaded=True) as main, FakeOllama(model="qwen3:1.7b") as small:
        aux = {"model": "qwen3:1.7B", "base_url": small.openai_base_url}
        config = make_config(
            tmp_path, main, model={"name": main.model}, auxiliary={"compression": aux}
        )
        with caplog.at_level(logging.WARNING):
            async with running_gateway(config, RecordingAdapter()):
                told = [r.getMessage() for r in caplog.records if "no model" in r.getMessage()]
    assert told == [
        f"auxiliary.compression: the model server at http://127.0.0.1:{small.port} has no model "
        "qwen3:1.7B (it has qwen3:1.7b), so summaries fall back to the main model: set "
        "auxiliary.compression.model to qwen3:1.7b (names are case-sensitive)"
    ]


@pytest.mark.parametrize(
    ("server", "context_length"),
    [
        (FakeVllm(served=4_096), 4_096),  # right
        (FakeVllm(served=4_096, wording="2024"), None),  # asked
        (FakeVllm(served=4_096), 8_192),  # wrong, and corrected by asking
        (FakeLlamaCpp(served=4_096), 32_768),
        (FakeLlamaCpp(served=8_192), None),
    ],
    ids=["vllm-right", "vllm-none", "vllm-wrong", "llama.cpp-wrong", "llama.cpp-none"],
)
async def test_servers_that_refuse_are_never_refused_when_they_can_be_asked(
    tmp_path: Path, server: FakeVllm | FakeLlamaCpp, context_length: int | None
) -> None:
    async with server:
        outcome = await run_chat(
            tmp_path, server, turns=50, language="ru", context_length=context_length
        )
    all_answered(outcome)
    assert outcome.refusals == 0
    assert outcome.max_fill <= 1.0  # prompt + max_tokens, by the server's own count
    assert outcome.clipped == 0  # no reply stopped by a full slot


async def test_a_wrong_window_on_a_server_that_cannot_be_asked_costs_one_refusal(
    tmp_path: Path,
) -> None:
    # Behind a proxy: /v1/models lists ids only. The config claims twice the window.
    async with FakeVllm(served=4_096, listed=False) as vllm:
        outcome = await run_chat(tmp_path, vllm, turns=60, language="ru", context_length=8_192)
    all_answered(outcome)
    assert outcome.refusals == 1  # learned from the server's own numbers, then none


async def test_a_two_thousand_token_window_answers_every_message_and_the_first_after_new(
    tmp_path: Path,
) -> None:
    async with FakeVllm(served=2_048) as vllm:
        outcome = await run_chat(
            tmp_path, vllm, turns=40, language="ru", context_length=2_048, new_at=20
        )
    assert outcome.errors == [] and outcome.refusals == 0


@pytest.mark.parametrize("version", [(0, 12), (0, 30)], ids=["0.12", "0.30"])
async def test_an_ollama_shrunk_under_a_running_gateway_cuts_one_prompt_not_answered(
    tmp_path: Path, version: tuple[int, int]
) -> None:
    """The operator restarts Ollama with a smaller window while nightowl runs, and another
    client loads the model before nightowl's next turn: nothing says the window changed,
    so one request is sized for the old one. The cut is seen in the counts, confirmed by
    asking, and the turn is answered from the whole conversation, summarized."""
    rng = random.Random(2)
    async with FakeOllama(served=8_192, loaded=True, version=version) as ollama:
        ollama.responder = summarizing(model_answer("en", rng))
        adapter = RecordingAdapter()
        config = make_config(
            tmp_path, ollama, model={"name": ollama.model, "max_output_tokens": 1_024}
        )
        async with running_gateway(config, adapter):
            await adapter.say(f"fact: #0 {FACTS['en'][0]}. " + text_of_length(rng, "en", 200))
            sent = 1
            await adapter.wait_sent(sent)
            while last_turn(ollama).prompt_tokens < 4_300:  # grown past the smaller window
                await adapter.say(text_of_length(rng, "en", 500))
                sent += 1
                await adapter.wait_sent(sent)
            ollama.served = 4_096  # restarted, and loaded again by someone else
            await adapter.say("recall 0")
            reply = (await adapter.wait_sent(sent + 1))[-1]
            await adapter.say("/status")
            status = (await adapter.wait_sent(sent + 2))[-1]
    assert len(ollama.cuts) == 1
    assert f"is: {FACTS['en'][0]}" in reply
    assert "window 4,096 tokens (what ollama said it serves)" in status


async def test_a_restarted_ollama_with_a_smaller_window_cuts_nothing_it_answers(
    tmp_path: Path,
) -> None:
    """The operator restarts an Ollama older than 0.10 (its /api/ps names no window) with
    the default window under a long conversation: the one request it cuts is not
    answered from."""
    async with FakeOllama(served=32_768, loaded=True, version=(0, 9)) as ollama:
        await run_chat(tmp_path, ollama, turns=30)  # about 8,000 tokens of conversation
        ollama.served, ollama.loaded = 4_096, False
        cut_reply = "AN ANSWER TO A CUT PROMPT"
        answer_whole = model_answer("en", random.Random(1))

        def answer(request: Recorded) -> Reply:
            return Reply(cut_reply) if request.cut else answer_whole(request)

        adapter = RecordingAdapter()
        config = make_config(tmp_path, ollama, model={"name": ollama.model})
        ollama.responder = summarizing(answer)
        async with running_gateway(config, adapter):
            await adapter.say("recall 0")
            replies = await adapter.wait_sent(1)
    assert len(ollama.cuts) == 1
    assert cut_reply not in replies[-1]
    assert f"is: {FACTS['en'][0]}" in replies[-1]


@pytest.mark.parametrize("shift", [True, False], ids=["cutting", "refusing"])
async def test_a_restarted_ollama_is_asked_before_the_first_request_nothing_cut_or_refused(
    tmp_path: Path, shift: bool
) -> None:
    """The operator restarts Ollama with its default window under a long conversation;
    the model is not loaded yet. Before hygiene sizes anything, nightowl has it load the
    model and asks what it serves: no request is cut (or, without context shift, refused),
    no summary is written from a cut prompt."""
    async with FakeOllama(served=32_768, loaded=True, shift=shift) as ollama:
        await run_chat(tmp_path, ollama, turns=30)  # about 8,000 tokens of conversation
        ollama.served, ollama.loaded = 4_096, False
        adapter = RecordingAdapter()
        config = make_config(tmp_path, ollama, model={"name": ollama.model})
        ollama.responder = summarizing(model_answer("en", random.Random(1)))
        async with running_gateway(config, adapter):
            await adapter.say("recall 0")
            (reply,) = await adapter.wait_sent(1)
    assert ollama.cuts == [] and ollama.refusals == 0 and ollama.loads == 1
    assert f"is: {FACTS['en'][0]}" in reply


async def test_nightowl_chat_in_russian_against_ollama(tmp_path: Path) -> None:
    """The README's path: `nightowl chat` with a local model and no context_length."""
    async with FakeOllama(served=4_096) as ollama:
        ollama.responder = summarizing(model_answer("ru", random.Random(3)))
        config = write_config(tmp_path, ollama, name=ollama.model)
        rng = random.Random(5)
        lines = [f"fact: #0 {FACTS['ru'][0]}. " + text_of_length(rng, "ru", 200)]
        lines += [text_of_length(rng, "ru", rng.randint(150, 600)) for _ in range(38)]
        lines.append("recall 0")
        code, out, err = await nightowl(
            "chat", "-c", str(config), stdin="\n".join(lines) + "\n", cwd=tmp_path
        )
    assert code == 0, err
    # Lines that arrive while a reply is written are answered together, in order.
    answers = [line for line in out.splitlines() if line.startswith("owl › ")]
    assert answers and not any(marker in out for marker in ERRORS)
    assert f"is: {FACTS['ru'][0]}" in answers[-1]
    seen = "\n".join(r.all_text for r in ollama.requests)
    assert all(line[:60] in seen for line in lines)  # every line reached the model
    assert ollama.cuts == [] and ollama.refusals == 0


async def test_telegram_against_llama_cpp_with_a_wrong_window(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=4_096) as server:
        outcome = await run_chat(
            tmp_path,
            server,
            turns=40,
            language="ru",
            context_length=16_384,
            chat=TelegramChat(telegram),
        )
    all_answered(outcome)
    assert outcome.refusals == 0 and outcome.clipped == 0


async def test_a_streamed_answer_to_a_cut_prompt_is_taken_back_in_telegram(
    tmp_path: Path,
) -> None:
    """An Ollama that cannot say its window restarted with its default one under a long
    conversation: the reply to the prompt it cut was already streaming into the chat; it
    is replaced, not kept."""
    cut_reply = "AN ANSWER TO A CUT PROMPT " * 20
    ollama = FakeOllama(served=32_768, loaded=True, version=(0, 9))  # /api/ps names no window
    async with FakeTelegram() as telegram, ollama:
        chat = TelegramChat(telegram, stream=True)
        await run_chat(tmp_path, ollama, turns=30, chat=chat)
        ollama.served, ollama.loaded = 4_096, False
        answer_whole = model_answer("en", random.Random(1))
        ollama.responder = summarizing(
            lambda request: Reply(cut_reply) if request.cut else answer_whole(request)
        )
        config = make_config(tmp_path, ollama, model={"name": ollama.model}, **chat.sections)
        async with chat.gateway(config) as gateway:
            before = len(telegram.sent)
            await chat.say("recall 0")
            await chat.wait_sent(before + 1)
            await turns_done(gateway)
    assert len(ollama.cuts) == 1
    assert any("AN ANSWER TO A CUT" in edit.text for edit in telegram.edits + telegram.sent)
    shown = chat.shown()[before:]
    assert not any("AN ANSWER TO A CUT" in text for text in shown)
    assert f"is: {FACTS['en'][0]}" in shown[-1]


async def test_how_the_server_counts_outlives_a_restart(tmp_path: Path) -> None:
    async with FakeVllm(served=8_192) as vllm:
        await run_chat(tmp_path, vllm, turns=12, language="ru")
        config = make_config(tmp_path, vllm, model={"name": vllm.model})
        async with running_gateway(config, RecordingAdapter()) as gateway:
            runtime = await gateway.sessions.existing("console:t")
            assert runtime is not None
            # Russian counts 1.6 times the estimate here: known before the first request.
            assert runtime.agent.calibration.ratio > 1.3


@pytest.mark.parametrize(("language", "server"), [("en", "vllm"), ("ru", "vllm"), ("en", "ollama")])
async def test_a_2k_summary_model_beside_an_8k_main_one_gets_only_what_fits_it(
    tmp_path: Path, language: str, server: str
) -> None:
    # auxiliary.compression names a small model on its own server and no window: it is
    # asked, like the main one, and every call to it — summary pieces, their merge, the
    # memory flush — fits its 2,048 tokens (docs/design.md#summary-model). An Ollama
    # model not loaded at start says only what it declares (40,960): it is asked again,
    # loading it, before the first summary needs its window.
    rng = random.Random(3)
    summary_server = (
        FakeVllm(served=2_048) if server == "vllm" else FakeOllama(served=2_048, declared=40_960)
    )
    async with FakeVllm(served=8_192) as main, summary_server as small:
        main.responder = model_answer(language, rng)
        small.responder = summarizing()
        summary = {"model": small.model, "base_url": small.openai_base_url}
        config = make_config(
            tmp_path, main, model={"name": main.model}, auxiliary={"compression": summary}
        )
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            for turn in range(40):
                fact = f"fact: #{turn} {FACTS[language][turn % 3]}. " if turn % 10 == 0 else ""
                await adapter.say(fact + text_of_length(rng, language, 900))
                await adapter.wait_sent(turn + 1)
            await turns_done(gateway)
    summaries = [r for r in small.requests if is_summary_request(r)]
    assert len({r.body["messages"][1]["content"][:200] for r in summaries}) >= 3
    # Russian counts 1.6 times the estimate there: the first answer's usage (or at most
    # one refusal, the call then made again reading less) says so; none after.
    assert small.refusals <= (1 if language == "ru" else 0) and main.refusals == 0
    assert getattr(small, "cuts", []) == []  # nothing cut silently either
    over = [r for r in small.requests if r.prompt_tokens + r.max_tokens > 2_048]
    assert len(over) == small.refusals
    assert not any(is_summary_request(r) for r in main.requests)  # never fell back
    assert small.window_asks >= 1
    assert not any(marker in text for text in adapter.texts() for marker in ERRORS)


async def test_a_long_answer_on_a_4k_window_uses_the_room_left_and_a_cut_one_says_so(
    tmp_path: Path,
) -> None:
    # A thinking model writes ~1,500 tokens of reasoning and answer: more than the reserve
    # (a quarter of 4K), less than the room a short prompt leaves (docs/design.md#output-reserve).
    thought = "<think>" + "let me weigh this step by step " * 190 + "</think> Take the train."
    async with FakeVllm(served=4_096) as vllm:
        vllm.responder = lambda request: Reply(thought)
        config = make_config(tmp_path, vllm, model={"name": vllm.model})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("train or bus?")
            [answer] = await adapter.wait_sent(1)
            assert answer.endswith("Take the train.")
        # With model.max_output_tokens 512 the same answer stops there, and the user is told.
        config = make_config(tmp_path, vllm, model={"name": vllm.model, "max_output_tokens": 512})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("and back?")
            cut, notice = await adapter.wait_sent(2)
    assert vllm.refusals == 0
    assert not cut.endswith("Take the train.")
    assert "reached its length limit" in notice and "go on" in notice


async def test_an_ollama_restarted_with_a_larger_window_is_used_at_once_not_compacted_for(
    tmp_path: Path,
) -> None:
    """The operator raises OLLAMA_CONTEXT_LENGTH under a chat that filled its 4K window;
    the model is not loaded yet. The first message's ask (loading it) says 16K, and that
    window applies to the very turn: no summary is written for the old one."""
    async with FakeOllama(served=4_096, loaded=True) as ollama:
        await run_chat(tmp_path, ollama, turns=14)  # about as much as 4K holds
        ollama.served, ollama.loaded = 16_384, False
        summaries = sum(1 for r in ollama.requests if is_summary_request(r))
        adapter = RecordingAdapter()
        config = make_config(tmp_path, ollama, model={"name": ollama.model})
        ollama.responder = summarizing(model_answer("en", random.Random(1)))
        async with running_gateway(config, adapter):
            await adapter.say(text_of_length(random.Random(2), "en", 3_000))
            await adapter.wait_sent(1)
            await adapter.say("/status")
            (status,) = (await adapter.wait_sent(2))[1:]
    assert sum(1 for r in ollama.requests if is_summary_request(r)) == summaries
    assert "16,384" in status
