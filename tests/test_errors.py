"""Every error a caller can handle has one root: ``except NightowlError`` catches them."""

from __future__ import annotations

import pytest

from adapters.base import DeliveryError
from adapters.telegram.adapter import TelegramStartError
from agent.providers import ProviderError
from agent.tools import ToolInputError
from agent.turn_result import CompressionExhausted
from gateway.config import ConfigError
from gateway.store import DataDirInUse, SessionEnded, StoreError
from nightowl_errors import NightowlError


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("compression.threshold: expected a number"),
        StoreError("the disk is full", reason="full"),
        SessionEnded("20261201-abc"),
        DeliveryError("chat not found", platform="telegram", chat_id="1"),
        TelegramStartError("Unauthorized"),
        ProviderError("overflow", "prompt is too long"),
        CompressionExhausted("compression made no progress"),
        ToolInputError("'when' is not a time"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_every_error_a_caller_handles_is_a_nightowl_error(error: Exception) -> None:
    with pytest.raises(NightowlError):
        raise error


def test_running_out_of_room_is_not_blamed_on_the_provider() -> None:
    assert not issubclass(CompressionExhausted, ProviderError)
    assert issubclass(DataDirInUse, StoreError) and issubclass(SessionEnded, StoreError)
