"""Token counting: the rough estimator (SPEC T1) and exact tiktoken counts offline (T2)."""

from __future__ import annotations

import importlib.util
import json
import logging

import pytest

from agent import tokens
from agent.tokens import (
    IMAGE_TOKENS,
    TokenCounter,
    encoding_name_for_model,
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
)


def test_rough_estimate_is_total_chars_plus_three_over_four():
    messages = [
        {"role": "user", "content": "x" * 10},  # 4 + 10
        {"role": "assistant", "content": "y" * 7},  # 9 + 7
    ]
    assert estimate_messages_tokens_rough(messages) == (4 + 10 + 9 + 7 + 3) // 4


def test_rough_estimate_counts_tool_calls_as_json():
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    message = {"role": "assistant", "content": "", "tool_calls": calls}
    expected = (len("assistant") + len(json.dumps(calls)) + 3) // 4
    assert estimate_message_tokens_rough(message) == expected


def test_image_part_counts_flat_not_its_base64_length():
    huge_image = "data:image/png;base64," + "A" * 2_000_000
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": huge_image}},
        ],
    }
    tokens = estimate_message_tokens_rough(message)
    assert tokens == (len("user") + len("what is this?") + 3) // 4 + IMAGE_TOKENS
    assert (
        estimate_messages_tokens_rough([message, message])
        == 2 * IMAGE_TOKENS + (2 * (4 + 13) + 3) // 4
    )


def test_none_content_is_zero_chars():
    assert estimate_message_tokens_rough({"role": "assistant", "content": None}) == (9 + 3) // 4


def test_a_remembered_size_follows_new_content_and_tool_calls():
    message = {"role": "user", "content": "x" * 40}
    assert estimate_message_tokens_rough(message) == (4 + 40 + 3) // 4
    message["content"] = "x" * 400  # a new object: measured again, not the memo's
    assert estimate_message_tokens_rough(message) == (4 + 400 + 3) // 4
    message["tool_calls"] = [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]
    assert estimate_message_tokens_rough(message) > (4 + 400 + 3) // 4


@pytest.fixture
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_sizes", {})
    monkeypatch.setattr(tokens, "_held_chars", 0)


def test_a_remembered_message_measured_anew_gives_its_characters_back(empty_memo: None):
    message = {"role": "user", "content": "x" * 1000}
    estimate_message_tokens_rough(message)
    assert tokens._held_chars == 1004
    message["content"] = "y" * (tokens.SIZE_MEMO_LARGEST + 1)  # now too long to keep
    estimate_message_tokens_rough(message)
    assert tokens._held_chars == 0
    assert id(message) not in tokens._sizes


def test_the_size_memo_holds_no_images_and_a_bounded_number_of_characters(empty_memo: None):
    photo = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x" * 10**6}}]}
    assert estimate_message_tokens_rough(photo) == (4 + 3) // 4 + IMAGE_TOKENS
    assert id(photo) not in tokens._sizes  # megabytes of base64 are not kept alive
    paste = {"role": "user", "content": "y" * (tokens.SIZE_MEMO_LARGEST + 1)}
    estimate_message_tokens_rough(paste)
    assert id(paste) not in tokens._sizes
    rows = [{"role": "user", "content": "z" * 10_000} for _ in range(200)]
    for row in rows:
        estimate_message_tokens_rough(row)
    assert 0 < tokens._held_chars <= tokens.SIZE_MEMO_CHARS
    assert len(tokens._sizes) < len(rows)  # 2,000,000 characters: it started again


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("openai/gpt-4.1-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-sonnet-4", None),
        ("llama3.1:8b", None),
    ],
)
def test_encoding_follows_the_openai_family(model, encoding):
    assert encoding_name_for_model(model) == encoding


def test_exact_counts_work_offline_for_openai_models():
    counter = TokenCounter.for_model("gpt-4o")
    assert counter.method == "tiktoken"
    # "hello world" is two o200k tokens; "user" one; three tokens of message framing.
    assert counter.count({"role": "user", "content": "hello world"}) == 2 + 1 + 3


def test_cl100k_models_count_exactly_too():
    counter = TokenCounter.for_model("gpt-3.5-turbo")
    assert counter.method == "tiktoken"
    assert counter.count({"role": "user", "content": "hello world"}) == 6


def test_special_token_text_in_a_message_does_not_raise():
    counter = TokenCounter.for_model("gpt-4o")
    assert counter.count({"role": "user", "content": "say <|endoftext|> now"}) > 3


def test_other_vendors_use_the_rough_estimate():
    counter = TokenCounter.for_model("claude-sonnet-4-5")
    message = {"role": "user", "content": "z" * 400}
    assert counter.method == "rough"
    assert counter.count(message) == estimate_message_tokens_rough(message)


def test_a_missing_tokenizer_falls_back_to_rough_and_never_raises(caplog):
    def broken_loader(name: str):
        raise OSError("no network and no bundled data")

    counter = TokenCounter.for_model("gpt-4o", loader=broken_loader)
    message = {"role": "user", "content": "hello " * 50}
    with caplog.at_level(logging.WARNING, logger="agent.tokens"):
        assert counter.count(message) == estimate_message_tokens_rough(message)
        assert counter.count(message) == estimate_message_tokens_rough(message)
    assert counter.method == "rough"
    assert len([r for r in caplog.records if "rough" in r.getMessage()]) == 1


def test_image_parts_count_flat_in_exact_mode_too():
    counter = TokenCounter.for_model("gpt-4o")
    message = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:," + "A" * 100_000}}],
    }
    assert counter.count(message) == 3 + 1 + IMAGE_TOKENS


def test_bundled_encoding_data_seeds_tiktokens_cache_with_the_verified_file(tmp_path, monkeypatch):
    # tiktoken keys its cache by the sha1 of the download URL and checks the sha256 the
    # constructor expects; the seeded file must be exactly OpenAI's, with no download.
    import hashlib

    from agent.tokens import seed_tiktoken_cache

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert seed_tiktoken_cache("cl100k_base")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = tmp_path / hashlib.sha1(url.encode()).hexdigest()
    assert (
        hashlib.sha256(cached.read_bytes()).hexdigest()
        == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    )
    assert list(tmp_path.iterdir()) == [cached]  # no temp file left behind


def test_a_tokenizer_that_cannot_load_says_how_to_install_its_files_offline(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """tiktoken refuses an encoding it does not know with no network involved; with
    bpe-openai absent, the warning names the offline extra."""
    real_find_spec = importlib.util.find_spec

    def without_bpe_openai(name: str, *args: object) -> object:
        return None if name == "bpe_openai" else real_find_spec(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_bpe_openai)
    with caplog.at_level(logging.WARNING, logger="agent.tokens"):
        assert tokens.load_encoding("no_such_encoding") is None
    [record] = caplog.records
    assert "rough estimate" in record.getMessage()
    assert "pip install 'nightowl[offline]'" in record.getMessage()
    tokens._failed.discard("no_such_encoding")
