"""Context window resolution (SPEC T3) and limits learned from providers (T4)."""

from __future__ import annotations

import pytest
import yaml

from agent.model_metadata import (
    CACHE_FILE_NAME,
    NOT_LOADED_PAUSE_SECONDS,
    PROBE_RETRY_PAUSE_SECONDS,
    ContextLengthResolver,
)
from agent.served_window import ServedWindow
from agent.window_table import DEFAULT_CONTEXT_LENGTH, static_context_length


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("anthropic/claude-3.5-sonnet", 200_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-preview", 128_000),
        ("o3-mini", 200_000),
        ("gemini-2.5-pro", 1_048_576),
        ("meta-llama/Llama-3.1-8B-Instruct", 131_072),
        ("llama3.1:8b", 131_072),
        ("qwen2.5-coder:7b", 131_072),
        ("deepseek-chat", 131_072),
        ("mistral-large-latest", 131_072),
        ("mixtral-8x7b", 32_768),
    ],
)
def test_static_table_longest_key_wins(model, window):
    assert static_context_length(model) == window


def test_short_o_series_keys_do_not_match_inside_other_names():
    assert static_context_length("my-model-o1x") is None


def test_override_beats_everything(tmp_path):
    resolver = ContextLengthResolver(tmp_path)
    resolver.learn_limit("gpt-4o", "openai", None, 64_000)
    assert resolver.resolve("gpt-4o", "openai", override=50_000) == 50_000


def test_a_smaller_learned_limit_beats_the_override_after_a_restart(tmp_path):
    ContextLengthResolver(tmp_path).learn_limit("qwen3:8b", "openai", "http://box/v1", 3_000)
    fresh = ContextLengthResolver(tmp_path)
    window = fresh.resolve_with_source("qwen3:8b", "openai", "http://box/v1", override=4_096)
    assert (window.tokens, window.source) == (3_000, "confirmed")
    # Another endpoint serving the same name keeps the configured window.
    assert fresh.resolve("qwen3:8b", "openai", "http://other/v1", override=4_096) == 4_096


async def test_a_server_that_serves_less_than_configured_wins_and_says_how(tmp_path):
    async def ask() -> ServedWindow:
        return ServedWindow("ollama", 4_096, declared=40_960)

    await ContextLengthResolver(tmp_path).ask_server("m", "openai", "http://h/v1", ask)
    window = ContextLengthResolver(tmp_path).resolve_with_source(
        "m", "openai", "http://h/v1", override=32_768
    )
    assert (window.tokens, window.source, window.how, window.server) == (
        4_096,
        "confirmed",
        "served",
        "ollama",
    )


async def test_a_server_asked_again_replaces_what_an_overflow_taught(tmp_path):
    resolver = ContextLengthResolver(tmp_path)
    resolver.learn_limit("m", "openai", "http://h/v1", 3_000)

    async def ask() -> ServedWindow:
        return ServedWindow("llama.cpp", 8_192)

    await resolver.ask_server("m", "openai", "http://h/v1", ask)
    assert resolver.resolve("m", "openai", "http://h/v1") == 8_192  # larger: the server grew


async def test_a_model_not_loaded_caps_the_window_at_what_it_declares_and_is_asked_again(
    tmp_path,
):
    clock = Clock()
    resolver = ContextLengthResolver(tmp_path, clock=clock)

    async def ask() -> ServedWindow:
        return ServedWindow("ollama", None, declared=40_960)

    await resolver.ask_server("qwen3:8b", "openai", "http://h/v1", ask)
    window = resolver.resolve_with_source("qwen3:8b", "openai", "http://h/v1")
    assert (window.tokens, window.source) == (40_960, "declared")  # the table says 131,072
    assert not (tmp_path / CACHE_FILE_NAME).exists()  # an upper bound is not written down
    # Asked again, but not after every answer: a model unloaded after each request
    # (keep_alive: 0) would otherwise cost two requests a turn.
    assert not resolver.wants_asking("qwen3:8b", "openai", "http://h/v1")
    clock.now += NOT_LOADED_PAUSE_SECONDS
    assert resolver.wants_asking("qwen3:8b", "openai", "http://h/v1")


async def test_a_window_a_cut_prompt_showed_lasts_this_process_only(tmp_path):
    resolver = ContextLengthResolver(tmp_path)
    assert resolver.learn_limit("m", "openai", "http://h/v1", 3_000, "truncation")
    assert resolver.resolve("m", "openai", "http://h/v1", override=8_192) == 3_000
    assert not (tmp_path / CACHE_FILE_NAME).exists()
    assert ContextLengthResolver(tmp_path).resolve("m", "openai", "http://h/v1") != 3_000

    async def ask() -> ServedWindow:
        return ServedWindow("ollama", 4_096)

    await resolver.ask_server("m", "openai", "http://h/v1", ask)  # the server says more
    assert resolver.resolve("m", "openai", "http://h/v1") == 4_096


