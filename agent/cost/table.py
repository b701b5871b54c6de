"""The built-in price table: well-known hosted models, USD per million tokens
(docs/cost.md#built-in-prices).

Checked on 2026-12-06 against the vendors' own pricing pages (which ones:
docs/cost.md#built-in-prices). Prices change: a configured ``price`` always wins over
this table.

Each row: (input, cached input, output, 5-minute cache write, 1-hour cache write).
OpenAI bills no cache writes (its caching is automatic), so its write prices are the
input price; Anthropic's are 1.25x (5 minutes) and 2x (1 hour) the input price, and its
cache reads 0.1x (docs/cost.md#how-a-call-is-priced). A model name matches a key
exactly or followed by a snapshot's date or ``-latest`` (``gpt-4o-mini-2024-07-18``,
``claude-sonnet-4-5-20250929``, ``claude-3-5-haiku-latest``); any other name is unknown,
so every model listed is listed by its own name.
"""

from __future__ import annotations

#: When the rows below were last checked against the vendors' pages.
CHECKED = "2026-12-06"

Row = tuple[str, str, str, str, str]


def _openai(input_: str, cached: str | None, output: str) -> Row:
    """An OpenAI row: no cache-write surcharge; no cached price listed: none given."""
    return (input_, cached if cached is not None else input_, output, input_, input_)


def _anthropic(input_: str, cached: str, output: str, write_5m: str, write_1h: str) -> Row:
    return (input_, cached, output, write_5m, write_1h)


OPENAI: dict[str, Row] = {
    # GPT-4o (gpt-4o-2024-05-13 was dearer and had no caching).
    "gpt-4o": _openai("2.50", "1.25", "10.00"),
    "gpt-4o-2024-05-13": _openai("5.00", None, "15.00"),
    "gpt-4o-mini": _openai("0.15", "0.075", "0.60"),
    # GPT-4.1 family: cached input is a quarter of input.
    "gpt-4.1": _openai("2.00", "0.50", "8.00"),
    "gpt-4.1-mini": _openai("0.40", "0.10", "1.60"),
    "gpt-4.1-nano": _openai("0.10", "0.025", "0.40"),
    # GPT-5 family: cached input is a tenth of input.
    "gpt-5": _openai("1.25", "0.125", "10.00"),
    "gpt-5-mini": _openai("0.25", "0.025", "2.00"),
    "gpt-5-nano": _openai("0.05", "0.005", "0.40"),
    # o-series reasoning models (reasoning tokens are billed as output tokens).
    "o1": _openai("15.00", "7.50", "60.00"),
    "o1-mini": _openai("1.10", "0.55", "4.40"),
    "o1-pro": _openai("150.00", None, "600.00"),
    "o3": _openai("2.00", "0.50", "8.00"),
    "o3-mini": _openai("1.10", "0.55", "4.40"),
    "o3-pro": _openai("20.00", None, "80.00"),
    "o4-mini": _openai("1.10", "0.275", "4.40"),
}

ANTHROPIC: dict[str, Row] = {
    # Opus 4.5 and later: $5 / $25.
    "claude-opus-4-5": _anthropic("5", "0.50", "25", "6.25", "10"),
    "claude-opus-4-6": _anthropic("5", "0.50", "25", "6.25", "10"),
    "claude-opus-4-7": _anthropic("5", "0.50", "25", "6.25", "10"),
    "claude-opus-4-8": _anthropic("5", "0.50", "25", "6.25", "10"),
    "claude-opus-5": _anthropic("5", "0.50", "25", "6.25", "10"),
    # Opus 4 and 4.1.
    "claude-opus-4": _anthropic("15", "1.50", "75", "18.75", "30"),
    "claude-opus-4-1": _anthropic("15", "1.50", "75", "18.75", "30"),
    # Sonnet 4, 4.5, 4.6 and 3.7: $3 / $15.
    "claude-sonnet-4": _anthropic("3", "0.30", "15", "3.75", "6"),
    "claude-sonnet-4-5": _anthropic("3", "0.30", "15", "3.75", "6"),
    "claude-sonnet-4-6": _anthropic("3", "0.30", "15", "3.75", "6"),
    "claude-3-7-sonnet": _anthropic("3", "0.30", "15", "3.75", "6"),
    # Sonnet 5: $2 / $10.
    "claude-sonnet-5": _anthropic("2", "0.20", "10", "2.50", "4"),
    # Haiku 4.5 and 3.5.
    "claude-haiku-4-5": _anthropic("1", "0.10", "5", "1.25", "2"),
    "claude-3-5-haiku": _anthropic("0.80", "0.08", "4", "1", "1.60"),
}

#: Speech to text, USD per minute of audio (OpenAI's /audio/transcriptions).
TRANSCRIPTION: dict[str, str] = {
    "whisper-1": "0.006",
    "gpt-4o-transcribe": "0.006",
    "gpt-4o-mini-transcribe": "0.003",
}
