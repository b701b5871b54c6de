"""Per-chat model choice: ``/model`` shows the chat's model and the choices, ``/model NAME``
switches it (docs/design.md#model-choice).

The choice is kept in the store, apart from the chat's sessions, so it outlives ``/new``
and restarts. A switch runs in the session's lane (never beside a turn): the choice is
stored, the session's runtime is dropped so the next one is built for the new model
(its provider, its window, its output limit) — and when the conversation is now over
the new window's threshold, it is compressed right away, by the new model (or the
summary model), before any request could go to it. The request view fits every prompt
to the window in any case (docs/design.md#request-view): a failed summary never turns
into an overflow, and nothing is deleted.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from agent.model_metadata import CACHE_FILE_NAME, ContextLengthResolver, ResolvedWindow
from agent.providers import Provider, ProviderError
from agent.served_window import ServedWindow, enlarge_hint, is_listed
from agent.urls import shown_url
from gateway.config.models import DEFAULT_CHOICE, ModelChoice, ModelRoute
from gateway.config.routes import model_label
from gateway.conversation.hygiene import measure_tokens
from gateway.conversation.lanes import Lanes
from gateway.conversation.sessions import SessionRegistry
from gateway.store import ConversationStore

log = logging.getLogger(__name__)


class ModelChoices:
    """The models a chat may use, their providers and their windows now."""

    def __init__(
        self,
        choices: dict[str, ModelChoice],
        providers: dict[str, Provider],
        windows: ContextLengthResolver,
    ) -> None:
        self.choices = choices
        #: By choice: the configured model's provider under ``default``.
        self.providers = providers
        self.windows = windows
        #: What servers that did not have a choice's model said at start, by route.
        self.missing: dict[ModelRoute, ServedWindow] = {}

    def get(self, key: str | None) -> ModelChoice:
        """The choice named ``key``; the configured model for None or a name no longer
        in the config (a chat keeps working when its model is taken out)."""
        return self.choices.get(key or DEFAULT_CHOICE) or self.choices[DEFAULT_CHOICE]

    def find(self, name: str) -> ModelChoice | None:
        """What ``/model NAME`` means: a choice's name, or its model's (any case)."""
        wanted = name.strip().lower()
        for choice in self.choices.values():
            if wanted in (choice.key.lower(), choice.route.name.lower()):
                return choice
        return None

    def provider(self, choice: ModelChoice) -> Provider:
        return self.providers[choice.key]

    def window(self, choice: ModelChoice) -> int:
        """The model's window now (docs/design.md#window-resolution)."""
        return self.resolved(choice).tokens

    def resolved(self, choice: ModelChoice) -> ResolvedWindow:
        route = choice.route
        return self.windows.resolve_with_source(
            route.name, route.provider, route.base_url, override=choice.context_length
        )

    def window_note(self, choice: ModelChoice) -> WindowNote:
        """Where the window came from, as ``/status`` says it after the window — and when
        the server serves less than the config says, or had no such model, what to change."""
        served = self.missing.get(choice.route)
        if served is not None:
            fix = served.fix(choice.route.name, _section(choice) + ".name")
            return WindowNote(
                f"a guess: at start the server had no model {choice.route.name}, "
                f"{served.listed}; {fix}"
            )
        return window_note(self.resolved(choice), choice.context_length, _config_key(choice))

    def describe(self, choice: ModelChoice) -> str:
        route = choice.route
        return f"{model_label(route.name, route.provider, route.base_url)}, {self.window(choice):,} tokens"

    async def ask_servers(
        self, within: float, *also: Callable[[], Coroutine[Any, Any, None]]
    ) -> set[asyncio.Task[None]]:
        """Ask every model's server what window it serves (docs/design.md#served-window),
        and do ``also`` (the summary model's ask) beside them, waiting at most ``within``
        seconds; the asks still under way are returned, to finish in the background. A
        server that serves less than the config says, or does not have the model at all,
        is told to the operator in the log, once, when it answers."""
        asks: dict[str, asyncio.Task[None]] = {
            f"also {n}": asyncio.create_task(ask()) for n, ask in enumerate(also)
        }
        listings: dict[str, asyncio.Task[None]] = {}
        for choice in self.choices.values():
            route = choice.route
            key = f"{route.provider}|{route.base_url}|{route.name}"
            if key not in asks:
                asks[key] = asyncio.create_task(self._ask(choice))
            api = f"{route.provider}|{route.base_url}"  # one listing per API
            if not self.provider(choice).may_cut_prompts and api not in listings:
                listings[api] = asyncio.create_task(self._ask_api(choice))
        # Every config has a choice, so something is asked. A hosted API's listing is only
        # told in the log: the start never waits for it.
        _, pending = await asyncio.wait(asks.values(), timeout=within)
        return pending | set(listings.values())

    async def _ask(self, asked: ModelChoice) -> None:
        route = asked.route
        served = await self.windows.ask_server(
            route.name, route.provider, route.base_url, self.provider(asked).served_window
        )
        if served is not None and not served.has_model:
            self.missing[route] = served
            log.warning("%s", missing_model(asked, served))
        elif served is not None:
            self.missing.pop(route, None)
        for choice in self.choices.values():  # every choice on that endpoint and model
            note = self.window_note(choice)
            if choice.route == route and note.served_less:
                log.warning("%s: %s", _section(choice), note.text)

    async def _ask_api(self, asked: ModelChoice) -> None:
        """A hosted API's model listing, which costs nothing: a key it refuses, an API
        that does not answer, or (OpenAI's, whose listing is whole) a model it does not
        list is told at start, not by the first message's failure
        (docs/design.md#hosted-api-at-start)."""
        route, provider = asked.route, self.provider(asked)
        label = f"{_section(asked)}: {model_label(route.name, route.provider, route.base_url)}"
        try:
            listed = await provider.listed_models()
        except ProviderError as exc:
            if exc.kind == "auth" and exc.status == 401:
                log.error(
                    "%s: the API refused the key at start (%s): every reply fails until"
                    " %s.api_key holds one it takes (`nightowl doctor` tries it)",
                    label,
                    exc,
                    _section(asked),
                )
            elif exc.kind == "auth":  # a key restricted to chatting may not list models
                log.warning(
                    "%s: the API would not list its models for this key (%s); a key"
                    " restricted to chat completions does that (`nightowl doctor` tries a"
                    " reply)",
                    label,
                    exc,
                )
            else:
                log.warning("%s: the API did not answer at start (%s)", label, exc)
            return
        if listed and provider.name == "openai" and not is_listed(route.name, listed):
            near = difflib.get_close_matches(route.name, listed, n=3, cutoff=0.6)
            log.warning(
                "%s: the API does not list that model for this key, so every reply fails:"
                " set %s.name to one it lists%s",
                label,
                _section(asked),
                f" ({', '.join(near)}?)" if near else "",
            )


