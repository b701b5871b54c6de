"""What a server teaches about its window, and when to ask it (docs/design.md#served-window,
#overflow-errors, #silent-truncation, #calibration).

An overflow error may state the window and the prompt's size as the server counted it; a
cut prompt shows what the server kept; a server can be asked what it serves. Each lesson
goes into the resolver (kept across restarts) and the session's engine at once.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Protocol

from agent.calibration import Calibration
from agent.context_engine import ContextEngine
from agent.model_metadata import ContextLengthResolver, How
from agent.providers.base import Provider, ProviderError, Usage
from agent.served_window import ServedWindow
from agent.silent_cut import TRUNCATED, cut_by_server
from agent.window import FittedRequest, Window

#: A retry with a smaller reply is worth it only with room for at least this many tokens.
MIN_REPLY_TOKENS = 256


class Learner(Protocol):
    """What the lessons need of an agent (:class:`agent.loop.Agent`)."""

    provider: Provider
    engine: ContextEngine
    windows: ContextLengthResolver | None
    calibration: Calibration

    @property
    def window(self) -> Window: ...

    def observe(self, estimate: int, reported: int) -> None: ...


class WindowLessons:
    """One agent's lessons about its server's window."""

    def __init__(self, agent: Learner) -> None:
        self.agent = agent

    async def ask(self, *, load: bool = False) -> ServedWindow | None:
        """Ask the server what window it serves now (docs/design.md#served-window);
        ``load``: have it load the model first, if that is how it would say."""
        windows, provider = self.agent.windows, self.agent.provider
        if windows is None:
            return None
        return await windows.ask_server(
            provider.model,
            provider.name,
            provider.base_url,
            functools.partial(provider.served_window, load=load),
        )

    async def ask_if_due(self, *, load: bool = False) -> None:
        """Ask again a server that was unreachable or had not loaded the model yet when
        asked — before a request (``load``: the request would load it anyway), or after an
        answer; a smaller window than assumed applies at once."""
        windows, provider = self.agent.windows, self.agent.provider
        if windows is None or not windows.wants_asking(
            provider.model, provider.name, provider.base_url, load=load
        ):
            return
        served = await self.ask(load=load)
        if served is not None and served.tokens:
            self.learn_limit(served.tokens, "served")

    def note_unreachable(self) -> None:
        windows, provider = self.agent.windows, self.agent.provider
        if windows is not None:
            windows.note_unreachable(provider.model, provider.name, provider.base_url)

    def served(self) -> ServedWindow | None:
        """What the server last said it serves, if it said."""
        windows, provider = self.agent.windows, self.agent.provider
        if windows is None:
            return None
        return windows.served(provider.model, provider.name, provider.base_url)

    async def was_cut(self, request: FittedRequest, usage: Usage, at_least: int | None) -> bool:
        """Whether the server answered a prompt it cut (docs/design.md#silent-truncation).
        Only servers that may do it are judged (OpenAI's and Anthropic's own APIs refuse
        instead): by the rule of the server, when it said what it serves; else by the
        counts — confirmed by asking the server, when it can be asked."""
        if not self.agent.provider.may_cut_prompts:
            return False
        known = self.served()
        if known is not None and known.has_cut(request.prompt_tokens, usage.prompt_tokens):
            return True
        if not cut_by_server(request, usage, at_least):
            return False
        served = await self.ask()
        if served is None or not served.tokens:
            return True  # it cannot say: the counts decide
        return served.confirms_cut(request.prompt_tokens, usage.prompt_tokens)

    async def learn(self, exc: ProviderError, sent: FittedRequest | None) -> bool:
        """Learn what an overflow of ``sent`` tells: the server's count of the prompt
        (calibration) and its window — stated, asked of the server, or shown by the cut.
        Returns whether anything the next request is fitted by changed."""
        agent = self.agent
        before = (agent.engine.context_length, agent.calibration.ratio)
        if exc.detail == TRUNCATED:
            await self.learn_cut(exc.prompt_tokens or 0, sent)
        else:
            if exc.prompt_tokens and sent is not None:
                agent.observe(sent.estimate, exc.prompt_tokens)
            served = None if exc.context_limit else await self.ask()
            limit = exc.context_limit or (served.tokens if served else None)
            if limit:
                self.learn_limit(limit, "overflow" if exc.context_limit else "served")
        return (agent.engine.context_length, agent.calibration.ratio) != before

    async def learn_cut(self, kept: int, sent: FittedRequest | None) -> None:
        """The server cut a prompt to ``kept`` tokens. Asked, it says what it serves: a
        smaller window than assumed applies; the window assumed, and the prompt was
        heavier than the estimate said — it counted at least that window (Ollama cuts only
        a prompt that fills its window), so the calibration rises. A server that cannot
        say holds at least what it kept: this process goes by that, and nothing is written
        down (docs/design.md#silent-truncation)."""
        answer = await self.ask()
        served = answer.tokens if answer is not None else None
        if served is None:
            self.learn_limit(kept, "truncation")
        elif served < self.agent.engine.context_length:
            self.learn_limit(served, "served")
        elif sent is not None:
            self.agent.observe(sent.estimate, served)

    def learn_limit(self, limit: int, how: How) -> None:
        """A smaller window applies to this session now, and is remembered (a window the
        server said it serves is stored by the ask already)."""
        engine, provider, windows = self.agent.engine, self.agent.provider, self.agent.windows
        if limit >= engine.context_length:
            return
        if windows is not None and how != "served":
            if not windows.learn_limit(
                provider.model, provider.name, provider.base_url, limit, how
            ):
                return  # implausible
        engine.update_model(provider.model, limit, provider.name)

    def smaller_reply(self, exc: ProviderError, sent: FittedRequest | None) -> FittedRequest | None:
        """``sent`` again, asking for a smaller reply that fits beside the prompt as the
        server counted it — when the server said so and the room is worth a reply
        (docs/design.md#overflow-recovery). Never more than was asked."""
        if sent is None or exc.prompt_tokens is None or exc.detail == TRUNCATED:
            return None
        window = self.agent.engine.context_length
        room = min(exc.context_limit or window, window) - exc.prompt_tokens
        smaller = min(room, sent.max_tokens - 1)
        if smaller < min(MIN_REPLY_TOKENS, self.agent.window.output_reserve):
            return None
        return replace(sent, prompt_tokens=exc.prompt_tokens, max_tokens=smaller)
