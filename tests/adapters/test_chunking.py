"""split_message: boundaries, fences, UTF-16 lengths and the invariants every chunk keeps."""

from __future__ import annotations

import random
import re

import pytest

from adapters.chunking import find_code_fences, split_message, utf16_length

_FENCE_LINE = re.compile(r"^[ \t]*(```|~~~).*$", re.MULTILINE)


def _without_fence_lines_and_space(text: str) -> str:
    return re.sub(r"\s+", "", _FENCE_LINE.sub("", text))


def _assert_invariants(text: str, chunks: list[str], limit: int, length=len) -> None:
    assert chunks, "non-blank text must produce at least one chunk"
    for chunk in chunks:
        assert chunk.strip(), f"empty chunk in {chunks!r}"
        assert length(chunk) <= limit, f"chunk of {length(chunk)} > {limit}: {chunk!r}"
    if all(f.close_start < len(text) for f in find_code_fences(text)):
        for chunk in chunks:
            fences = find_code_fences(chunk)
            assert all(f.close_end <= len(chunk) and f.close_start < len(chunk) for f in fences)
    assert _without_fence_lines_and_space("\n".join(chunks)) == _without_fence_lines_and_space(text)


def test_short_text_is_one_chunk_unchanged():
    assert split_message("hello *world*", 4096) == ["hello *world*"]


def test_blank_text_gives_no_chunks():
    assert split_message("", 10) == []
    assert split_message(" \n\n \t", 10) == []


def test_prefers_paragraph_boundary():
    text = "first paragraph line one\nline two\n\nsecond paragraph goes here"
    chunks = split_message(text, 40)
    assert chunks == ["first paragraph line one\nline two", "second paragraph goes here"]


def test_falls_back_to_line_then_word_boundaries():
    assert split_message("alpha beta\ngamma delta", 15) == ["alpha beta", "gamma delta"]
    assert split_message("alpha beta gamma delta", 12) == ["alpha beta", "gamma delta"]


def test_does_not_leave_a_tiny_chunk_for_an_early_paragraph_break():
    text = "Hi.\n\n" + " ".join(["word"] * 30)
    chunks = split_message(text, 60)
    assert len(chunks[0]) > 30
    _assert_invariants(text, chunks, 60)


def test_text_without_spaces_is_hard_cut_exactly():
    text = "x" * 10_000
    chunks = split_message(text, 4096)
    assert [len(c) for c in chunks] == [4096, 4096, 1808]
    assert "".join(chunks) == text


def test_keeps_indentation_of_the_line_after_a_cut():
    text = "def f():\n    return 1\n    # end"
    chunks = split_message(text, 22)
    assert chunks[1].startswith("    ")


def test_emoji_counted_in_utf16_and_never_split():
    text = "😀" * 3000  # 6000 UTF-16 code units, no spaces
    chunks = split_message(text, 4096, length=utf16_length)
    assert [utf16_length(c) for c in chunks] == [4096, 1904]
    assert "".join(chunks) == text


def test_does_not_split_zwj_sequences_or_skin_tones():
    family = "👨\u200d👩\u200d👧"
    thumbs = "👍🏽"
    text = (family + thumbs) * 50
    for limit in (9, 13, 20):
        chunks = split_message(text, limit, length=utf16_length)
        assert "".join(chunks) == text
        for chunk in chunks:
            assert not chunk.startswith(("\u200d", "🏽"))
            assert not chunk.endswith("\u200d")


def test_does_not_split_flags():
    text = "🇩🇪🇫🇷🇯🇵" * 20
    chunks = split_message(text, 10, length=utf16_length)
    assert "".join(chunks) == text
    assert all(len(c) % 2 == 0 for c in chunks)


def test_limit_below_one_character_raises():
    with pytest.raises(ValueError):
        split_message("😀😀", 1, length=utf16_length)
    with pytest.raises(ValueError):
        split_message("abc", 0)


def test_ten_thousand_char_reply_with_fence_across_the_cut():
    prose = "Here is the explanation of the change. " * 60  # ~2400 chars
    code = "\n".join(f"    result_{i} = compute(value_{i}) + 1" for i in range(200))
    text = f"{prose}\n\n```python\n{code}\n```\n\n{prose}\n\nDone."
    assert len(text) > 10_000
    chunks = split_message(text, 4096, length=utf16_length)
    assert len(chunks) >= 3
    _assert_invariants(text, chunks, 4096, utf16_length)
    cut_inside_code = [c for c in chunks[1:] if c.startswith("```python\n")]
    assert cut_inside_code, "the fence crossed a cut and must be reopened with its language"
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0
    code_lines = [line for c in chunks for line in c.splitlines() if "compute(" in line]
    assert code_lines == code.splitlines(), "code lines kept whole, in order, with indentation"


def test_fence_reopened_with_same_marker_and_language():
    body = "\n".join(f"line {i}" for i in range(40))
    text = f"~~~~js\n{body}\n~~~~"
    chunks = split_message(text, 100)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.startswith("~~~~js\n") and chunk.endswith("\n~~~~")
    _assert_invariants(text, chunks, 100)


def test_never_ends_a_chunk_on_an_empty_code_block():
    text = "a" * 50 + "\n```\n" + "\n".join(["code line"] * 20) + "\n```"
    chunks = split_message(text, 60)
    assert not any(c.rstrip().endswith("```\n```") for c in chunks)
    assert not any(re.search(r"```\w*\n```", c) for c in chunks)
    _assert_invariants(text, chunks, 60)


def test_cut_right_before_closing_line_does_not_leave_an_orphan_fence():
    body = "\n".join(["x" * 20] * 4)
    text = f"```\n{body}\n```\nafter"
    chunks = split_message(text, len(f"```\n{body}\n```"))
    assert chunks[-1] == "after"
    _assert_invariants(text, chunks, len(f"```\n{body}\n```"))


def test_inline_triple_backticks_are_not_a_fence():
    assert find_code_fences("use ```x``` inline") == []


def test_unclosed_fence_is_reopened_but_not_invented_closed_at_the_end():
    text = "```sh\n" + "\n".join(["echo hi"] * 30)
    chunks = split_message(text, 60)
    assert all(c.startswith("```sh\n") for c in chunks)
    assert not chunks[-1].endswith("```")


def _random_markdown(rng: random.Random) -> str:
    words = ["alpha", "beta", "γάμμα", "😀", "👍🏽", "x" * 70, "naïve", "<b>", "&amp;", "*bold*"]
    blocks = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.3:
            lang = rng.choice(["", "python", "js"])
            lines = [
                " " * rng.randint(0, 4) + " ".join(rng.choices(words, k=rng.randint(1, 8)))
                for _ in range(rng.randint(1, 15))
            ]
            blocks.append(f"```{lang}\n" + "\n".join(lines) + "\n```")
        else:
            lines = [
                " ".join(rng.choices(words, k=rng.randint(1, 20))) for _ in range(rng.randint(1, 5))
            ]
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@pytest.mark.parametrize("length", [len, utf16_length], ids=["chars", "utf16"])
def test_invariants_hold_on_random_markdown(length):
    rng = random.Random(20240607)
    for _ in range(300):
        text = _random_markdown(rng)
        limit = rng.randint(30, 400)
        _assert_invariants(text, split_message(text, limit, length=length), limit, length)
