"""Choosing the context engine by name (SPEC C1): built-in, plugin directory, registry."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

from agent.context_compressor import ContextCompressor
from agent.context_engine import register_context_engine, resolve_context_engine
from tests.agent.scripted_summarizer import ScriptedSummarizer

PLUGINS = Path(__file__).parent / "plugins"


def builtin(**kwargs):
    return ContextCompressor(**kwargs)


def test_compressor_always_means_the_built_in_engine():
    choice = resolve_context_engine("compressor", builtin, [PLUGINS])
    assert choice.resolved == "compressor"
    engine = choice.factory(main=ScriptedSummarizer(), context_length=128_000)
    assert isinstance(engine, ContextCompressor) and engine.name == "compressor"


async def test_a_plugin_directory_engine_is_found_by_name():
    choice = resolve_context_engine("keep_everything", builtin, [PLUGINS])
    assert (choice.requested, choice.resolved, choice.warnings) == (
        "keep_everything",
        "keep_everything",
        (),
    )
    engine = choice.factory(main=ScriptedSummarizer(), context_length=64_000)
    assert engine.name == "keep_everything" and engine.context_length == 64_000
    messages = [{"role": "user", "content": "hi"}]
    result = await engine.compress(messages, force=True)
    assert result.messages is messages and not result.committed
    assert engine.tools()[0]["function"]["name"] == "count_messages"
    assert await engine.call_tool("count_messages", {}) == "all of them"


def test_plugins_never_activate_without_being_named():
    choice = resolve_context_engine("", builtin, [PLUGINS])
    assert choice.resolved == "compressor"


def test_a_registered_engine_is_found_when_no_directory_has_it():
    name = f"registered_{uuid.uuid4().hex[:8]}"

    def factory(**kwargs):
        return ContextCompressor(**kwargs)

    register_context_engine(name, factory)
    choice = resolve_context_engine(name, builtin, [PLUGINS])
    assert choice.factory is factory and choice.resolved == name


def test_an_unknown_engine_falls_back_to_the_built_in_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="agent.context_engine"):
        choice = resolve_context_engine("no_such_engine", builtin, [PLUGINS])
    assert choice.resolved == "compressor" and choice.factory is builtin
    assert choice.warnings and "no_such_engine" in choice.warnings[0]
    assert any("no_such_engine" in r.getMessage() for r in caplog.records)
