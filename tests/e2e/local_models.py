"""A long chat with a small local model, through the real gateway: the scenario shared by
tests/e2e/test_local_models.py (sampled) and bench/local_models.py (the whole matrix).

A person plants facts early ("fact: ..."), talks on — English or Russian, messages of a
few hundred characters, replies as long — and later asks for each fact back. The model
(a fake local server, tests/fakes/local_servers.py) answers a recall question only from
what it was shown: a fact the server cut from the prompt, or a summary that lost it, is
not recalled. Summaries keep every "fact:" phrase they are given (tests/harness.py).
"""

from __future__ import annotations

import json
import random
import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gateway.app import Gateway
from gateway.config.schema import Config
from tests.e2e.telegram_helpers import telegram_gateway, visible
from tests.fakes.llm_server import Recorded, Reply
from tests.fakes.local_servers import _LocalServer
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    is_turn_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)

WORDS = {
    "en": (
        "the plan for next week is simple we move the meeting to thursday check the "
        "numbers again and send the draft to the team before lunch because the client "
        "wants a short answer about costs risks and the schedule"
    ).split(),
    "ru": (
        "план на следующую неделю простой переносим встречу на четверг ещё раз проверяем "
        "цифры и отправляем черновик команде до обеда потому что клиент хочет короткий "
        "ответ о затратах рисках и сроках"
    ).split(),
}
FACTS = {
    "en": ["my sister is Anya", "the wifi password is owl-4471", "the boat is called Marlin"],
    "ru": ["сестру зовут Аня", "пароль от wifi owl-4471", "лодка называется Марлин"],
}
RECALL = re.compile(r"recall (\d+)")
FACT = re.compile(r"fact: #(\d+) ([^.\n\]]+)")
ERRORS = ("too long for the model", "no longer fits", "went wrong", "returned an error")


@dataclass
class Outcome:
    """What a run shows: answers, refusals, cuts, compressions, recall, fullness."""

    turns: int = 0
    answered: int = 0
    errors: list[str] = field(default_factory=list)
    refusals: int = 0
    cuts: int = 0
    compressions: int = 0
    recalled: int = 0
    asked: int = 0
    #: The largest prompt as sent, and prompt + max_tokens, by the server's count / window.
    max_prompt: float = 0.0
    max_fill: float = 0.0
    clipped: int = 0
    #: The largest share of the served window the tool schemas took, by the server's count.
    tool_share: float = 0.0

    @property
    def recall(self) -> float:
        return self.recalled / self.asked if self.asked else 1.0


def text_of_length(rng: random.Random, language: str, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS[language]))
    return " ".join(words)


def model_answer(language: str, rng: random.Random):
    """Answers a turn: a recall question from what the request shows, else chatter."""

    def answer(request: Recorded) -> Reply:
        asked = RECALL.search(request.last_user_text)
        if asked:
            known = {n: fact.strip() for n, fact in FACT.findall(request.all_text)}
            fact = known.get(asked.group(1))
            return Reply(f"fact {asked.group(1)} is: {fact}" if fact else "I don't remember.")
        return Reply(text_of_length(rng, language, rng.randint(150, 600)))

    return answer


class Chat(Protocol):
    """Where the person talks: a recording platform, or Telegram through its fake."""

    #: What the chat adds to the config (its platform).
    sections: dict[str, Any]

    def gateway(self, config: Config) -> AbstractAsyncContextManager[Gateway]: ...
    async def say(self, text: str) -> None: ...
    async def wait_sent(self, count: int) -> None: ...
    def shown(self) -> list[str]:
        """Every message the bot sent so far, as it shows now."""
        ...


class RecordingChat:
    def __init__(self) -> None:
        self.adapter = RecordingAdapter()
        self.sections: dict[str, Any] = {}

    def gateway(self, config: Config) -> AbstractAsyncContextManager[Gateway]:
        return running_gateway(config, self.adapter)

    async def say(self, text: str) -> None:
        await self.adapter.say(text)

    async def wait_sent(self, count: int) -> None:
        await self.adapter.wait_sent(count)

    def shown(self) -> list[str]:
        return self.adapter.texts()


