"""The summary call's failure table, cooldown ladders and their bypasses (SPEC C8, C9)."""

from __future__ import annotations

import json

import pytest

from agent.compression.fallback import MAX_CHARS
from agent.providers.base import Completion, ProviderError
from tests.agent.scripted_summarizer import (
    HANG,
    Clock,
    ScriptedSummarizer,
    conversation,
    make_engine,
)


def big_chat() -> list[dict]:
    """Over the threshold, under the safety line (85%) where a cooldown stops pacing."""
    messages = conversation(120, chars=1_500)
    messages[3]["content"] = "FIRST-DROPPED: please migrate the billing service to Postgres"
    messages[-4]["content"] = "LATEST-ASK: and keep the old API working"
    return messages


def timeout() -> ProviderError:
    return ProviderError("timeout", "request timed out")


def overloaded() -> ProviderError:
    return ProviderError("overloaded", "Overloaded", status=529)


async def test_success_commits_the_llm_summary_and_clears_everything():
    clock = Clock()
    engine, _ = make_engine([timeout(), "fine summary"], clock=clock, context_timeout_seconds=30)
    await engine.compress(big_chat())
    clock.now += 60
    result = await engine.compress(big_chat())
    assert (result.commit_status, result.method) == ("committed", "llm_summary")
    assert result.summary == "fine summary"
    state = engine.export_state()
    assert state["cooldown_until"] == 0 and state["timeout_failures"] == 0


async def test_first_timeout_aborts_and_sets_a_60_second_cooldown():
    clock = Clock()
    engine, main = make_engine([timeout()], clock=clock, context_timeout_seconds=20)
    messages = big_chat()
    result = await engine.compress(messages)
    assert (result.commit_status, result.failure_class) == ("aborted", "summary_timeout")
    assert result.messages is messages and not result.committed
    assert engine.cooldown_remaining() == 60
    blocked = await engine.compress(messages)
    assert (blocked.commit_status, blocked.failure_class) == ("blocked", "blocked:cooldown")
    assert len(main.calls) == 1  # the broken backend is not hit again


async def test_cooldown_is_never_shorter_than_the_summary_timeout():
    engine, _ = make_engine([timeout()], context_timeout_seconds=120)
    await engine.compress(big_chat())
    assert engine.cooldown_remaining() == 120


async def test_a_hang_counts_as_a_timeout():
    engine, main = make_engine([HANG], context_timeout_seconds=0.05)
    result = await engine.compress(big_chat())
    assert result.failure_class == "summary_timeout"
    assert main.calls[0].timeout == 0.05
    assert engine.cooldown_remaining() == 60


async def test_second_hang_while_the_ladder_holds_one_commits_the_fallback():
    clock = Clock()
    engine, _ = make_engine([HANG, HANG, HANG], clock=clock, context_timeout_seconds=0.05)
    await engine.compress(big_chat())
    clock.now += 60
    result = await engine.compress(big_chat())
    assert (result.commit_status, result.method) == ("committed", "deterministic_fallback")
    assert result.failure_class == "summary_timeout_fallback"
    assert "FIRST-DROPPED" in result.summary
    assert engine.export_state()["timeout_failures"] == 0  # the commit reset the ladder
    assert engine.cooldown_remaining() == 0
    clock.now += 1
    again = await engine.compress(result.messages + conversation(150, chars=1_500)[1:])
    assert again.commit_status == "aborted"  # a fresh cycle gets one hang before degrading


async def test_timeout_ladder_climbs_60_300_900_when_every_failure_aborts():
    clock = Clock()
    engine, _ = make_engine(
        [timeout()] * 4, clock=clock, abort_on_summary_failure=True, context_timeout_seconds=30
    )
    seen = []
    for _ in range(4):
        result = await engine.compress(big_chat())
        assert result.commit_status == "aborted"
        seen.append(engine.cooldown_remaining())
        clock.now += seen[-1]
    assert seen == [60, 300, 900, 900]


