"""Split a long reply into platform-sized messages without breaking code fences.

Platforms cap a message's length (Telegram 4096 UTF-16 code units, Discord 2000
characters). :func:`split_message` cuts on the most readable boundary that fits —
paragraph, then line, then word — and only hard-cuts a single word longer than the
limit. A code fence cut by a split is closed at the end of the chunk and reopened with
the same language tag at the start of the next one, so every message renders on its own.

:func:`find_code_fences` is the one fence parser; formatters import it so the chunker and
the formatter always agree on what is code.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["CodeFence", "find_code_fences", "split_message", "utf16_length"]

# Any indentation is accepted: models nest fences inside list items.
_OPENER = re.compile(r"^[ \t]*(?P<marker>`{3,}|~{3,})(?P<info>[^\n]*)$", re.MULTILINE)
_CLOSER = re.compile(r"[ \t]*(?P<marker>`{3,}|~{3,})[ \t\r]*")
_BLANK_LINE = re.compile(r"[ \t\r]*\n")
_ZERO_WIDTH_JOINER = "\u200d"
# Cutting before these would orphan them from the character they modify.
_EXTENDERS = {_ZERO_WIDTH_JOINER, "\ufe0e", "\ufe0f", *map(chr, range(0x1F3FB, 0x1F400))}
# Prefer a boundary this far into the window over a "better" one close to its start.
_MIN_FILL = 0.3


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts (an emoji is usually 2)."""
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True)
class CodeFence:
    """One fenced code block; offsets index the text it was found in.

    ``open_start``/``open_end`` delimit the opening line without its newline, likewise
    ``close_start``/``close_end`` for the closing line. An unclosed fence runs to the end
    of the text and has ``close_start == close_end == len(text)``.
    """

    marker: str
    language: str
    open_start: int
    open_end: int
    close_start: int
    close_end: int

    @property
    def reopen_line(self) -> str:
        return f"{self.marker}{self.language}\n"

    @property
    def close_line(self) -> str:
        return f"\n{self.marker}"

    def body_contains(self, pos: int) -> bool:
        """True when a cut at ``pos`` leaves this fence open in the chunk before it."""
        return self.open_end < pos <= self.close_start

    def in_marker_line(self, pos: int) -> bool:
        return self.open_start < pos <= self.open_end or self.close_start < pos < self.close_end


def find_code_fences(text: str) -> list[CodeFence]:
    """All fenced code blocks (``` or ~~~) in ``text``, in order."""
    fences: list[CodeFence] = []
    pos = 0
    while (opener := _OPENER.search(text, pos)) is not None:
        marker = opener["marker"]
        info = opener["info"].strip()
        if marker[0] == "`" and "`" in info:  # inline code such as ```a``` is not a fence
            pos = opener.end() + 1
            continue
        language = info.split()[0] if info else ""
        close_start = close_end = len(text)
        line_start = opener.end() + 1
        while line_start < len(text):
            line_end = text.find("\n", line_start)
            line_end = len(text) if line_end == -1 else line_end
            closer = _CLOSER.fullmatch(text, line_start, line_end)
            if closer and closer["marker"][0] == marker[0] and len(closer["marker"]) >= len(marker):
                close_start, close_end = line_start, line_end
                break
            line_start = line_end + 1
        fences.append(
            CodeFence(marker, language, opener.start(), opener.end(), close_start, close_end)
        )
        pos = close_end + 1
    return fences


