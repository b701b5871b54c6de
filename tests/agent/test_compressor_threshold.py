"""When compression triggers (SPEC C2) and how much output a request may ask for (T5)."""

from __future__ import annotations

import pytest

from agent.compression.settings import CompressionSettings, resolve_model_threshold
from agent.context_compressor import ContextCompressor
from agent.context_compressor import resolve_model_threshold as exported
from agent.providers.base import ProviderError, Usage
from tests.agent.scripted_summarizer import ScriptedSummarizer, conversation, make_engine


def engine_for(model: str, window: int, provider: str = "openai", **settings) -> ContextCompressor:
    return ContextCompressor(
        main=ScriptedSummarizer(name=provider, model=model),
        context_length=window,
        settings=CompressionSettings(**settings),
    )


def test_triggers_at_exactly_the_threshold():
    engine, _ = make_engine(context_length=1_000_000, max_output_tokens=10_000)
    assert engine.threshold_tokens == int((1_000_000 - 10_000) * 0.50)
    assert not engine.should_compress(engine.threshold_tokens - 1)
    assert engine.should_compress(engine.threshold_tokens)


def test_an_explicit_token_count_overrides_the_last_reading():
    engine, _ = make_engine()
    engine.update_from_response(Usage(prompt_tokens=engine.threshold_tokens + 5))
    assert engine.should_compress()
    assert not engine.should_compress(100)
    engine.update_from_response(Usage(prompt_tokens=100))
    assert not engine.should_compress()
    assert engine.should_compress(engine.threshold_tokens)


def test_disabled_compression_never_triggers():
    engine, _ = make_engine(enabled=False)
    assert not engine.should_compress(10**9)


@pytest.mark.parametrize("window", [16_384, 128_000, 200_000, 511_999])
def test_small_windows_never_trigger_below_75_percent(window):
    engine = engine_for("some-model", window, threshold=0.50)
    assert engine.threshold_ratio == 0.75
    assert engine.threshold_tokens == int(engine.input_budget * 0.75)


@pytest.mark.parametrize("window", [2_048, 4_096, 8_192, 16_383])
def test_tiny_windows_never_trigger_below_85_percent(window):
    engine = engine_for("some-model", window, threshold=0.50)
    assert engine.threshold_ratio == 0.85


def test_large_windows_keep_the_configured_threshold():
    assert engine_for("gpt-4.1", 1_047_576).threshold_ratio == 0.50


def test_the_floor_only_raises():
    low = engine_for("gpt-4o", 128_000, model_thresholds={"gpt-4o": 0.40})
    high = engine_for("gpt-4o", 128_000, model_thresholds={"gpt-4o": 0.80})
    assert low.threshold_ratio == 0.75
    assert high.threshold_ratio == 0.80


def test_per_model_key_wins_by_longest_substring():
    keys = {"glm-5.2": 0.40, "glm-5.2-1m": 0.25, "claude-sonnet": 0.35}
    assert resolve_model_threshold("glm-5.2-1m", "openai", 0.5, keys, 1_000_000) == 0.25
    assert resolve_model_threshold("glm-5.2", "openai", 0.5, keys, 1_000_000) == 0.40
    assert resolve_model_threshold("mistral-large", "openai", 0.5, keys, 1_000_000) == 0.5


def test_provider_scoped_key_beats_a_bare_key_with_the_same_substring():
    keys = {"astra": 0.60, "openai:astra": 0.85}
    assert resolve_model_threshold("gpt-6-astra", "openai", 0.5, keys, 1_000_000) == 0.85
    assert resolve_model_threshold("gpt-6-astra", "anthropic", 0.5, keys, 1_000_000) == 0.60


def test_provider_scoped_key_never_matches_on_another_provider():
    keys = {"openai:astra": 0.85}
    assert resolve_model_threshold("gpt-6-astra", "anthropic", 0.5, keys, 1_000_000) == 0.5