async def test_length_finish_aborts_on_its_own_ladder():
    clock = Clock()
    length = Completion(text="## Goal\npartial", finish_reason="length")
    # Each attempt retries a length cut once with more room before it counts.
    script = [length] * 4 + [timeout()] + [length] * 4
    engine, _ = make_engine(script, clock=clock, context_timeout_seconds=30)
    seen = []
    for _ in range(5):
        result = await engine.compress(big_chat())
        assert result.commit_status == "aborted"
        seen.append((result.failure_class, engine.cooldown_remaining()))
        clock.now += seen[-1][1]
    assert seen == [
        ("summary_length", 60),
        ("summary_length", 300),
        ("summary_timeout", 60),  # the timeout ladder is separate
        ("summary_length", 900),
        ("summary_length", 900),  # length never degrades to the fallback
    ]


@pytest.mark.parametrize(
    ("step", "failure_class"),
    [
        (ProviderError("other", "bad json", detail="json_decode"), "summary_malformed"),
        (ProviderError("other", "stream closed", detail="stream_closed"), "summary_malformed"),
        (ProviderError("other", "nothing", detail="empty_response"), "summary_empty"),
        (Completion(text="   "), "summary_empty"),
    ],
)
async def test_malformed_or_empty_replies_abort_with_a_flat_30_seconds(step, failure_class):
    clock = Clock()
    engine, _ = make_engine([step, step], clock=clock)
    for _ in range(2):
        result = await engine.compress(big_chat())
        assert (result.commit_status, result.failure_class) == ("aborted", failure_class)
        assert engine.cooldown_remaining() == 30
        clock.now += 30


async def test_overload_retries_once_on_the_main_model_then_aborts():
    engine, main = make_engine([overloaded(), overloaded()])
    messages = big_chat()
    result = await engine.compress(messages)
    assert (result.commit_status, result.failure_class) == ("aborted", "summary_overload_failure")
    assert result.messages is messages
    assert len(main.calls) == 2


async def test_overload_that_clears_on_the_retry_commits():
    engine, _main = make_engine([overloaded(), "recovered"])
    result = await engine.compress(big_chat())
    assert (result.commit_status, result.summary) == ("committed", "recovered")


async def test_third_overload_in_a_row_degrades_to_the_fallback_across_restarts():
    engine, _ = make_engine([overloaded()] * 4)
    assert (await engine.compress(big_chat(), force=True)).commit_status == "aborted"
    assert (await engine.compress(big_chat(), force=True)).commit_status == "aborted"
    state = json.loads(json.dumps(engine.export_state()))
    fresh, _ = make_engine([overloaded()] * 2)
    fresh.restore_state(state)
    result = await fresh.compress(big_chat(), force=True)
    assert (result.commit_status, result.method) == ("committed", "deterministic_fallback")
    assert result.failure_class == "summary_overload_degraded"


async def test_a_healthy_summary_resets_the_overload_streak():
    engine, _ = make_engine([*[overloaded()] * 4, "ok", overloaded(), overloaded()])
    await engine.compress(big_chat(), force=True)
    await engine.compress(big_chat(), force=True)
    assert engine.export_state()["overload_failures"] == 2
    await engine.compress(big_chat(), force=True)
    assert engine.export_state()["overload_failures"] == 0
    result = await engine.compress(big_chat(), force=True)
    assert result.failure_class == "summary_overload_failure"


@pytest.mark.parametrize(
    ("error", "failure_class"),
    [
        (ProviderError("auth", "invalid key", status=401), "summary_auth"),
        (ProviderError("auth", "insufficient_quota", status=429, detail="quota"), "summary_quota"),
        (ProviderError("rate_limit", "slow down", status=429), "summary_quota"),
        (ProviderError("network", "connection refused"), "summary_network"),
    ],
)
async def test_auth_quota_and_network_failures_abort(error, failure_class):
    engine, _ = make_engine([error])
    messages = big_chat()
    result = await engine.compress(messages)
    assert (result.commit_status, result.failure_class) == ("aborted", failure_class)
    assert result.messages is messages
    assert result.notice and "nothing was removed" in result.notice


