"""The context engine: decides when a conversation must shrink, and shrinks it.

This is a public API for plugin authors (docs/design.md#context-engine). The built-in engine is
:class:`agent.context_compressor.ContextCompressor`; ``context.engine`` in config picks
another one by name (see :func:`resolve_context_engine`).

Messages are OpenAI-style dicts (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
``name``). An engine never writes anywhere: :meth:`ContextEngine.compress` returns the new
list, and the caller commits it to the session store in one transaction (the originals
are archived, never deleted) and emits ``session:compress``.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.messages import JSON, Message, ToolSchema
from agent.providers.base import Usage

log = logging.getLogger(__name__)

CommitStatus = Literal["committed", "aborted", "failed", "skipped", "blocked"]
#: Why an attempt did not produce a clean LLM summary (docs/design.md#failure-ladder).
FailureClass = Literal[
    # nothing was done
    "disabled",
    "skipped:in_progress",
    "too_few_messages",
    "nothing_new",
    "blocked:cooldown",
    "blocked:ineffective",
    "internal_error",
    # the summary call failed; nothing changed
    "summary_timeout",
    "summary_length",
    "summary_malformed",
    "summary_empty",
    "summary_overload_failure",
    "summary_auth",
    "summary_quota",
    "summary_network",
    "summary_other",
    # a budget refused the summary call before it was made; nothing changed
    "summary_budget",
    # committed, but not with the configured model's summary
    "aux_model_fallback",
    "summary_timeout_fallback",
    "summary_overload_degraded",
    "summary_failed_fallback",
    "cooldown_fallback",
]
Method = Literal["llm_summary", "aux_fallback_main", "deterministic_fallback", "none"]
TriggerSource = Literal[
    "manual",
    "idle",
    "turn_start_threshold",
    "pre_api",
    "post_tool",
    "gateway_hygiene",
    "overflow",
    "auto",
]


@dataclass(frozen=True)
class CompressionResult:
    """What one call to :meth:`ContextEngine.compress` did.

    ``messages`` is the list to continue with: the compacted list when ``committed``,
    otherwise the input unchanged. ``notice`` is a short, secret-free sentence meant for
    the user (e.g. that the summary failed and ``/compress`` retries), or None.
    """

    messages: list[Message]
    committed: bool
    commit_status: CommitStatus
    method: Method = "none"
    failure_class: FailureClass | None = None
    trigger_source: str = "auto"
    attempt_id: str = ""
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tool_results_pruned: int = 0
    summary: str | None = None
    notice: str | None = None


class ContextEngine(ABC):
    """Keeps a conversation inside the model's context window.

    One instance serves one session. The caller reports every provider response through
    :meth:`update_from_response`, asks :meth:`should_compress` at its gates (turn start,
    before each API call, after tool results) and calls :meth:`compress` when it says yes
    — or unconditionally with ``force=True`` for a manual ``/compress``.
    """

    #: The name ``context.engine`` selects this engine by.
    name: str = ""
    #: The model's context window in tokens.
    context_length: int = 0
    #: Prompt tokens at which :meth:`should_compress` answers yes.
    threshold_tokens: int = 0
    #: Compressions committed in this session so far.
    compression_count: int = 0
    #: Prompt tokens reported by the provider for the last response (0 before any).
    last_prompt_tokens: int = 0

    @abstractmethod
    def update_model(self, model: str, context_length: int, provider: str | None = None) -> None:
        """The session now talks to ``model`` with this window; re-derive thresholds."""

    @abstractmethod
    def update_from_response(self, usage: Usage) -> None:
        """Record the provider's usage for the response just received."""

    def calibrate(self, ratio: float) -> None:  # noqa: B027 - optional: most engines need not
        """The server counts ``ratio`` tokens per token of the rough estimate
        (docs/design.md#calibration); an engine that measures rows by the estimate scales
        them by it. Called whenever the ratio changes."""

    @abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Whether the context is at or past the threshold.

        ``prompt_tokens`` overrides the last reading (callers pass the usage-anchored
        count or an estimate of the list they are about to send).
        """

    @abstractmethod
    async def compress(
        self,
        messages: list[Message],
        *,
        focus: str | None = None,
        force: bool = False,
        trigger_source: str = "auto",
    ) -> CompressionResult:
        """Return a smaller list that carries the same conversation forward.

        ``force`` is a user's explicit request: it bypasses (and clears) any cooldown.
        ``focus`` is an optional topic the summary should favour.
        """

    def tools(self) -> list[ToolSchema]:
        """OpenAI-style tool schemas this engine offers the agent (none by default)."""
        return []

    async def call_tool(self, name: str, arguments: JSON) -> str:
        """Run one of :meth:`tools`; returns plain text for the model."""
        raise KeyError(name)

    def on_session_start(self, session_id: str) -> None:  # noqa: B027 - optional hook
        """A session was opened (or reopened after a restart) with this engine."""

    def on_session_reset(self) -> None:  # noqa: B027 - optional hook
        """The user started over (``/new``); forget per-conversation state."""

    def export_state(self) -> JSON:
        """JSON-safe state to persist on the session row (cooldowns, counters).

        It is handed back through :meth:`restore_state` when the session is reopened, so
        an engine paces itself across turns and restarts.
        """
        return {"compression_count": self.compression_count}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`export_state` returned earlier."""
        self.compression_count = int(state.get("compression_count", 0))


EngineFactory = Callable[..., ContextEngine]

_registered: dict[str, EngineFactory] = {}


def register_context_engine(name: str, factory: EngineFactory) -> None:
    """Make an engine selectable as ``context.engine: <name>``.

    Registering never activates it: only the config does. ``factory`` is called with the
    same keyword arguments as the built-in engine's constructor.
    """
    if name == "compressor":
        raise ValueError("'compressor' is the built-in engine and cannot be replaced")
    _registered[name] = factory


@dataclass(frozen=True)
class EngineChoice:
    """The factory to build engines with, and what was asked for versus what was found."""

    factory: EngineFactory
    requested: str
    resolved: str
    warnings: tuple[str, ...] = field(default=())


def resolve_context_engine(
    name: str, builtin: EngineFactory, plugin_dirs: list[Path] | tuple[Path, ...] = ()
) -> EngineChoice:
    """Find the engine called ``name`` (docs/design.md#context-engine).

    Order: ``compressor`` is always the built-in; then ``<dir>/context_engine/<name>/``
    under each plugin dir (a package whose ``__init__`` defines ``create_engine`` or
    calls :func:`register_context_engine`); then engines registered in-process; else the
    built-in, with a warning.
    """
    if name in ("", "compressor"):
        return EngineChoice(builtin, name or "compressor", "compressor")
    for base in plugin_dirs:
        package = Path(base) / "context_engine" / name
        if (package / "__init__.py").is_file():
            module = _load_plugin(name, package)
            factory = getattr(module, "create_engine", None) or _registered.get(name)
            if factory is not None:
                return EngineChoice(factory, name, name)
    if name in _registered:
        return EngineChoice(_registered[name], name, name)
    warning = f"context engine {name!r} not found; using the built-in compressor"
    log.warning(warning)
    return EngineChoice(builtin, name, "compressor", (warning,))


def _load_plugin(name: str, package: Path) -> Any:
    module_name = f"nightowl_context_engine_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