def missing_model(choice: ModelChoice, served: ServedWindow) -> str:
    """What to do about a server that does not have the model, with the names it has."""
    route = choice.route
    replies = (
        "every reply" if choice.key == DEFAULT_CHOICE else f"every reply of /model {choice.key}"
    )
    where = shown_url(route.base_url or "")
    return served.missing(where, route.name, _section(choice) + ".name", f"{replies} fails")


def _section(choice: ModelChoice) -> str:
    """The config section of a choice: ``model``, ``models.<key>``."""
    return "model" if choice.key == DEFAULT_CHOICE else f"models.{choice.key}"


def _config_key(choice: ModelChoice) -> str:
    return f"{_section(choice)}.context_length"


@dataclass(frozen=True)
class WindowNote:
    """Where a window came from, in a few words; ``served_less``: the server serves less
    than the config says (the operator is told what to change)."""

    text: str
    served_less: bool = False


def window_note(resolved: ResolvedWindow, configured: int | None, config_key: str) -> WindowNote:
    """Where the window came from (docs/design.md#window-resolution); when the server
    confirmed less than ``configured``, that and what to change."""
    smaller = bool(configured) and resolved.tokens < (configured or 0)
    if resolved.source == "confirmed" and resolved.how == "served":
        if smaller:
            hint = enlarge_hint(resolved.server, configured or resolved.tokens)
            text = (
                f"the server serves {resolved.tokens:,} tokens, not {configured:,}: {hint}, "
                f"or lower {config_key}"
            )
            return WindowNote(text, served_less=True)
        return WindowNote(f"what {resolved.server or 'the server'} said it serves")
    if resolved.source == "confirmed":
        learned = {
            "overflow": "learned from an overflow error",
            "truncation": "shown by a prompt the server cut",
        }.get(resolved.how or "", f"written in {CACHE_FILE_NAME}")
        return WindowNote(f"{learned}; {config_key} says {configured:,}" if smaller else learned)
    return WindowNote(
        {
            "override": f"set by {config_key}",
            "declared": "what the model declares; the server has not said what it serves yet",
            "table": "the table of known models",
            "default": f"a cautious guess: set {config_key}",
        }[resolved.source]
    )