async def test_any_other_failure_commits_the_deterministic_fallback():
    too_small = ProviderError("overflow", "maximum context length is 8192", context_limit=8192)
    engine, _ = make_engine([too_small])
    result = await engine.compress(big_chat())
    assert (result.commit_status, result.method) == ("committed", "deterministic_fallback")
    assert result.failure_class == "summary_failed_fallback"
    summary = result.summary
    assert len(summary) <= MAX_CHARS
    assert "FIRST-DROPPED: please migrate the billing service to Postgres" in summary
    assert "LATEST-ASK" not in summary  # it is still in the tail, verbatim
    assert "## Goal" in summary and "## Next Steps" in summary
    assert result.notice and "without the summary model" in result.notice


async def test_fallback_summary_is_bounded_even_for_huge_transcripts():
    engine, _ = make_engine([ProviderError("other", "boom")], context_length=1_000_000)
    messages = conversation(800, chars=3_000)
    result = await engine.compress(messages, force=True)
    assert result.method == "deterministic_fallback"
    assert len(result.summary) <= MAX_CHARS


async def test_fallback_becomes_the_previous_summary_of_the_next_update():
    engine, main = make_engine([ProviderError("other", "boom"), "updated"])
    first = await engine.compress(big_chat())
    await engine.compress(first.messages + conversation(150, chars=1_500)[1:])
    request = main.calls[1].request_text
    assert "<previous-summary>" in request
    assert "FIRST-DROPPED" in request


async def test_abort_on_summary_failure_turns_every_failure_into_an_abort():
    clock = Clock()
    script = [ProviderError("other", "boom"), *[overloaded()] * 8, timeout(), timeout()]
    engine, _ = make_engine(script, clock=clock, abort_on_summary_failure=True)
    for _ in range(7):
        messages = big_chat()
        result = await engine.compress(messages, force=True)
        assert result.commit_status == "aborted"
        assert result.messages is messages


async def test_manual_compress_bypasses_and_clears_the_cooldown():
    engine, _main = make_engine([timeout(), "manual summary"])
    await engine.compress(big_chat())
    assert engine.cooldown_remaining() > 0
    result = await engine.compress(big_chat(), force=True, trigger_source="manual")
    assert result.committed and result.summary == "manual summary"
    assert engine.cooldown_remaining() == 0


async def test_manual_retry_after_a_hang_uses_the_fallback_if_it_hangs_again():
    engine, _ = make_engine([timeout(), timeout()])
    await engine.compress(big_chat())
    result = await engine.compress(big_chat(), force=True, trigger_source="manual")
    assert result.method == "deterministic_fallback"


async def test_overflow_bypasses_the_cooldown_without_clearing_it():
    clock = Clock()
    engine, main = make_engine([timeout(), ProviderError("network", "down")], clock=clock)
    await engine.compress(big_chat())
    remaining = engine.cooldown_remaining()
    result = await engine.compress(big_chat(), trigger_source="overflow")
    assert len(main.calls) == 2  # the overflow attempt really ran
    assert result.commit_status == "aborted"
    assert engine.cooldown_remaining() == remaining
    blocked = await engine.compress(big_chat(), trigger_source="pre_api")
    assert blocked.failure_class == "blocked:cooldown"


async def test_cooldown_survives_a_restart():
    clock = Clock()
    engine, _ = make_engine([timeout()], clock=clock, context_timeout_seconds=30)
    await engine.compress(big_chat())
    persisted = json.loads(json.dumps(engine.export_state()))
    clock.now += 30
    restarted, main = make_engine(["after restart"], clock=clock, context_timeout_seconds=30)
    restarted.restore_state(persisted)
    assert restarted.cooldown_remaining() == 30
    blocked = await restarted.compress(big_chat(), trigger_source="turn_start_threshold")
    assert blocked.failure_class == "blocked:cooldown"
    assert main.calls == []
    clock.now += 30
    result = await restarted.compress(big_chat())
    assert result.committed


def test_restore_tolerates_missing_and_malformed_state():
    engine, _ = make_engine()
    engine.restore_state({})
    engine.restore_state({"cooldown_until": "soon", "compression_count": None})
    assert engine.cooldown_remaining() == 0 and engine.compression_count == 0


