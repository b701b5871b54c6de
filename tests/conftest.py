"""Shared fixtures. The fake LLM server (both APIs) lives in tests/fakes/llm_server.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.child_process import Chat, Spawn
from tests.fakes.llm_server import FakeLLM
from tests.waiting import CEILING


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started :class:`FakeLLM` on 127.0.0.1 (random port), stopped after the test."""
    async with FakeLLM() as llm:
        yield llm


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """``await spawn(*args, cwd=...)``: a running ``nightowl <args>`` child
    (see :meth:`Chat.start`); whatever still runs at teardown is killed."""
    started: list[Chat] = []

    async def start(*args: str, **options: Any) -> Chat:
        chat = await Chat.start(*args, **options)
        started.append(chat)
        return chat

    yield start
    for chat in started:
        chat.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(chat.process.wait(), CEILING)