class TelegramChat:
    """A private Telegram chat through the fake Bot API and the real adapter."""

    def __init__(self, server: FakeTelegram, user_id: int = 42, **settings: Any) -> None:
        self.server = server
        self.user_id = user_id
        self.settings = settings

    @property
    def sections(self) -> dict[str, Any]:
        platform = {
            "enabled": True,
            "token": self.server.token,
            "base_url": self.server.base_url,
            "allowed_users": [self.user_id],
            **self.settings,
        }
        return {"platforms": {"telegram": platform}}

    def gateway(self, config: Config) -> AbstractAsyncContextManager[Gateway]:
        return telegram_gateway(config)

    async def say(self, text: str) -> None:
        self.server.push_text(self.user_id, text)

    async def wait_sent(self, count: int) -> None:
        await self.server.wait_sent(count)

    def shown(self) -> list[str]:
        return [visible(self.server.shown(message)) for message in self.server.sent]


async def run_chat(
    tmp_path: Path,
    server: _LocalServer,
    *,
    turns: int = 50,
    language: str = "en",
    context_length: int | None = None,
    new_at: int | None = None,
    seed: int = 7,
    chat: Chat | None = None,
    model: dict[str, Any] | None = None,
) -> Outcome:
    """``turns`` messages through a gateway to ``server``; facts planted in the first
    turns, asked back in the last ones (and ``/new`` sent before turn ``new_at``);
    ``model`` adds keys to the config's ``model:``."""
    rng = random.Random(seed)
    facts = FACTS[language]
    server.responder = summarizing(model_answer(language, rng))
    settings: dict[str, Any] = {"name": server.model, **(model or {})}
    if context_length is not None:
        settings["context_length"] = context_length
    chat = chat or RecordingChat()
    config = make_config(tmp_path, server, model=settings, **chat.sections)
    outcome = Outcome()
    recall_from = turns - len(facts)
    async with chat.gateway(config) as gateway:

        async def exchange(text: str) -> list[str]:
            """Say ``text``; what the bot sent back once it is done with it."""
            before = len(chat.shown())
            await chat.say(text)
            await chat.wait_sent(before + 1)
            await turns_done(gateway)
            return chat.shown()[before:]

        for turn in range(turns):
            if turn == new_at:
                await exchange("/new")
            if turn < len(facts):
                text = f"fact: #{turn} {facts[turn]}. " + text_of_length(rng, language, 200)
            elif turn >= recall_from:
                text = f"recall {turn - recall_from}"
                outcome.asked += 1
            else:
                text = text_of_length(rng, language, rng.randint(150, 600))
            replies = await exchange(text)
            outcome.turns += 1
            failed = [r for r in replies if any(marker in r for marker in ERRORS)]
            outcome.errors += [f"turn {turn}: {r}" for r in failed]
            outcome.answered += not failed
            number = turn - recall_from
            if turn >= recall_from and f"is: {facts[number]}" in replies[-1]:
                outcome.recalled += 1
    outcome.refusals = server.refusals
    outcome.cuts = len(getattr(server, "cuts", []))
    outcome.clipped = getattr(server, "clipped", 0)
    outcome.compressions = sum(1 for r in server.requests if is_summary_request(r))
    answers = [r for r in server.requests if is_turn_request(r)]
    outcome.max_prompt = max((r.sent_tokens or r.prompt_tokens) / server.served for r in answers)
    outcome.tool_share = max(
        server.tokens.text(json.dumps(r.body.get("tools") or [])) / server.served for r in answers
    )
    outcome.max_fill = max(
        ((r.sent_tokens or r.prompt_tokens) + r.max_tokens) / server.served for r in answers
    )
    return outcome
