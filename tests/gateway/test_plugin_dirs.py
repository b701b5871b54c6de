"""Context-engine plugins come from ``<data_dir>/plugins`` only (docs/design.md#context-engine):
never from whatever directory the gateway happens to be started in."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gateway.app import Gateway
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config

PLUGIN = """
from pathlib import Path

Path({marker!r}).write_text("imported")
from agent.context_compressor import ContextCompressor as create_engine
"""


def write_plugin(base: Path, name: str, marker: Path) -> None:
    package = base / "plugins" / "context_engine" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PLUGIN.format(marker=str(marker)))


def test_a_plugins_directory_in_the_working_directory_is_ignored(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"cwd_engine_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "plugin-ran"
    workdir = tmp_path / "somewhere"  # e.g. a checkout someone else can write to
    write_plugin(workdir, name, marker)
    monkeypatch.chdir(workdir)
    config = make_config(tmp_path / "data", fake_llm, context={"engine": name})
    gateway = Gateway(config, [RecordingAdapter()])
    assert gateway.engine_choice.resolved == "compressor"
    assert gateway.engine_choice.warnings == (
        f"context engine {name!r} not found; using the built-in compressor",
    )
    assert not marker.exists()  # its code never ran


def test_a_plugin_in_the_data_dir_is_used(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"data_engine_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "plugin-ran"
    write_plugin(tmp_path / "data", name, marker)
    monkeypatch.chdir(tmp_path)
    config = make_config(tmp_path / "data", fake_llm, context={"engine": name})
    assert Gateway(config, [RecordingAdapter()]).engine_choice.resolved == name
    assert marker.read_text() == "imported"
