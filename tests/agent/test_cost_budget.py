"""The pre-flight estimate and the budget decision (agent/cost/budget.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from agent.cost.budget import (
    Budgets,
    Estimate,
    Spent,
    decide,
    estimate_call,
    estimate_message,
    format_limit,
    format_usd,
    next_daily_reset,
    next_monthly_reset,
)
from agent.cost.prices import FREE, cost_of, table_price
from agent.providers.base import Usage

NOW = datetime(2026, 12, 6, 20, 48, tzinfo=UTC)
MINI = table_price("gpt-4o-mini")
SONNET = table_price("claude-sonnet-4-5")


def usd(text: str) -> Decimal:
    return Decimal(text)


def test_the_estimate_is_prompt_at_input_cached_part_at_cached_and_a_full_answer() -> None:
    # 2,000 uncached at 0.15, 8,000 cached at 0.075, 1,000 out at 0.60: 1,500 per million
    assert estimate_call(10_000, 8_000, 1_000, MINI) == usd("0.0015")
    assert estimate_call(10_000, 0, 0, MINI) == usd("0.0015")  # all at input: 10,000 x 0.15
    assert estimate_call(10_000, 50_000, 0, MINI) == usd("0.00075")  # cache <= the prompt


def test_the_estimate_takes_anthropic_cache_writes_at_their_dearer_rate() -> None:
    assert estimate_call(1_000, 0, 0, SONNET) == usd("0.00375")  # 1,000 x 3.75
    assert estimate_call(1_000, 0, 0, SONNET, cache_ttl="1h") == usd("0.006")


def test_the_estimate_is_never_below_what_the_call_then_costs() -> None:
    assert SONNET is not None
    for reads, writes, out in [(0, 0, 500), (8_000, 0, 500), (0, 9_000, 500), (4_000, 5_000, 0)]:
        prompt = 10_000
        cost = cost_of(Usage(prompt, out, reads, writes), SONNET)
        most = estimate_call(prompt, reads, 500, SONNET)
        assert cost is not None and most is not None and cost <= most


def test_an_unknown_price_has_no_estimate() -> None:
    assert estimate_call(10_000, 0, 1_000, None) is None
    assert estimate_call(10_000, 0, 1_000, FREE) == 0


def test_within_every_budget_the_call_is_allowed() -> None:
    budgets = Budgets(usd("0.50"), usd("2"), usd("20"))
    verdict = decide(Spent(usd("0.10"), usd("1"), usd("5")), budgets, Estimate(usd("0.01")), NOW)
    assert verdict.allowed and verdict.message == ""
    assert decide(Spent(usd("99")), Budgets(), Estimate(usd("1")), NOW).allowed  # no budgets at all


def test_a_used_up_daily_budget_names_itself_and_midnight() -> None:
    verdict = decide(
        Spent(user_today=usd("0.50")), Budgets(usd("0.50")), Estimate(usd("0.001")), NOW
    )

    assert not verdict.allowed and verdict.budget == "user_daily"
    assert verdict.resets_at == datetime(2026, 12, 7, tzinfo=UTC)
    assert verdict.message == "You've used your daily $0.50 for this bot; it resets at 00:00 UTC."


def test_a_chat_s_budget_speaks_of_the_chat() -> None:
    verdict = decide(
        Spent(chat_today=usd("3")), Budgets(per_chat_daily=usd("2")), Estimate(None), NOW
    )
    assert verdict.budget == "chat_daily"
    assert verdict.message == "This chat has used its daily $2.00; it resets at 00:00 UTC."


def test_a_budget_of_nothing_says_it_allows_no_paid_call() -> None:
    verdict = decide(Spent(), Budgets(per_chat_daily=usd("0")), Estimate(usd("0.001")), NOW)
    assert not verdict.allowed and verdict.budget == "chat_daily"
    assert verdict.message == (
        "This bot makes no paid model calls in this chat (its daily budget is $0)."
    )


def test_the_monthly_budget_resets_on_the_first_and_wins_over_a_daily_one() -> None:
    budgets = Budgets(per_user_daily=usd("1"), monthly=usd("12"))
    verdict = decide(
        Spent(user_today=usd("1"), month=usd("12")), budgets, Estimate(usd("0.01")), NOW
    )

    assert verdict.budget == "monthly"  # after midnight it would still refuse
    assert verdict.resets_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert verdict.message == (
        "This bot has used its $12.00 for December; it resets on 1 January at 00:00 UTC."
    )


def test_a_call_that_could_pass_what_is_left_says_how_much_is_left() -> None:
    verdict = decide(
        Spent(user_today=usd("0.49")), Budgets(usd("0.50")), Estimate(usd("0.0420")), NOW
    )
    assert not verdict.allowed
    assert verdict.message == (
        "This message could cost up to $0.04, and $0.01 is left of your daily $0.50; "
        "it resets at 00:00 UTC. A shorter conversation (/new) costs less."
    )


def test_when_the_reply_s_room_is_most_of_the_estimate_it_is_named_not_new() -> None:
    # 1,000 prompt tokens ($0.00015) and 16,384 kept for the reply ($0.0098) at 4o-mini's
    # prices: /new would shorten only the prompt.
    estimate = estimate_message(1_000, 0, 16_384, MINI)
    verdict = decide(Spent(user_today=usd("0.495")), Budgets(usd("0.50")), estimate, NOW)
    assert verdict.message == (
        "This message could cost up to $0.01, and $0.0050 is left of your daily $0.50; "
        "it resets at 00:00 UTC. Up to $0.0098 of that is room kept for the reply, which "
        "the bot's operator can make smaller (model.max_output_tokens)."
    )


def test_a_reply_s_room_that_rounds_to_the_whole_estimate_is_not_called_a_part_of_it() -> None:
    """Not "could cost up to $0.03 ... Up to $0.03 of that is room kept for the reply"."""
    estimate = estimate_message(300, 0, 16_384, SONNET)  # $0.0009 prompt, $0.25 reply
    verdict = decide(Spent(user_today=usd("0.40")), Budgets(usd("0.50")), estimate, NOW)
    assert format_usd(estimate.reply) == format_usd(estimate.most or usd("0"))
    assert "Nearly all of that is room kept for the reply, which the bot's" in verdict.message


def test_money_of_any_size_reads() -> None:
    """Past Decimal's default 28 digits (a budget someone set "high enough")."""
    assert format_usd(usd("1e26")) == "$100,000,000,000,000,000,000,000,000.00"
    assert format_limit(usd("1e26")) == "$100,000,000,000,000,000,000,000,000.00"


