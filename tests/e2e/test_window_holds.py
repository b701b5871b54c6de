"""The window holds whatever the rows hold: `nightowl chat` with a 4K-window model that
enforces its window, fed a megabyte paste, then ordinary messages in new processes."""

from __future__ import annotations

from pathlib import Path

from tests.child_process import nightowl, write_config
from tests.fakes.llm_server import FakeLLM, Recorded

WINDOW = 4_096


async def chat(config: Path, stdin: str) -> str:
    code, out, err = await nightowl("chat", "-c", str(config), stdin=stdin, cwd=config.parent)
    assert code == 0, err
    return out


def answers(requests: list[Recorded]) -> list[Recorded]:
    return [r for r in requests if not r.all_text.startswith("You are the summarization step")]


async def test_a_megabyte_paste_never_overflows_a_later_turn(tmp_path: Path) -> None:
    async with FakeLLM(context_window=WINDOW) as llm:
        config = write_config(tmp_path, llm, context_length=WINDOW, max_output_tokens=512)
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
