"""Events and user hooks (SPEC E1–E3): a hook can never break or stall a turn."""

from __future__ import annotations

import asyncio
import importlib.machinery
import sys
from pathlib import Path

import pytest

from gateway.events import EventBus, GatewayStarted
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, turns_done
from tests.waiting import CEILING

HOOKS = """
import asyncio
seen = []
stuck = asyncio.Event()
unstick = asyncio.Event()

def explode(event, payload):
    raise RuntimeError("hook bug")

async def hang(payload):
    await asyncio.Event().wait()

async def stick(payload):
    stuck.set()
    await unstick.wait()

async def record(event, payload):
    seen.append((event, payload))
"""


@pytest.fixture
def hook_module(tmp_path: Path):
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "user_hooks.py").write_text(HOOKS)
    yield "user_hooks"
    sys.modules.pop("user_hooks", None)


async def test_hooks_that_raise_or_hang_do_not_hold_up_turns(
    tmp_path: Path, fake_llm: FakeLLM, hook_module: str, caplog: pytest.LogCaptureFixture
) -> None:
    everything = ["message:received", "agent:turn_end", "message:sent", "session:start"]
    config = make_config(
        tmp_path,
        fake_llm,
        hooks=[
            {"events": everything, "handler": f"{hook_module}:explode"},
            {"events": everything, "handler": f"{hook_module}:hang", "timeout_seconds": 0.2},
            # Stuck until the test lets go, with a timeout no wait here reaches: a turn
            # that waited for its hooks could not finish.
            {"events": everything, "handler": f"{hook_module}:stick", "timeout_seconds": 3600},
            {"events": everything, "handler": f"{hook_module}:record"},
        ],
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        hooks = sys.modules[hook_module]
        await adapter.say("first")
        await adapter.say("/status")
        await adapter.wait_sent(2)
        await turns_done(gateway)
        await adapter.say("second")
        await adapter.wait_sent(3)
        assert hooks.stuck.is_set() and not hooks.unstick.is_set()  # answered meanwhile
        hooks.unstick.set()
        await gateway.events.drain(timeout=CEILING)
    replies = adapter.texts()
    assert "echo: first" in replies and replies[-1] == "echo: second"
    events = [event for event, _ in hooks.seen]
    assert events.count("agent:turn_end") == 2 and "session:start" in events
    turn_end = next(p for e, p in hooks.seen if e == "agent:turn_end")
    assert turn_end["session_key"] == "console:t" and turn_end["session_id"]
    log = caplog.text
    assert "user_hooks:explode" in log and "raised" in log
    assert "user_hooks:hang" in log and "timed out" in log


async def test_a_hook_that_cannot_be_imported_is_reported_not_fatal(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(
        tmp_path, fake_llm, hooks=[{"events": ["agent:turn_end"], "handler": "nope_mod:fn"}]
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter):
        await adapter.say("hi")
        await adapter.wait_sent(1)
    assert "nope_mod:fn could not be loaded" in caplog.text


async def test_the_hooks_directory_never_shadows_a_standard_or_installed_module(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the gateway adds <data_dir>/hooks
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    # A file in the hooks dir that shares a module's name (a standard one here): with the
    # hooks dir first on the path, the next `import colorsys` in the process ran it.
    (hooks / "colorsys.py").write_text("raise RuntimeError('hooks/colorsys.py ran')\n")
    (hooks / "owl_path_hooks.py").write_text(
        "seen = []\ndef record(payload):\n    seen.append(1)\n"
    )
    config = make_config(
        tmp_path,
        fake_llm,
        hooks=[{"events": ["agent:turn_end"], "handler": "owl_path_hooks:record"}],
    )
    adapter = RecordingAdapter()
    try:
        async with running_gateway(config, adapter) as gateway:
            await adapter.say("hi")
            await adapter.wait_sent(1)
            await turns_done(gateway)
            await gateway.events.drain()
        assert sys.modules["owl_path_hooks"].seen == [1]  # hooks still load from there...
    finally:
        sys.modules.pop("owl_path_hooks", None)
    found = importlib.machinery.PathFinder.find_spec("colorsys")  # ...but come last
    assert found is not None and found.origin is not None
    assert not found.origin.startswith(str(hooks))


async def test_unknown_events_are_refused_at_subscription() -> None:
    with pytest.raises(ValueError, match="session:compresss"):
        EventBus().subscribe(["session:compresss"], lambda e, p: None)


async def test_emit_returns_before_handlers_finish_and_each_gets_its_own_payload() -> None:
    bus = EventBus()
    release = asyncio.Event()
    done = asyncio.Event()
    seen: list[dict] = []

    async def slow(event: str, payload: dict) -> None:
        await release.wait()
        payload["platforms"].append("mutated")
        payload["mutated"] = True
        done.set()

    async def later(event: str, payload: dict) -> None:
        await done.wait()
        seen.append(payload)

    bus.subscribe(["gateway:start"], slow)
    bus.subscribe(["gateway:start"], later)
    bus.emit(GatewayStarted(["telegram"]))
    assert not done.is_set()
    release.set()
    await asyncio.wait_for(done.wait(), CEILING)
    await bus.drain(CEILING)
    assert seen == [{"platforms": ["telegram"]}]  # each handler gets its own copy
