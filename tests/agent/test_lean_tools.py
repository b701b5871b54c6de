"""What find_tools answers, and what a lean offer carries (docs/design.md#lean-tools)."""

from __future__ import annotations

from typing import Any

from agent.lean_tools import CALL_TOOL, FIND_TOOLS, ToolOffer, schema_name
from agent.window import Window


def schema(name: str, description: str, fields: int = 3) -> dict[str, Any]:
    properties = {f"field_{n}": {"type": "string", "description": "x" * 200} for n in range(fields)}
    parameters = {"type": "object", "properties": properties}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS = [
    schema("calendar_add", "Add an event to the calendar"),
    schema("calendar_list", "List the events of the calendar"),
    schema("weather_now", "The weather now in a city"),
    schema("weather_week", "The weather for the week in a city"),
    schema("remember", "Keep a note", 1),
    schema("forget", "Drop a note", 1),
]


def test_common_words_find_nothing_and_the_answer_fits_its_size() -> None:
    offer = ToolOffer(list(TOOLS), 0.2)
    assert offer.find("what is the tool for the") == (
        "No tool matches 'what is the tool for the'. Try other words."
    )
    answer = offer.find("the weather in the city this week", max_chars=1_000)
    assert answer.splitlines()[1].startswith("weather_week:")  # the best match, whole
    assert len(answer.splitlines()) == 2  # a second would pass 1,000 characters
    assert "calendar" not in answer and offer.found == ["weather_week"]


def test_a_lean_offer_keeps_the_tools_own_order_and_memory_first() -> None:
    offer = ToolOffer(list(TOOLS), 0.2)
    offer.find("weather week")
    names = [schema_name(s) for s in offer.offered(Window(4_096, 1_024))]
    assert names[:2] == [FIND_TOOLS, CALL_TOOL]
    assert {"weather_week", "remember", "forget"} <= set(names)
    order = [schema_name(s) for s in TOOLS]
    assert names[2:] == sorted(names[2:], key=order.index)  # the cached prefix holds