async def test_auxiliary_failure_falls_back_to_the_main_model_with_a_one_time_notice():
    aux = ScriptedSummarizer(
        script=[ProviderError("auth", "bad key", status=401)] * 3, model="aux-model"
    )
    engine, _main = make_engine(
        ["main summary 1", "main summary 2", "main summary 3"], auxiliary=aux
    )
    first = await engine.compress(big_chat())
    assert (first.method, first.summary) == ("aux_fallback_main", "main summary 1")
    assert first.notice and "auxiliary.compression" in first.notice
    second = await engine.compress(big_chat())
    assert second.method == "aux_fallback_main" and second.notice is None
    restarted, _ = make_engine(["x"], auxiliary=aux)
    restarted.restore_state(engine.export_state())
    third = await restarted.compress(big_chat())
    assert third.notice is None


async def test_a_working_auxiliary_model_writes_the_summary():
    aux = ScriptedSummarizer(script=["aux summary"], model="aux-model")
    engine, main = make_engine(auxiliary=aux)
    result = await engine.compress(big_chat())
    assert (result.method, result.summary) == ("llm_summary", "aux summary")
    assert main.calls == []


async def test_abort_notice_is_given_once_per_failure_streak():
    clock = Clock()
    engine, _ = make_engine([ProviderError("network", "down")] * 3, clock=clock)
    first = await engine.compress(big_chat())
    second = await engine.compress(big_chat())
    manual = await engine.compress(big_chat(), force=True, trigger_source="manual")
    assert first.notice and second.notice is None and manual.notice


async def test_notices_carry_no_secrets_or_error_text():
    leak = ProviderError("auth", "invalid api key sk-live-SECRET123", status=401)
    engine, _ = make_engine([leak])
    result = await engine.compress(big_chat())
    assert "SECRET123" not in (result.notice or "")


def test_fallback_keeps_decisions_errors_files_and_the_earlier_goal():
    from agent.compression.fallback import build_fallback_summary
    from tests.agent.scripted_summarizer import tool_round

    turns = [
        {"role": "user", "content": "Please always answer in French. Fix the importer."},
        *tool_round("t1", "Traceback: ImportError in src/importer/csv_reader.py line 4"),
        {
            "role": "assistant",
            "content": "I see it. We decided to switch to the stdlib csv module.",
        },
        {"role": "user", "content": "and add a test"},
    ]
    summary = build_fallback_summary(turns, "## Goal\nMigrate the shop to Postgres\n\n## Done\n- x")
    assert "Migrate the shop to Postgres" in summary.split("## Constraints")[0]
    assert "Fix the importer" in summary
    assert "Please always answer in French." in summary
    assert "ImportError in src/importer/csv_reader.py" in summary
    assert "We decided to switch to the stdlib csv module." in summary
    assert "- src/importer/csv_reader.py" in summary
    assert "Latest user request: and add a test" in summary
    assert "- x" in summary  # the earlier summary's items are carried...
    assert "Earlier summary" not in summary and "- - " not in summary  # ...never nested


def budget() -> ProviderError:
    """What a budget's refusal is to the agent: refused before the call was made."""
    return ProviderError("other", "This chat has used its daily $1.00.", detail="budget")


async def test_a_budget_refusal_aborts_without_a_fallback_a_cooldown_or_a_notice():
    aux = ScriptedSummarizer(script=[budget(), budget()])
    engine, main = make_engine(["fine summary"], auxiliary=aux)
    messages = big_chat()
    refused = await engine.compress(messages, trigger_source="gateway_hygiene")
    assert (refused.commit_status, refused.failure_class) == ("aborted", "summary_budget")
    assert refused.messages is messages and refused.notice is None
    assert engine.cooldown_remaining() == 0 and len(aux.calls) == 1
    assert main.calls == []  # the main model counts to the same budgets: not asked
    manual = await engine.compress(messages, trigger_source="manual")
    assert manual.notice is not None and "a spending budget is used up" in manual.notice
    after = await engine.compress(messages)  # no cooldown holds the next one back
    assert (after.commit_status, after.method) == ("committed", "llm_summary")
