"""Prices and budgets in config.yaml (docs/cost.md): ``model.price``,
``models.<name>.price``, ``auxiliary.compression.price``,
``media.transcription.price_per_minute`` and ``budgets``. Part of
:class:`gateway.config.schema.Config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from agent.cost.budget import Budgets
from agent.cost.prices import Price, Vendor, price_for, to_decimal, transcription_price
from gateway.config.typed_yaml import Problem


def _not_negative() -> dict[str, Any]:
    return {"range": (0, None)}


@dataclass(frozen=True)
class PriceConfig:
    """USD per million tokens. ``input`` and ``output`` are required; a cache rate left
    out follows the provider's rule (docs/cost.md#how-a-call-is-priced). Zeros: free."""

    #: Shown when a price is written as one number (gateway/config/typed_yaml.py).
    EXAMPLE: ClassVar[str] = "{input: 0.15, output: 0.60}"

    input: float = field(metadata=_not_negative())
    output: float = field(metadata=_not_negative())
    cached_input: float | None = field(default=None, metadata=_not_negative())
    #: Input written to a 5-minute cache (Anthropic: 1.25x input when left out).
    cache_write: float | None = field(default=None, metadata=_not_negative())
    #: Input written to a 1-hour cache (Anthropic: 2x input when left out).
    cache_write_1h: float | None = field(default=None, metadata=_not_negative())


def check_price(path: str, price: PriceConfig | None) -> list[Problem]:
    """A cached read dearer than a fresh one: no provider prices it so, so the two
    are almost surely swapped or mistyped (``path``: where the price is written)."""
    if price is None or price.cached_input is None or price.cached_input <= price.input:
        return []
    return [
        Problem(
            f"{path}.cached_input",
            f"{price.cached_input:.15g} is more than input ({price.input:.15g}); a cached"
            " read never costs more than a fresh one: are the two swapped?",
        )
    ]


@dataclass(frozen=True)
class BudgetsConfig:
    """USD; null: no budget (docs/cost.md#budgets). Days and months are UTC."""

    per_user_daily: float | None = field(default=None, metadata=_not_negative())
    per_chat_daily: float | None = field(default=None, metadata=_not_negative())
    monthly: float | None = field(default=None, metadata=_not_negative())


def configured_price(settings: PriceConfig | None, provider: str) -> Price | None:
    """A ``price:`` block as a :class:`Price` (None: not configured)."""
    if settings is None:
        return None
    vendor: Vendor = "anthropic" if provider == "anthropic" else "openai"
    return Price.per_million(
        settings.input,
        settings.output,
        cached_input=settings.cached_input,
        cache_write=settings.cache_write,
        cache_write_1h=settings.cache_write_1h,
        vendor=vendor,
    )


def model_price(
    provider: str, name: str, base_url: str | None, settings: PriceConfig | None
) -> Price | None:
    """A chat or summary model's price: configured, free when local, the built-in
    table, else None (unknown; docs/cost.md#where-a-price-comes-from)."""
    return price_for(name, base_url, configured_price(settings, provider))


def transcription_minute_price(
    model: str, base_url: str | None, per_minute: float | None
) -> Decimal | None:
    """USD per minute of audio for the transcription route, or None (unknown)."""
    return transcription_price(model, base_url, per_minute)


def budgets(settings: BudgetsConfig) -> Budgets:
    def usd(value: float | None) -> Decimal | None:
        return None if value is None else to_decimal(value)

    return Budgets(
        per_user_daily=usd(settings.per_user_daily),
        per_chat_daily=usd(settings.per_chat_daily),
        monthly=usd(settings.monthly),
    )
