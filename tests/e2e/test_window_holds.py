"""The window holds whatever the rows hold: `nightowl chat` with a 4K-window model that
enforces its window, fed a megabyte paste, then ordinary messages in new processes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeLLM, Recorded

WINDOW = 4_096


def config_file(tmp_path: Path, llm: FakeLLM) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "model:\n"
        f"  base_url: {llm.openai_base_url}\n"
        "  name: fake-model\n"
        f"  context_length: {WINDOW}\n"
        "  max_output_tokens: 512\n"
        "  max_retries: 0\n"
    )
    return path


async def chat(config: Path, stdin: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        "-c",
        str(config),
        cwd=config.parent,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


def answers(requests: list[Recorded]) -> list[Recorded]:
    return [r for r in requests if not r.all_text.startswith("You are the summarization step")]


async def test_a_megabyte_paste_never_overflows_a_later_turn(tmp_path: Path) -> None:
    async with FakeLLM(context_window=WINDOW) as llm:
        config = config_file(tmp_path, llm)
        paste = "BEGIN " + "x" * 1_000_000 + " END"
        await chat(config, paste + "\n")
        out = await chat(config, "hello\n")
        assert "owl › echo: hello" in out  # an answer, not "too long for the model"
        requests = answers(llm.requests)
        assert all(r.prompt_tokens + r.max_tokens <= WINDOW for r in llm.requests)
        later = requests[-1].all_text
        assert "BEGIN xxx" in later and "1,000,010 characters" in later  # an excerpt
        assert len(later) < 4 * WINDOW

        out = await chat(config, "/compress\n")
        assert "owl › Compressed:" in out  # the paste can be summarized, even in 4 rows

        message = "Q" + "q" * 4_094
        out = await chat(config, message + "\n")
        assert "owl › echo: Qqqq" in out
        newest = answers(llm.requests)[-1].last_user_text
        assert newest == message  # a 4,095-character message reaches the model whole
        assert all(r.prompt_tokens + r.max_tokens <= WINDOW for r in llm.requests)