def split_message(text: str, limit: int, *, length: Callable[[str], int] = len) -> list[str]:
    """Split ``text`` into chunks whose ``length()`` is at most ``limit``.

    Cuts on paragraph, then line, then word boundaries; a word longer than the limit is
    hard-cut (never inside a surrogate pair or before a combining mark/emoji modifier).
    A fence cut by a split is closed at the end of its chunk and reopened, with the same
    language tag, at the start of the next; the added lines count toward the limit. No
    chunk is empty; joining the chunks gives back the text except for the added fence
    lines and whitespace at the cuts. Raises ``ValueError`` when ``limit`` cannot hold
    even one character.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    return list(_Splitter(text, limit, length).chunks())


class _Splitter:
    def __init__(self, text: str, limit: int, length: Callable[[str], int]) -> None:
        self.text = text
        self.limit = limit
        self.length = length
        self.fences = find_code_fences(text)
        if any(length(f.reopen_line + "x" * 8 + f.close_line) > limit for f in self.fences):
            self.fences = []  # a limit this small cannot afford balanced fences

    def chunks(self) -> Iterator[str]:
        text = self.text
        start = self._skip_blank_lines(0)
        while start < len(text) and text[start:].strip():
            fence = self._fence_open_at(start)
            prefix = fence.reopen_line if fence else ""
            rest = text[start:].rstrip()
            if self.length(prefix + rest) <= self.limit:
                yield prefix + rest
                return
            cut, word_cut = self._choose_cut(start, prefix)
            open_fence = self._fence_open_at(cut)
            chunk = prefix + text[start:cut].rstrip()
            if open_fence is not None:
                chunk += open_fence.close_line
            yield chunk
            start = self._next_start(cut, word_cut, open_fence)

    def _fits(self, prefix: str, start: int, end: int, suffix: str) -> bool:
        return self.length(prefix + self.text[start:end].rstrip() + suffix) <= self.limit

    def _fence_open_at(self, pos: int) -> CodeFence | None:
        for fence in self.fences:
            if fence.open_start >= pos:
                return None
            if fence.body_contains(pos):
                return fence
        return None

    def _window_end(self, start: int, prefix: str) -> int:
        """The largest end such that prefix + text[start:end] fits the limit."""
        low, high = start, len(self.text)
        while low < high:
            mid = (low + high + 1) // 2
            if self.length(prefix + self.text[start:mid]) <= self.limit:
                low = mid
            else:
                high = mid - 1
        return low

    def _choose_cut(self, start: int, prefix: str) -> tuple[int, bool]:
        """Where the chunk starting at ``start`` ends, and whether that was a word cut."""
        end = self._window_end(start, prefix)
        paragraphs, lines, words = self._boundaries(start, end)
        threshold = start + (end - start) * _MIN_FILL
        for minimum in (threshold, start + 1):
            for candidates, word_cut in ((paragraphs, False), (lines, False), (words, True)):
                for cut in reversed(candidates):
                    if cut >= minimum and self._acceptable(start, prefix, cut):
                        return cut, word_cut
        return self._hard_cut(start, prefix, end), False

    def _boundaries(self, start: int, end: int) -> tuple[list[int], list[int], list[int]]:
        text = self.text
        stop = min(end + 1, len(text))
        lines = [i for i in range(start + 1, stop) if text[i] == "\n"]
        paragraphs = [i for i in lines if _BLANK_LINE.match(text, i + 1)]
        words = [
            i for i in range(start + 1, stop) if text[i] in " \t" and text[i - 1] not in " \t\n"
        ]
        return paragraphs, lines, words

    def _acceptable(self, start: int, prefix: str, cut: int) -> bool:
        if not self.text[start:cut].strip():
            return False
        if any(fence.in_marker_line(cut) for fence in self.fences):
            return False
        fence = self._fence_open_at(cut)
        if fence is None:
            return self._fits(prefix, start, cut, "")
        body_start = max(start, fence.open_end)
        if not self.text[body_start:cut].strip():
            return False  # would end the chunk on an empty code block
        return self._fits(prefix, start, cut, fence.close_line)

    def _hard_cut(self, start: int, prefix: str, end: int) -> int:
        if self.length(self.text[start]) > self.limit:
            raise ValueError(f"limit {self.limit} cannot hold one character")
        cut = end
        while cut > start + 1 and not self._fits(prefix, start, cut, self._close_line_at(cut)):
            cut -= 1
        return self._back_off_grapheme(start, cut)

    def _close_line_at(self, pos: int) -> str:
        fence = self._fence_open_at(pos)
        return fence.close_line if fence else ""

    def _back_off_grapheme(self, start: int, cut: int) -> int:
        text = self.text
        candidate = cut
        while candidate > start + 1 and candidate < len(text) and _joins(text, candidate):
            candidate -= 1
        return candidate if candidate > start else cut

    def _skip_blank_lines(self, pos: int) -> int:
        while (blank := _BLANK_LINE.match(self.text, pos)) is not None:
            pos = blank.end()
        return pos

    def _next_start(self, cut: int, word_cut: bool, closed_fence: CodeFence | None) -> int:
        text = self.text
        if word_cut:
            while cut < len(text) and text[cut] in " \t":
                cut += 1
        pos = self._skip_blank_lines(cut)
        if closed_fence is not None and pos == closed_fence.close_start:
            # The chunk already ends with an added closing line; drop the original one.
            pos = self._skip_blank_lines(min(closed_fence.close_end + 1, len(text)))
        return pos


def _joins(text: str, pos: int) -> bool:
    """True when a cut between text[pos-1] and text[pos] would split a visible character."""
    char, before = text[pos], text[pos - 1]
    if char in _EXTENDERS or before == _ZERO_WIDTH_JOINER or unicodedata.combining(char):
        return True
    if before == "\r" and char == "\n":
        return True
    if _is_regional_indicator(char) and _is_regional_indicator(before):
        run = 0
        while pos - 1 - run >= 0 and _is_regional_indicator(text[pos - 1 - run]):
            run += 1
        return run % 2 == 1  # a flag is a pair; an odd run means we are mid-pair
    return False


def _is_regional_indicator(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"