def test_new_is_advised_only_where_the_reply_s_room_alone_fits_what_is_left() -> None:
    # 100,000 prompt tokens ($0.015) and a 4,096-token reply ($0.0025) at 4o-mini's prices.
    estimate = estimate_message(100_000, 0, 4_096, MINI)
    fits = decide(Spent(user_today=usd("0.49")), Budgets(usd("0.50")), estimate, NOW)
    assert fits.message.endswith("A shorter conversation (/new) costs less.")
    # $0.002 left: less than the reply's room, so no conversation would be short enough.
    tight = decide(Spent(user_today=usd("0.498")), Budgets(usd("0.50")), estimate, NOW)
    assert "(/new)" not in tight.message
    assert tight.message.endswith("can make smaller (model.max_output_tokens).")


def test_a_voice_note_is_told_its_own_cost_without_advice_about_the_conversation() -> None:
    estimate = Estimate(usd("4.20"), of="voice note")
    verdict = decide(Spent(), Budgets(usd("1")), estimate, NOW)
    assert verdict.message == (
        "This voice note could cost up to $4.20, and $1.00 is left of your daily $1.00; "
        "it resets at 00:00 UTC."
    )


def test_an_unknown_estimate_is_refused_only_by_a_used_up_budget() -> None:
    budgets = Budgets(usd("0.50"))
    assert decide(Spent(user_today=usd("0.49")), budgets, Estimate(None), NOW).allowed
    assert not decide(Spent(user_today=usd("0.50")), budgets, Estimate(None), NOW).allowed
    # A free call passes even a used-up budget: it spends nothing.
    assert decide(Spent(user_today=usd("0.50")), budgets, Estimate(usd("0")), NOW).allowed
    # ... and one spending already went past (a limit lowered, then /model to a free one).
    past = Spent(user_today=usd("0.72"), chat_today=usd("0.72"), month=usd("3"))
    every = Budgets(usd("0.50"), usd("0.50"), usd("1"))
    assert decide(past, every, Estimate(usd("0")), NOW).allowed
    assert not decide(past, every, Estimate(usd("0.000001")), NOW).allowed


def test_a_zero_budget_refuses_every_paid_call() -> None:
    verdict = decide(Spent(), Budgets(monthly=usd("0")), Estimate(usd("0.000001")), NOW)
    assert not verdict.allowed and verdict.budget == "monthly"


@pytest.mark.parametrize(
    ("now", "daily", "monthly"),
    [
        (datetime(2026, 12, 31, 23, 59), datetime(2027, 1, 1), datetime(2027, 1, 1)),
        (datetime(2026, 2, 28, 0, 0), datetime(2026, 3, 1), datetime(2026, 3, 1)),
        (datetime(2028, 2, 28, 12, 0), datetime(2028, 2, 29), datetime(2028, 3, 1)),
        (datetime(2026, 6, 1, 0, 0), datetime(2026, 6, 2), datetime(2026, 7, 1)),
    ],
)
def test_resets_are_the_next_utc_midnight_and_the_next_first(
    now: datetime, daily: datetime, monthly: datetime
) -> None:
    assert next_daily_reset(now) == daily.replace(tzinfo=UTC)
    assert next_monthly_reset(now) == monthly.replace(tzinfo=UTC)


def test_a_local_clock_is_read_in_utc() -> None:
    berlin_late = datetime(2026, 12, 7, 0, 30, tzinfo=timezone(timedelta(hours=1)))  # 23:30 UTC
    assert next_daily_reset(berlin_late) == datetime(2026, 12, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        ("0", "$0.00"),
        ("0.5", "$0.50"),
        ("12", "$12.00"),
        ("0.0042", "$0.0042"),
        ("0.004249", "$0.0042"),
        ("0.00013", "$0.00013"),
        ("0.00999", "$0.01"),
        ("0.015", "$0.02"),
        ("1250.5", "$1,250.50"),
    ],
)
def test_money_reads_sensibly(amount: str, text: str) -> None:
    assert format_usd(Decimal(amount)) == text


def test_a_budget_is_said_as_configured_when_cents_would_round_it() -> None:
    """$0.012 stays $0.012 beside "$0.0093 spent": the sums must add up."""
    assert [format_limit(usd(x)) for x in ("0.012", "0.5", "12", "1250.5")] == [
        "$0.012",
        "$0.50",
        "$12.00",
        "$1,250.50",
    ]
    verdict = decide(
        Spent(user_today=usd("0.012")), Budgets(usd("0.012")), Estimate(usd("0.001")), NOW
    )
    assert verdict.message.startswith("You've used your daily $0.012 for this bot")
