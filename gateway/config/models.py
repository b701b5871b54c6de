"""``models:`` in config.yaml: the models a chat may switch to with /model, beside the
configured ``model:`` (docs/design.md#model-choice)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gateway.config.cost import PriceConfig
from gateway.config.routes import ModelRoute, same_endpoint
from gateway.config.typed_yaml import Problem

#: What /model calls the configured ``model:``.
DEFAULT_CHOICE = "default"


@dataclass(frozen=True)
class AlternativeModelConfig:
    """One model a chat may choose. What it leaves out comes from ``model:`` the way the
    summary model's does: the base URL only for the same provider, the key only for the
    same provider at the same endpoint (docs/design.md#configuration)."""

    name: str
    provider: Literal["openai", "anthropic"] | None = None
    base_url: str | None = None
    api_key: str | None = None
    context_length: int | None = field(default=None, metadata={"range": (512, None)})
    max_output_tokens: int | None = field(default=None, metadata={"range": (16, None)})
    supports_vision: bool | None = None
    #: USD per million tokens; None: the built-in table, free when local (docs/cost.md).
    price: PriceConfig | None = None


@dataclass(frozen=True)
class ModelChoice:
    """A model a chat can use: the configured one (``default``) or an alternative."""

    key: str
    route: ModelRoute
    #: None: the window is resolved (docs/design.md#window-resolution).
    context_length: int | None
    max_output_tokens: int
    vision: bool
    #: As configured for this model (None: the built-in table; docs/cost.md); never
    #: taken from ``model:``, whose price is another model's.
    price: PriceConfig | None = None


class MainModel(Protocol):
    """What the alternatives take from ``model:`` (its ``ModelConfig``)."""

    @property
    def provider(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def context_length(self) -> int | None: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def supports_vision(self) -> bool: ...
    @property
    def price(self) -> PriceConfig | None: ...


def model_choices(
    main: MainModel, models: Mapping[str, AlternativeModelConfig]
) -> dict[str, ModelChoice]:
    """Every model a chat may use, ``default`` first, then ``models:`` in order."""
    choices = {
        DEFAULT_CHOICE: ModelChoice(
            DEFAULT_CHOICE,
            ModelRoute(main.provider, main.name, main.base_url, main.api_key),
            main.context_length,
            main.max_output_tokens,
            main.supports_vision,
            main.price,
        )
    }
    for key, alternative in models.items():
        provider = alternative.provider or main.provider
        base_url = alternative.base_url or (main.base_url if provider == main.provider else None)
        api_key = alternative.api_key or None
        if not api_key and same_endpoint(main.provider, main.base_url, provider, base_url):
            api_key = main.api_key
        choices[key] = ModelChoice(
            key,
            ModelRoute(provider, alternative.name, base_url, api_key),
            alternative.context_length,
            alternative.max_output_tokens or main.max_output_tokens,
            main.supports_vision
            if alternative.supports_vision is None
            else alternative.supports_vision,
            alternative.price,
        )
    return choices


def check_models(models: Mapping[str, AlternativeModelConfig]) -> list[Problem]:
    return [
        Problem(f"models.{key}", f'"{DEFAULT_CHOICE}" is the configured model; use another name')
        for key in models
        if key.lower() == DEFAULT_CHOICE
    ]