class ModelCommand:
    """``/model`` and ``/model NAME`` for one gateway."""

    def __init__(
        self,
        choices: ModelChoices,
        store: ConversationStore,
        sessions: SessionRegistry,
        lanes: Lanes,
    ) -> None:
        self.choices = choices
        self.store = store
        self.sessions = sessions
        self.lanes = lanes

    async def show(self, key: str) -> str:
        current = self.choices.get(await self.store.chat_model(key))
        lines = [f"This chat uses {current.key}: {self.choices.describe(current)}."]
        if len(self.choices.choices) == 1:
            lines.append("No other models are configured (models: in config.yaml).")
            return "\n".join(lines)
        lines.append("Choices:")
        for choice in self.choices.choices.values():
            mark = " ← this chat" if choice.key == current.key else ""
            lines.append(f"• {choice.key} — {self.choices.describe(choice)}{mark}")
        lines.append("Switch with /model NAME.")
        return "\n".join(lines)

    async def current(self, key: str, *, with_source: bool = False) -> str:
        """The model the chat ``key`` uses and its window, as ``/model`` says it;
        ``with_source``: and where the window came from, as ``/status`` says it."""
        choice = self.choices.get(await self.store.chat_model(key))
        described = self.choices.describe(choice)
        return (
            f"{described} ({self.choices.window_note(choice).text})" if with_source else described
        )

    async def chosen(self, key: str) -> str | None:
        """The name of the choice the chat ``key`` switched to (None: the default)."""
        choice = self.choices.get(await self.store.chat_model(key))
        return None if choice.key == DEFAULT_CHOICE else choice.key

    async def switch(self, key: str, name: str) -> str:
        """Switch the chat to ``name``, in its lane; what to tell the user."""
        choice = self.choices.find(name)
        if choice is None:
            names = ", ".join(self.choices.choices)
            return f"There is no model called {name!r} here. Choices: {names}."

        async def job() -> str:
            stored = None if choice.key == DEFAULT_CHOICE else choice.key
            await self.store.choose_model(key, stored, choice.route.name)
            self.sessions.drop(key)  # the next runtime is built for the new model
            text = f"This chat now uses {choice.key}: {self.choices.describe(choice)}."
            return text + await self._fit(key)

        return await self.lanes.submit(key, job)

    async def _fit(self, key: str) -> str:
        """Compress now when the conversation is over the new window's threshold."""
        runtime = await self.sessions.existing(key)
        if runtime is None:
            return ""
        transcript = await self.sessions.transcript(runtime)
        tokens = measure_tokens(runtime, transcript, None).tokens
        engine = runtime.engine
        if len(transcript.messages) < 4 or tokens < engine.threshold_tokens:
            return ""
        result = await transcript.compress(trigger_source="model_switch")
        if result.committed:
            return (
                f" The conversation was summarized to fit its window: {result.tokens_before:,}"
                f" → {result.tokens_after:,} tokens; older messages are archived and searchable."
            )
        return (
            " The conversation is bigger than this model's window; I'll summarize it before "
            "the next answer (every message stays archived)."
        )