def test_learned_limit_is_authoritative_even_below_the_table(tmp_path):
    resolver = ContextLengthResolver(tmp_path)
    assert resolver.resolve("gpt-4o", "openai", "http://127.0.0.1:8000/v1") == 128_000
    resolver.learn_limit("gpt-4o", "openai", "http://127.0.0.1:8000/v1", 16_384)
    assert resolver.resolve("gpt-4o", "openai", "http://127.0.0.1:8000/v1") == 16_384
    # Another endpoint serving the same name keeps the table's value.
    assert resolver.resolve("gpt-4o", "openai", None) == 128_000


def test_learned_limit_survives_a_restart_and_is_written_atomically(tmp_path):
    ContextLengthResolver(tmp_path).learn_limit("qwen3:8b", "openai", "http://box:11434/v1", 40_960)
    assert [p.name for p in tmp_path.iterdir()] == [CACHE_FILE_NAME]  # no temp file left
    data = yaml.safe_load((tmp_path / CACHE_FILE_NAME).read_text())
    assert next(iter(data["context_lengths"].values()))["limit"] == 40_960
    fresh = ContextLengthResolver(tmp_path)
    window = fresh.resolve_with_source("qwen3:8b", "openai", "http://box:11434/v1")
    assert (window.tokens, window.source) == (40_960, "confirmed")


def test_unknown_model_gets_the_conservative_default(tmp_path):
    window = ContextLengthResolver(tmp_path).resolve_with_source("my-finetune", "openai")
    assert (window.tokens, window.source) == (DEFAULT_CONTEXT_LENGTH, "default")


def test_implausible_limits_are_not_learned(tmp_path):
    resolver = ContextLengthResolver(tmp_path)
    assert resolver.learn_limit("gpt-4o", "openai", None, 12) is False
    assert resolver.resolve("gpt-4o", "openai") == 128_000
    assert not (tmp_path / CACHE_FILE_NAME).exists()


def test_corrupt_cache_file_is_ignored_not_fatal(tmp_path):
    (tmp_path / CACHE_FILE_NAME).write_text("context_lengths: [unclosed")
    assert ContextLengthResolver(tmp_path).resolve("gpt-4o", "openai") == 128_000


async def test_a_served_window_is_cached(tmp_path):
    resolver = ContextLengthResolver(tmp_path)

    async def ask() -> ServedWindow:
        return ServedWindow("vllm", 24_576)

    served = await resolver.ask_server("local-model", "openai", "http://h/v1", ask)
    assert served is not None and served.tokens == 24_576
    assert ContextLengthResolver(tmp_path).resolve("local-model", "openai", "http://h/v1") == 24_576


async def test_failed_ask_is_not_cached_and_pauses_five_minutes(tmp_path):
    clock = Clock()
    resolver = ContextLengthResolver(tmp_path, clock=clock)
    calls = []

    async def failing() -> ServedWindow:
        calls.append(clock.now)
        raise ConnectionError("server down")

    assert await resolver.ask_server("local-model", "openai", "http://h/v1", failing) is None
    assert resolver.resolve_with_source("local-model", "openai", "http://h/v1").source == "default"
    assert not (tmp_path / CACHE_FILE_NAME).exists()
    clock.now += PROBE_RETRY_PAUSE_SECONDS - 1
    await resolver.ask_server("local-model", "openai", "http://h/v1", failing)
    assert len(calls) == 1  # still paused
    # The pause is per endpoint + model: another endpoint is asked right away.
    await resolver.ask_server("local-model", "openai", "http://other/v1", failing)
    assert len(calls) == 2
    clock.now += 1
    await resolver.ask_server("local-model", "openai", "http://h/v1", failing)
    assert len(calls) == 3


async def test_the_pause_lives_in_memory_only(tmp_path):
    clock = Clock()

    async def no_answer() -> None:
        return None

    await ContextLengthResolver(tmp_path, clock=clock).ask_server("m", "openai", None, no_answer)
    assert ContextLengthResolver(tmp_path, clock=clock).probe_allowed("m", "openai")


def test_learning_ends_a_probe_pause(tmp_path):
    resolver = ContextLengthResolver(tmp_path, clock=Clock())
    resolver.note_probe_failed("m", "openai")
    resolver.learn_limit("m", "openai", None, 8_192)
    assert resolver.probe_allowed("m", "openai")
    assert resolver.resolve("m", "openai") == 8_192
