"""``async with`` for what the store opens: the backends and their connections."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Opened(ABC):
    """``async with`` it: opened the default way, closed after."""

    @abstractmethod
    async def open(self) -> Self: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
