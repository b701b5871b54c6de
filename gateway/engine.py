"""Building a session's context engine from the config (SPEC C1, section 8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.compression.settings import CompressionSettings
from agent.context_engine import ContextEngine, EngineChoice
from gateway.config import Config

if TYPE_CHECKING:
    from gateway.app import Providers


def compression_settings(config: Config) -> CompressionSettings:
    c = config.compression
    return CompressionSettings(
        enabled=c.enabled,
        threshold=c.threshold,
        model_thresholds=dict(c.model_thresholds),
        target_ratio=c.target_ratio,
        tail_mode=c.tail_mode,
        protect_last_n=c.protect_last_n,
        min_tail_user_messages=c.min_tail_user_messages,
        abort_on_summary_failure=c.abort_on_summary_failure,
        max_compression_attempts=c.max_compression_attempts,
        context_timeout_seconds=c.context_timeout_seconds,
        max_output_tokens=config.model.max_output_tokens,
    )


def build_engine_factory(
    config: Config, choice: EngineChoice, providers: Providers
) -> Callable[[int], ContextEngine]:
    """A function that makes one engine per session for a given window.

    The built-in and plugins are called with the same keyword arguments; ``context.engine:
    compressor`` (or an unknown name, after a warning) is the built-in.
    """
    settings = compression_settings(config)
    factory = choice.factory

    def build(context_length: int) -> ContextEngine:
        return factory(
            settings=settings,
            main=providers.main,
            auxiliary=providers.auxiliary,
            model=config.model.name,
            provider=config.model.provider,
            context_length=context_length,
        )

    return build
