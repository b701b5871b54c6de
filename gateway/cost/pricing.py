"""Each model route's price, from the config (docs/cost.md#where-a-price-comes-from).

A call is priced by the route it went to: its provider, model and effective base URL.
The configured ``price`` of that route (``model.price``, ``models.<name>.price``,
``auxiliary.compression.price``) wins; otherwise :func:`agent.cost.prices.price_for`
decides (free when local, the built-in table, else unknown).
"""

from __future__ import annotations

from decimal import Decimal

from agent.cost.budget import Budgets
from agent.cost.prices import Price, is_local_endpoint, table_price
from agent.urls import host_port
from gateway.config.cost import PriceConfig, budgets, model_price, transcription_minute_price
from gateway.config.models import model_choices
from gateway.config.schema import Config, summary_model_route

Route = tuple[str, str, str | None]


class Pricing:
    """Prices by route, and the budgets, as the config says."""

    def __init__(
        self,
        configured: dict[Route, PriceConfig | None] | None = None,
        limits: Budgets | None = None,
        transcription: float | None = None,
    ) -> None:
        self.configured = configured or {}
        self.budgets = limits or Budgets()
        #: ``media.transcription.price_per_minute`` (None: the table, free when local).
        self.transcription = transcription
        self._prices: dict[Route, Price | None] = {}

    @classmethod
    def of(cls, config: Config) -> Pricing:
        configured: dict[Route, PriceConfig | None] = {}
        for choice in model_choices(config.model, config.models).values():
            route = choice.route
            configured.setdefault((route.provider, route.name, route.base_url), choice.price)
        summary = summary_model_route(config)
        if summary is not None:
            key = (summary.provider, summary.name, summary.base_url)
            configured.setdefault(key, config.auxiliary.compression.price)
        per_minute = config.media.transcription.price_per_minute
        return cls(configured, budgets(config.budgets), per_minute)

    def unpriced(self) -> list[str]:
        """The configured models that have no price (their calls count against no
        budget, docs/cost.md#unknown-prices), as ``provider model``."""
        return [
            f"{provider} {model}"
            for provider, model, base_url in self.configured
            if self.price(provider, model, base_url) is None
        ]

    def free_but_sold(self) -> list[str]:
        """Configured models counted free as a local endpoint's (docs/cost.md) whose names
        the built-in table prices: a proxy in front of a paid API, perhaps, as
        ``model at host:port``."""
        return [
            f"{model} at {host_port(base_url)}"
            for (_, model, base_url), settings in self.configured.items()
            if settings is None
            and base_url is not None
            and is_local_endpoint(base_url)
            and table_price(model) is not None
        ]

    def price(self, provider: str, model: str, base_url: str | None) -> Price | None:
        """The price of a call to ``model`` on ``provider`` at ``base_url``; None: unknown.
        Worked out once per route: every model call asks, and the config does not change."""
        key = (provider, model, base_url)
        if key not in self._prices:
            self._prices[key] = model_price(provider, model, base_url, self.configured.get(key))
        return self._prices[key]

    @staticmethod
    def per_minute(model: str, base_url: str | None, configured: float | None) -> Decimal | None:
        """USD per minute of audio for a transcription route; None: unknown."""
        return transcription_minute_price(model, base_url, configured)
