"""Sixty tools on an 8K window (docs/design.md#lean-tools): the schemas would fill the
window, so the model finds the tool it needs and calls it; no request carries tool
schemas past a quarter of the window, and every request fits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.tools import Tool, ToolContext
from tests.fakes.llm_server import Recorded, Reply
from tests.fakes.local_servers import FakeVllm
from tests.harness import RecordingAdapter, make_config, running_gateway

TOPICS = [
    "weather", "calendar", "invoices", "tickets", "inventory", "shipping", "payroll", "wiki",
    "builds", "alerts", "backups", "certificates", "dns", "mail", "printers", "vpn", "wifi",
    "contracts", "expenses", "travel",
]  # fmt: skip
ACTIONS = ["list", "read", "update"]
CALLED: list[tuple[str, dict[str, Any]]] = []


def many_tools() -> tuple[Tool, ...]:
    """Sixty tools with realistic descriptions and parameters: about 12,000 tokens."""

    def handler_for(name: str):
        async def handler(arguments: dict[str, Any], context: ToolContext) -> str:
            CALLED.append((name, arguments))
            return f"{name} done: sunny, 21°C" if "weather" in name else f"{name} done"

        return handler

    tools = []
    for topic in TOPICS:
        for action in ACTIONS:
            name = f"{topic}__{action}"
            description = (
                f"{action.capitalize()} {topic} records in the company's {topic} system. "
                + "Use it when the person asks about "
                + f"{topic}; it returns JSON with ids, names, owners, dates and states. " * 6
            )
            parameters = {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": f"words to match in {topic}"},
                    "limit": {"type": "integer", "description": "at most this many results"},
                    "owner": {"type": "string", "description": "only this owner's records"},
                    "since": {"type": "string", "description": "ISO date: newer records only"},
                },
                "required": ["query"],
            }
            tools.append(Tool(name, description, parameters, handler_for(name)))
    return tuple(tools)


def finds_then_calls(request: Recorded) -> Reply:
    """A model that looks for a weather tool, calls what it found, then answers."""
    tool_messages = [m for m in request.messages if m["role"] == "tool"]
    if not tool_messages:
        return Reply(tool_calls=[("find_tools", {"query": "weather forecast"})])
    if len(tool_messages) == 1:
        return Reply(tool_calls=[("weather__read", {"query": "Berlin"})])
    return Reply("It is sunny, 21°C.")


async def test_sixty_tools_on_an_8k_window_are_found_and_called(tmp_path: Path) -> None:
    CALLED.clear()
    async with FakeVllm(served=8_192) as vllm:
        vllm.responder = finds_then_calls
        config = make_config(tmp_path, vllm, model={"name": vllm.model})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter, extra_tools=many_tools()):
            await adapter.say("what's the weather in Berlin?")
            [reply] = await adapter.wait_sent(1)
            await adapter.say("/tools")
            listing = (await adapter.wait_sent(2))[-1]
    assert reply == "It is sunny, 21°C."
    assert listing.endswith("reaches the others through them.")  # says how it sees them
    assert CALLED == [("weather__read", {"query": "Berlin"})]
    assert vllm.refusals == 0
    for request in vllm.requests:
        schemas = vllm.tokens.text(json.dumps(request.body.get("tools") or []))
        assert schemas <= 8_192 // 4, schemas  # never past a quarter of the window
    offered = [{t["function"]["name"] for t in r.body["tools"]} for r in vllm.requests]
    assert "find_tools" in offered[0] and len(offered[0]) < 60
    assert "weather__read" in offered[1]  # found: offered by its own name from then on
