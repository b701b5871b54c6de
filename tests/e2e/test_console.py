"""The real command line: `nightowl chat` in a terminal-less pipe, stopped and restarted."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeLLM, Recorded, Reply


def write_config(tmp_path: Path, llm: FakeLLM) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "model:\n"
        f"  base_url: {llm.openai_base_url}\n"
        "  name: fake-model\n"
        "  max_retries: 0\n"
    )
    return config


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["HOME"] = env.get("HOME", "/tmp")
    return env


async def nightowl(*args: str, stdin: str = "", cwd: Path) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        *args,
        cwd=cwd,
        env=clean_env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    return process.returncode or 0, out.decode(), err.decode()


def users(request: Recorded) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


async def test_chat_survives_a_restart(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path, fake_llm)
    fake_llm.script(Reply("Hello Ada!"), Reply("Your name is Ada."))
    code, out, err = await nightowl(
        "chat", "-c", str(config), stdin="My name is Ada.\n", cwd=tmp_path
    )
    assert code == 0, err
    assert "owl › Hello Ada!" in out

    code, out, err = await nightowl(
        "chat", "-c", str(config), stdin="What is my name?\n", cwd=tmp_path
    )
    assert code == 0, err
    assert "owl › Your name is Ada." in out
    assert users(fake_llm.requests[-1]) == ["My name is Ada.", "What is my name?"]
    assert (tmp_path / "data" / "state.db").stat().st_mode & 0o077 == 0  # private to its owner


async def test_run_without_an_llm_key_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(f"data_dir: {tmp_path / 'data'}\n")
    code, _, err = await nightowl("run", "-c", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0]


async def test_an_invalid_config_is_refused_with_the_key_path(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("compression:\n  threshold: high\n")
    code, _, err = await nightowl("run", "-c", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert code == 2
    assert 'compression.threshold: expected a number between 0 and 1, got "high"' in err
