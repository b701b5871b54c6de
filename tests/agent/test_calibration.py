"""How the server counts against the estimate (docs/design.md#calibration), and the request
arithmetic it feeds: prompt + max_tokens + margin never passes the window
(docs/design.md#output-reserve)."""

from __future__ import annotations

import pytest

from agent.calibration import (
    FIXED_TOKENS,
    MAX_ERROR_SHARE,
    MIN_ERROR_SHARE,
    TEMPLATE_TOKENS,
    Calibration,
    Calibrations,
)
from agent.window import Window, fit_request


def test_a_heavier_count_is_believed_at_once_and_a_lighter_one_slowly() -> None:
    # The flat template allowance is the margin's: the ratio is of the rest.
    russian = Calibration().observed(1_000, 1_600 + FIXED_TOKENS)
    assert russian.ratio == pytest.approx(1.6)
    english = russian.observed(1_000, 1_000 + FIXED_TOKENS)
    assert english.ratio == pytest.approx(1.45)  # a quarter of the way down, not all of it
    assert english.error > MIN_ERROR_SHARE  # and the miss widens the margin


def test_the_ratio_never_goes_below_one_or_believes_a_wild_count() -> None:
    assert Calibration().observed(1_000, 400).ratio == 1.0
    assert Calibration().observed(1_000, 90_000).ratio == 4.0
    assert Calibration().observed(200, 2_000) == Calibration()  # too small to say anything


def test_the_margin_is_the_template_plus_the_recent_miss_share_of_the_budget() -> None:
    assert Calibration().margin(2_000) == TEMPLATE_TOKENS + 60
    wild = Calibration().observed(1_000, 1_000).observed(1_000, 3_000 + FIXED_TOKENS)
    assert wild.error == MAX_ERROR_SHARE
    assert wild.margin(2_000) == TEMPLATE_TOKENS + 500


def test_a_new_session_starts_from_the_routes_latest_ratio_with_a_fresh_margin() -> None:
    calibrations = Calibrations()
    assert calibrations.prior("openai:http://box/v1:qwen3") == Calibration()
    seen = Calibration().observed(1_000, 1_000).observed(1_000, 1_700 + FIXED_TOKENS)
    calibrations.remember("openai:http://box/v1:qwen3", seen)
    prior = calibrations.prior("openai:http://box/v1:qwen3")
    assert prior.ratio == seen.ratio and prior.error == MIN_ERROR_SHARE


def test_a_persisted_ratio_comes_back_bounded() -> None:
    assert Calibration.from_ratio(1.6).ratio == 1.6
    assert Calibration.from_ratio(None) == Calibration()
    assert Calibration.from_ratio(float("nan")) == Calibration()
    assert Calibration.from_ratio(0.2).ratio == 1.0


@pytest.mark.parametrize("context_length", [2_048, 4_096, 8_192, 131_072])
@pytest.mark.parametrize("max_output", [256, 4_096, 32_000])
def test_max_tokens_never_passes_the_setting_nor_the_room_left(
    context_length: int, max_output: int
) -> None:
    window = Window(context_length, max_output, scale=1.6, margin=150)
    for prompt in (0, 100, context_length // 3, context_length - 200, context_length):
        asked = window.max_tokens_for(prompt)
        assert asked <= max_output
        assert prompt + asked + window.margin <= context_length or asked == 1
        if prompt <= window.input_budget:  # a prompt within its budget leaves the reserve
            assert asked >= window.output_reserve


def test_a_fitted_request_leaves_the_margin_free_in_the_servers_tokens() -> None:
    window = Window(4_096, 4_096, scale=1.6, margin=150)
    rows = [{"role": "system", "content": "be brief"}]
    rows += [{"role": "user", "content": "слово " * 400} for _ in range(12)]
    request = fit_request(rows, window, overhead_tokens=300)
    assert request.prompt_tokens == window.real(request.estimate)
    assert request.prompt_tokens + request.max_tokens + window.margin <= 4_096
    assert request.max_tokens >= window.output_reserve == 1_024  # a quarter of the window
