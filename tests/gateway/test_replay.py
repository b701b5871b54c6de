"""`nightowl replay`: a recorded chat through the real turn runner, charted and summarized."""

from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gateway.ops.cli import main
from gateway.ops.replay.run import read_replay_file, replay, replay_config
from tests.fakes.llm_server import FakeLLM
from tests.harness import is_summary_request, make_config, summarizing

SVG = "{http://www.w3.org/2000/svg}"
WORDS = "deploy server coffee meeting bug release budget weekend tickets dinner plan".split()


def recorded_chat(path: Path, messages: int, *, every: int = 4, seed: int = 7) -> Path:
    """A busy group: every ``every``-th message is addressed to the bot."""
    rnd = random.Random(seed)
    with path.open("w") as file:
        for i in range(messages):
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 60)))
            line = {
                "text": f"message {i}: {text}",
                "sender": rnd.choice(["Alice", "Bob", "Chen"]),
                "addressed": i % every == 0,
                "chat": "group",
            }
            file.write(json.dumps(line) + "\n")
    return path


def test_replaying_500_messages_writes_the_chart_and_reports_compressions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = recorded_chat(tmp_path / "night.jsonl", 500)
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'live'}\nmodel:\n  name: fake-model\n")
    code = main(
        ["replay", str(chat), "-c", str(config), "--provider", "scripted", "--window", "8000"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Replayed 500 messages from night.jsonl: 125 turns, 375 observed, 0 failed" in out
    assert "window 8,000 tokens" in out
    compressions = int(re.search(r"Compressions: (\d+) \(", out).group(1))
    assert compressions >= 3
    assert f"turn_start_threshold {compressions}" in out  # the agent's threshold did the work
    max_prompt = int(re.search(r"max ([\d,]+) \(", out).group(1).replace(",", ""))
    assert max_prompt < 8000 * 0.85  # hygiene's safety net was never needed
    archived = int(re.search(r"Rows archived: ([\d,]+)", out).group(1).replace(",", ""))
    assert archived > 250
    assert "Chart: " + str(tmp_path / "night.svg") in out

    svg = ET.parse(tmp_path / "night.svg").getroot()
    markers = [e for e in svg.iter(f"{SVG}line") if e.get("class") == "compression"]
    assert len(markers) == compressions
    assert {m.get("data-trigger") for m in markers} == {"turn_start_threshold"}
    points = next(e for e in svg.iter(f"{SVG}polyline") if e.get("class") == "prompt")
    assert len(points.get("points").split()) == 125
    limits = " ".join(t.text or "" for t in svg.iter(f"{SVG}text"))
    assert "window 8,000" in limits and "compression threshold" in limits
    assert not (tmp_path / "live").exists()  # the live database is never touched


async def test_replay_against_the_configured_model_uses_its_reported_usage(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    lines = read_replay_file(recorded_chat(tmp_path / "chat.jsonl", 60, every=3))
    config = replay_config(make_config(tmp_path / "live", fake_llm), tmp_path / "scratch", 2048)
    result = await replay(config, lines)
    assert len(result.turns) == 20 and result.observed == 40
    assert all(turn.source == "reported" for turn in result.turns)
    # What the chart shows is what the model was sent: the fake's own count of each request.
    answered = [r for r in fake_llm.requests if not is_summary_request(r)]
    assert result.turns[-1].prompt_tokens == answered[-1].prompt_tokens
    assert result.compressions and result.archived_rows > 0
    assert result.window == 2048


def test_a_bad_line_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"text": "hi"}\n\n{"sender": "Bob"}\n')
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n")
    assert main(["replay", str(chat), "-c", str(config), "--provider", "scripted"]) == 1
    assert 'line 3: expected an object with a "text" string' in capsys.readouterr().err


def test_a_replay_never_writes_into_an_existing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = recorded_chat(tmp_path / "chat.jsonl", 4)
    live = tmp_path / "live"
    live.mkdir()
    (live / "state.db").write_bytes(b"the live database")
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {live}\n")
    args = ["replay", str(chat), "-c", str(config), "--provider", "scripted"]
    assert main([*args, "--keep-data", str(live)]) == 2
    assert "already holds a database" in capsys.readouterr().err
    assert (live / "state.db").read_bytes() == b"the live database"
    assert main([*args, "--keep-data", str(tmp_path / "kept")]) == 0
    assert (tmp_path / "kept" / "state.db").exists()
