"""Shared fixtures. The fake LLM server (both APIs) lives in tests/fakes/llm_server.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started :class:`FakeLLM` on 127.0.0.1 (random port), stopped after the test."""
    async with FakeLLM() as llm:
        yield llm
