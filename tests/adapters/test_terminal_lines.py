"""The line editor of a terminal chat (adapters/terminal_lines.py): a bracketed paste is
one line, however its markers fall across reads (docs/operations.md#console)."""

from __future__ import annotations

from adapters.terminal_lines import PASTE_END, PASTE_START, LineEditor


def test_a_paste_split_anywhere_across_reads_is_one_line_sent_by_enter() -> None:
    text = f"see:{PASTE_START}one\rtwo\r{PASTE_END} ok\r"
    for cut in range(1, len(text)):
        editor = LineEditor()
        lines = editor.feed(text[:cut]).lines + editor.feed(text[cut:]).lines
        assert lines == ["see:one\ntwo\n ok"], cut


def test_keys_inside_a_paste_are_text_not_editing() -> None:
    """Ctrl-D, Ctrl-U, Backspace and a key's escape sequence pasted: none ends or edits."""
    editor = LineEditor()
    fed = editor.feed(f"{PASTE_START}a\x04b\x15c\x7fd\x1b[Ae{PASTE_END}\r")
    assert fed.lines == ["abcde"] and not fed.end


def test_a_paste_whose_end_never_came_lets_typing_edit_again() -> None:
    editor = LineEditor()
    editor.feed(f"{PASTE_START}lost")
    assert editor.pasting
    editor.end_paste()  # what the reader does after a quiet half second
    fed = editor.feed("!\x7f\r")
    assert fed.lines == ["lost"] and not editor.pasting


def test_joiners_stay_typed_or_pasted() -> None:
    """A family emoji is three people joined by U+200D; Persian needs U+200C."""
    family, word = "👩\u200d👩\u200d👧", "می\u200cخواهم"
    editor = LineEditor()
    assert editor.feed(f"{family}\r").lines == [family]
    assert editor.feed(f"{PASTE_START}{word}{PASTE_END}\r").lines == [word]
