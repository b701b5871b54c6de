"""One fullness number (docs/design.md#fullness): ``/status``, ``/context`` and the
dashboard show the same share of the window, and it is what the next request carries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from agent.tools import Tool, ToolContext
from tests.dashboard.support import client_of, dashboard_config, log_in
from tests.fakes.llm_server import FakeLLM, Recorded, Reply, estimate_request_tokens
from tests.harness import (
    RecordingAdapter,
    is_turn_request,
    memory_block,
    running_gateway,
    summarizing,
)

PHRASE = re.compile(r"[\d,]+ of [\d,]+ tokens \(\d+%\)")
#: How far the server's count of the next request may be from the number shown (plus the
#: new message): with the server's own count of the last request, a reply's estimate...
COUNTED_SLACK = 16
#: ...and without it, also what the server adds to every request (its chat template, 24
#: tokens here), which the estimate leaves to the margin (docs/design.md#output-reserve).
ESTIMATE_SLACK = 64


def weigh(estimate: int) -> int:
    """A tokenizer heavier than the estimate."""
    return round(estimate * 1.25)


def heavier(api: str, body: dict[str, Any]) -> int:
    """A server whose tokenizer and chat template count more than the estimate."""
    return weigh(estimate_request_tokens(api, body)) + 24


async def lookup(arguments: dict[str, Any], context: ToolContext) -> str:
    return "nothing found"


def catalogue_tools(count: int) -> tuple[Tool, ...]:
    """Tools enough that the window gets them lean (find_tools, call_tool and a few)."""
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look up"}},
    }
    return tuple(
        Tool(f"catalogue_{n}", f"Look up entries of catalogue {n} by a query.", parameters, lookup)
        for n in range(count)
    )


async def ask(adapter: RecordingAdapter, text: str) -> str:
    count = len(adapter.sent)
    await adapter.say(text)
    return (await adapter.wait_sent(count + 1))[-1]


def phrase_in(text: str) -> str:
    found = PHRASE.findall(text)
    assert len(found) == 1, text
    return found[0]


async def three_readings(adapter: RecordingAdapter, client: TestClient) -> list[str]:
    """The fullness phrase of /status, /context, the dashboard's session page (its context
    card and its row) and the dashboard's list of sessions."""
    status = await ask(adapter, "/status")
    context = await ask(adapter, "/context")
    page = await client.get("/session?key=console:t", headers={"Accept": "application/json"})
    body = await page.json()
    data = body["data"]
    assert data["context"]["phrase"] in body["fragments"]["live_context"]  # what the page shows
    listing = await client.get("/sessions", headers={"Accept": "application/json"})
    [row] = (await listing.json())["data"]["sessions"]
    return [
        phrase_in(status),
        phrase_in(context),
        data["context"]["phrase"],
        data["session"]["phrase"],
        row["phrase"],
    ]


def tokens_of(phrase: str) -> int:
    return int(phrase.split(" of ")[0].replace(",", ""))


def added_by(text: str) -> int:
    """What a new user message adds to the server's count of a request."""
    return weigh(
        estimate_request_tokens("openai", {"messages": [{"role": "user", "content": text}]})
    )


async def next_request(adapter: RecordingAdapter, llm: FakeLLM, text: str) -> Recorded:
    """The first request of the turn ``text`` starts."""
    before = len(llm.requests)
    await ask(adapter, text)
    return next(r for r in llm.requests[before:] if is_turn_request(r))


@pytest.mark.parametrize(("window", "tools"), [(2_048, 12), (8_192, 60)])
async def test_status_context_and_the_dashboard_show_what_the_next_request_carries(
    tmp_path: Path, fake_llm: FakeLLM, window: int, tools: int
) -> None:
    fake_llm.count_tokens = heavier
    fake_llm.context_window = window
    fake_llm.responder = summarizing()
    remember = ("remember", {"text": "fact: the lamps are green", "scope": "me"})
    fake_llm.script(Reply(tool_calls=[remember]), Reply("Noted."))
    model = {"context_length": window, "max_output_tokens": 256}
    adapter = RecordingAdapter()
    async with (
        running_gateway(
            dashboard_config(tmp_path, fake_llm, model=model),
            adapter,
            extra_tools=catalogue_tools(tools),
        ) as gateway,
        client_of(gateway) as client,
    ):
        await log_in(client)
        for n in range(8):
            await ask(adapter, f"fact: lamp {n} is green. " + "tell me more " * 20)

        counted = await three_readings(adapter, client)
        assert len(set(counted)) == 1, counted
        assert "by the server's last count" in await ask(adapter, "/status")
        fake_llm.responder = summarizing(lambda request: Reply("ok", usage=None))
        text = "and the lamps now?"
        sent = await next_request(adapter, fake_llm, text)
        assert "find_tools" in [tool["function"]["name"] for tool in sent.body["tools"]]
        assert memory_block(sent) is not None or window < 8_192
        assert abs(sent.prompt_tokens - tokens_of(counted[0]) - added_by(text)) <= COUNTED_SLACK

        # That answer came without usage: the window's content is estimated now.
        estimated = await three_readings(adapter, client)
        assert len(set(estimated)) == 1, estimated
        assert "estimated" in await ask(adapter, "/status")
        text = "and the lamps tomorrow?"
        sent = await next_request(adapter, fake_llm, text)
        assert abs(sent.prompt_tokens - tokens_of(estimated[0]) - added_by(text)) <= ESTIMATE_SLACK
