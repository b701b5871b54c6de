"""The memory block and the flush's span, as the agent builds them (docs/design.md#memory-block,
#memory-flush): bounded, byte-stable, and placed after the system prompt."""

from __future__ import annotations

from agent.memory import (
    BLOCK_HEADER,
    MIN_BLOCK_TOKENS,
    Note,
    block_budget,
    render_block,
    with_block,
)
from agent.memory_flush import LINE_CHARS, render_span
from agent.window import Window


def notes(count: int) -> list[Note]:
    return [
        Note(i, f"note {i}: " + "x" * 40, personal=i % 3 == 0, last_used=i) for i in range(count)
    ]


def test_the_same_notes_give_the_same_bytes_whatever_their_order() -> None:
    some = notes(12)
    assert (
        render_block(some, max_tokens=1500).text == render_block(some[::-1], max_tokens=1500).text
    )


def test_the_block_keeps_the_most_recently_used_within_its_budget() -> None:
    block = render_block(notes(200), max_tokens=400)
    assert block.tokens <= 400 and block.shown + block.left_out == 200
    assert block.text.startswith(BLOCK_HEADER)
    assert "- [#199] note 199" in block.text and "- [#0] " not in block.text
    assert f"({block.left_out} older note(s) not shown" in block.text


def test_a_small_window_gets_a_smaller_block_down_to_2k() -> None:
    assert block_budget(1500, Window(200_000, 4096)) == 1500
    assert block_budget(1500, Window(8192, 512)) == 960
    assert block_budget(1500, Window(8192, 4096)) == 768  # the defaults on 8K
    assert block_budget(300, Window(8192, 4096)) == 300  # a small max_tokens is no window's
    assert block_budget(1500, Window(4096, 4096)) == 384  # a 4K model
    assert block_budget(1500, Window(2048, 4096)) == 192  # a 2K model: the header, a few notes
    assert block_budget(1500, Window(512, 4096)) == 0  # no room for even the header
    assert MIN_BLOCK_TOKENS > render_block([], max_tokens=10**6).tokens


def test_the_block_goes_after_the_system_prompt() -> None:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    block = render_block([], max_tokens=300).message
    assert [m["content"] for m in with_block(messages, block)] == ["sys", block["content"], "hi"]
    assert with_block(messages, None) == messages


def test_the_span_shows_peoples_lines_first_and_the_end_of_long_ones() -> None:
    span = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "a" * 5_000 + " fact: the end matters"},
        {"role": "assistant", "content": "b" * 900},
        {"role": "user", "content": "short"},
    ]
    text, rows = render_span(span, budget_tokens=(LINE_CHARS + 40) // 4)
    assert rows == 2 and "fact: the end matters" in text and "short" in text
    assert "assistant" not in text  # no room left for it: people's lines came first


def test_a_night_too_long_to_show_every_line_shows_the_shortest_people_lines() -> None:
    """470 people's lines in the room of a 4K window's flush: cut to a common length they
    would each get a few characters and all be left out (the model's two lines shown
    alone); the shortest whole ones are shown instead, a one-line fact among them."""
    span: list[dict[str, str]] = [{"role": "system", "content": "sys"}]
    for i in range(470):
        span.append({"role": "user", "content": f"Ann: line {i} " + "we move the meeting " * 4})
        if i % 200 == 7:
            span.append({"role": "assistant", "content": "Here is my answer."})
    span[300] = {"role": "user", "content": "Bob: fact: the boat is Marlin"}
    text, rows = render_span(span, budget_tokens=750)
    assert "fact: the boat is Marlin" in text
    people = [line for line in text.splitlines() if "] user: " in line]
    assert rows == len(people) > 20 and len(text) <= 750 * 4
