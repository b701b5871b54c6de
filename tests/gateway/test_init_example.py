"""``nightowl init --example``: the commented config.yaml.example, also for a pip install
(pyproject.toml installs it under ``<prefix>/share/nightowl``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gateway.ops.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_init_example_prints_the_commented_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--example"]) == 0
    out, _ = capsys.readouterr()
    assert out == (ROOT / "config.yaml.example").read_text(encoding="utf-8")


def test_a_package_install_ships_the_example_where_init_looks_for_it() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "config.yaml.example" in setuptools["data-files"]["share/nightowl"]