def test_a_longer_bare_substring_still_beats_a_scoped_shorter_one():
    keys = {"astra-900k": 0.55, "openai:astra": 0.85}
    assert resolve_model_threshold("astra-900k", "openai", 0.5, keys, 1_000_000) == 0.55


def test_colon_in_a_local_model_name_is_not_a_provider_scope():
    keys = {"qwen2.5:7b": 0.9}
    assert resolve_model_threshold("qwen2.5:7b", "openai", 0.5, keys, 32_000) == 0.9


def test_plugins_can_import_the_resolver_from_the_compressor_module():
    assert exported is resolve_model_threshold


def test_changing_the_model_re_derives_the_threshold_both_ways():
    engine = engine_for("gpt-4o", 128_000, model_thresholds={"gpt-4.1": 0.30})
    assert engine.threshold_ratio == 0.75
    small_threshold = engine.threshold_tokens
    engine.update_model("gpt-4.1", 1_047_576, "openai")
    assert engine.threshold_ratio == 0.30
    assert engine.threshold_tokens == int(engine.input_budget * 0.30)
    engine.update_model("gpt-4o", 128_000, "openai")
    assert engine.threshold_ratio == 0.75
    assert engine.threshold_tokens == small_threshold


def test_model_change_forgets_the_old_models_usage():
    engine, _ = make_engine()
    engine.update_from_response(Usage(prompt_tokens=10**6))
    engine.update_model("other", 128_000)
    assert engine.last_prompt_tokens == 0
    assert not engine.should_compress()


def test_threshold_is_a_share_of_the_window_minus_the_output_reserve():
    engine = engine_for("m", 100_000, max_output_tokens=8_000)
    assert engine.output_reserve == 8_000
    assert engine.threshold_tokens == int(92_000 * 0.75)


def test_output_reserve_never_takes_more_than_a_quarter_of_the_window():
    engine = engine_for("m", 4_096, max_output_tokens=8_000)
    assert engine.output_reserve == 1_024
    assert engine.threshold_tokens == int(3_072 * 0.85)


@pytest.mark.parametrize(("prompt", "expected"), [(10_000, 8_000), (95_000, 5_000), (99_999, 1)])
def test_requests_never_ask_for_more_output_than_the_window_leaves(prompt, expected):
    engine = engine_for("m", 100_000, max_output_tokens=8_000)
    assert engine.window.max_tokens_for(prompt) == expected
    assert prompt + engine.window.max_tokens_for(prompt) <= 100_000


def test_target_ratio_is_clamped():
    assert CompressionSettings(target_ratio=0.95).target_ratio == 0.80
    assert CompressionSettings(target_ratio=0.01).target_ratio == 0.10
    assert CompressionSettings(target_ratio=0.3).target_ratio == 0.3


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        CompressionSettings(threshold=1.5)
    with pytest.raises(ValueError, match="tail_mode"):
        CompressionSettings(tail_mode="fat")  # type: ignore[arg-type]


def test_a_smaller_summary_window_bounds_no_threshold():
    # It reads the span in pieces that fit it (docs/design.md#summary-model).
    aux = ScriptedSummarizer(model="small-aux")
    engine = ContextCompressor(
        main=ScriptedSummarizer(model="gpt-4.1"),
        auxiliary=aux,
        auxiliary_context_length=200_000,
        context_length=1_047_576,
    )
    assert engine.threshold_tokens == int(engine.input_budget * 0.5)


def test_repeating_the_same_model_keeps_the_usage_reading():
    engine, _ = make_engine()
    engine.update_from_response(Usage(prompt_tokens=engine.threshold_tokens))
    engine.update_model(engine.model, engine.context_length)
    assert engine.should_compress()


async def test_reset_forgets_cooldown_and_counters():
    engine, _ = make_engine([ProviderError("timeout", "t"), "ok"])
    await engine.compress(conversation(150, chars=1_500))
    assert engine.cooldown_remaining() > 0
    engine.on_session_reset()
    assert engine.cooldown_remaining() == 0
    assert engine.export_state()["timeout_failures"] == 0
    assert engine.compression_count == 0
