"""Agent tools from MCP servers (docs/design.md#mcp-tools): a small server written with the
SDK (tests/fakes/mcp_server.py) over stdio and HTTP, the real gateway, the fake model."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from gateway.ops.doctor import run_doctor
from tests.child_process import Spawn, clean_env
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.mcp_server import serving_http
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing, turns_done
from tests.waiting import CEILING

SERVER = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")


def stdio(**options: Any) -> dict[str, Any]:
    return {"command": [sys.executable, SERVER], **options}


def tool_names(request: Recorded) -> list[str]:
    return [tool["function"]["name"] for tool in request.body.get("tools") or []]


def tool_results(request: Recorded) -> list[Any]:
    return [m["content"] for m in request.messages if m.get("role") == "tool"]


async def test_a_stdio_tool_result_reaches_the_next_request(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(tool_calls=[("notes__echo", {"text": "owls"})]), Reply("done"))
        config = make_config(tmp_path, llm, tools={"mcp_servers": {"notes": stdio()}})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("use the tool")
            assert await adapter.wait_sent(1) == ["done"]
        first, second = llm.requests
        assert "notes__echo" in tool_names(first) and "notes__big" in tool_names(first)
        assert tool_results(second) == ["echo: owls"]


async def test_a_400_kb_result_is_cut_and_later_pruned(tmp_path: Path) -> None:
    async with FakeLLM(responder=summarizing()) as llm:
        llm.script(Reply("hi"), Reply(tool_calls=[("notes__big", {})]), Reply("got it"))
        config = make_config(
            tmp_path,
            llm,
            tools={"mcp_servers": {"notes": stdio()}},
            agent={"tool_result_max_chars": 8000},
            compression={"protect_last_n": 4},
        )
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            for n, text in enumerate(["hello", "fetch it", *[f"more {i}" for i in range(8)]]):
                await adapter.say(text)
                await adapter.wait_sent(n + 1)
            cut = tool_results(llm.requests[2])[0]
            assert cut.startswith("BIG-START xxx") and "BIG-END" not in cut
            assert cut.endswith(f"[… truncated {400_000 - 8000} characters]")
            await adapter.say("/compress")
            await adapter.wait_sent(11)
            await turns_done(gateway)
        assert adapter.texts()[-1].startswith("Compressed:")
        summary = next(r for r in llm.requests if "summarization step" in r.all_text)
        assert "[Old tool output cleared to save context space]" in summary.all_text
        assert "BIG-START" not in summary.all_text  # phase 1 pruned it before the summary


async def test_a_server_that_crashes_mid_call_gives_an_error_text_and_comes_back(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(tool_calls=[("notes__crash", {})]), Reply("the tool broke"))
        config = make_config(tmp_path, llm, tools={"mcp_servers": {"notes": stdio()}})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            await adapter.say("crash it")
            assert await adapter.wait_sent(1) == ["the tool broke"]
            (result,) = tool_results(llm.requests[1])
            assert "stopped while running crash" in result and "restarted" in result
            assert gateway.mcp is not None
            await gateway.mcp.connections["notes"].wait_up(CEILING)  # restarted
            llm.script(Reply(tool_calls=[("notes__echo", {"text": "again"})]), Reply("fine"))
            await adapter.say("and now?")
            assert (await adapter.wait_sent(2))[-1] == "fine"
        assert tool_results(llm.requests[-1])[-1] == "echo: again"


async def test_a_hanging_tool_times_out_and_the_turn_goes_on(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(tool_calls=[("notes__hang", {})]), Reply("it hung"))
        servers = {"notes": stdio(timeout_seconds=1)}
        config = make_config(tmp_path, llm, tools={"mcp_servers": servers})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("wait for it")
            assert await adapter.wait_sent(1) == ["it hung"]
        (result,) = tool_results(llm.requests[1])
        assert "did not answer within 1 seconds" in result


async def test_tools_reach_groups_only_when_configured(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        servers = {
            "mine": stdio(),
            "team": stdio(chats="groups"),
            "one": stdio(chats=["telegram:7"]),
        }
        telegram = {
            "enabled": True,
            "token": "t",
            "allowed_users": ["u1"],
            "allowed_chats": ["-100"],
        }
        config = make_config(
            tmp_path, llm, tools={"mcp_servers": servers}, platforms={"telegram": telegram}
        )
        adapter = RecordingAdapter("telegram")
        async with running_gateway(config, adapter):
            await adapter.say("in private", chat_id="7")
            await adapter.wait_sent(1)
            group = {"chat_type": "group", "addressed": True}
            await adapter.say("in the group", chat_id="-100", **group)
            await adapter.wait_sent(2)
            await adapter.say("/tools", chat_id="-100", **group)
            listing = (await adapter.wait_sent(3))[-1]
        private, in_group = (tool_names(r) for r in llm.requests)
        assert "mine__echo" in private and "one__echo" in private
        assert not any(name.startswith("team__") for name in private)
        assert "team__echo" in in_group
        assert not any(name.startswith(("mine__", "one__")) for name in in_group)
        assert "team (up): team__echo" in listing and "mine" not in listing
        assert "session_search" in listing
        # A description's first sentence, not cut at its "e.g.".
        assert "schedule_message — Send a message to this chat later, e.g. a reminder" in listing
        assert "find_tools" not in listing  # a window with room for every tool


async def test_a_streamable_http_server_with_images_and_resources(tmp_path: Path) -> None:
    async with FakeLLM() as llm, serving_http() as server:
        llm.script(
            Reply(tool_calls=[("web__picture", {}), ("web__note", {})]), Reply("a dot, milk")
        )
        servers = {"web": {"url": server.url, "headers": {"Authorization": "Bearer ${TOKEN}"}}}
        raw = {"tools": {"mcp_servers": servers}, "model": {"supports_vision": True}}
        config = make_config(tmp_path, llm, **raw, environ={"TOKEN": "s3cret"})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("look")
            assert await adapter.wait_sent(1) == ["a dot, milk"]
        after = llm.requests[1].messages
        picture, note = tool_results(llm.requests[1])
        assert picture == "a red dot\n[image 1: image/png]"  # text only in a tool message
        assert note == "[resource notes://today]\nbuy milk"
        images = after[-1]  # the picture follows the tool results, as OpenAI takes it
        assert images["role"] == "user"
        assert images["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert server.authorizations and set(server.authorizations) == {"Bearer s3cret"}


async def test_a_stdio_server_does_not_outlive_a_killed_gateway(
    tmp_path: Path, spawn: Spawn
) -> None:
    pid_file = tmp_path / "server.pid"
    async with FakeLLM() as llm:
        config = tmp_path / "config.yaml"
        server = stdio(env={"MCP_PID_FILE": str(pid_file)})
        raw = {
            "data_dir": str(tmp_path / "data"),
            "model": {"base_url": llm.openai_base_url, "name": "fake-model", "max_retries": 0},
            "tools": {"mcp_servers": {"notes": server}},
        }
        config.write_text(yaml.safe_dump(raw))
        chat = await spawn("chat", "-c", str(config), cwd=tmp_path, env=clean_env())
        await chat.say("hello")
        await chat.out.expect("owl › echo: hello")  # the gateway started, server included
        server_pid = int(pid_file.read_text())
        gone = _exit_of(server_pid)
        chat.signal(signal.SIGKILL)  # no code of the gateway runs after this
        await asyncio.wait_for(gone, CEILING)


def _exit_of(pid: int) -> asyncio.Future[None]:
    """A future done when process ``pid`` (not our child) has exited."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    descriptor = os.pidfd_open(pid)

    def exited() -> None:
        loop.remove_reader(descriptor)
        os.close(descriptor)
        done.set_result(None)

    loop.add_reader(descriptor, exited)
    return done


async def test_doctor_lists_each_server_with_its_tools(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        servers = {"notes": stdio(), "broken": {"command": [str(tmp_path / "missing")]}}
        raw = {
            "data_dir": str(tmp_path / "data"),
            "model": {"base_url": llm.openai_base_url, "name": "fake-model", "api_key": "k"},
            "tools": {"mcp_servers": servers},
        }
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        config.chmod(0o600)
        out = io.StringIO()
        code = await run_doctor(str(config), timeout=CEILING / 2, out=out)
    lines = out.getvalue().splitlines()
    notes = next(entry for entry in lines if "mcp notes:" in entry)
    assert notes.startswith("✓") and "7 tool(s): notes__echo, notes__big" in notes
    broken = next(entry for entry in lines if "mcp broken:" in entry)
    assert broken.startswith("✗") and code == 1
