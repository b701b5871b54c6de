"""How many tokens a model's context window holds (docs/design.md#window-resolution, #overflow-errors).

Resolution, highest first:

1. an explicit ``model.context_length`` from config — unless the provider confirmed a
   smaller window: a request the server refuses (or silently cuts) helps nobody, so the
   smaller one wins;
2. a limit the provider confirmed — what the server said it serves when asked
   (docs/design.md#served-window), the window stated in an overflow error, or one a
   silently cut prompt showed — kept in ``<data_dir>/context_length_cache.yaml``. It is
   authoritative even when it is below the static table: the server we talk to is the one
   that counts;
3. the static table of known model families (longest matching key wins) — capped by
   what the server says the model declares, when it said that much;
4. :data:`agent.window_table.DEFAULT_CONTEXT_LENGTH`.

A failed ask is never written down; the same endpoint and model are asked again only
after a five-minute pause kept in memory. The cache file is read once and written only
when a limit is learned (atomically: temp file + ``os.replace``), so resolving a window is
a dictionary lookup on the hot path.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from agent.messages import JSON
from agent.served_window import SERVERS, ServedWindow, Server
from agent.window_table import DEFAULT_CONTEXT_LENGTH, static_context_length

log = logging.getLogger(__name__)

CACHE_FILE_NAME = "context_length_cache.yaml"
#: Seconds a failed probe of one endpoint + model waits before it may run again.
PROBE_RETRY_PAUSE_SECONDS = 300.0
#: Limits below this are not believed (a misparsed error message, a bogus probe answer).
MIN_PLAUSIBLE_LIMIT = 512

Source = Literal["override", "confirmed", "declared", "table", "default"]
#: How a confirmed window was learned: the server said so when asked, an overflow error
#: stated it, a silently cut prompt showed it, or the operator wrote it into the file.
How = Literal["served", "overflow", "truncation", "manual"]
# "probe" is how files written before "served" say it.
_HOWS: dict[str, How] = {
    "served": "served",
    "probe": "served",
    "overflow": "overflow",
    "truncation": "truncation",
    "manual": "manual",
}
#: Seconds before a server that had not loaded the model is asked again (it may never).
NOT_LOADED_PAUSE_SECONDS = 60.0


@dataclass(frozen=True)
class ResolvedWindow:
    """A window and where it came from (for ``/status`` and ``doctor``)."""

    tokens: int
    source: Source
    #: For a confirmed window: how it was learned, and which kind of server said so.
    how: How | None = None
    server: Server | None = None


@dataclass(frozen=True)
class Confirmed:
    """A window the provider confirmed for one endpoint and model, as the file keeps it."""

    limit: int
    how: How
    server: Server | None = None
    learned_at: int = 0

    def to_yaml(self) -> JSON:
        entry: JSON = {"limit": self.limit, "source": self.how}
        if self.server:
            entry["server"] = self.server
        return entry | {"learned_at": self.learned_at}

    @classmethod
    def from_yaml(cls, value: Any) -> Confirmed | None:
        if isinstance(value, int):  # a bare number from a hand edit
            return cls(value, "manual")
        if not isinstance(value, dict) or not isinstance(value.get("limit"), int):
            return None
        server = value.get("server")
        return cls(
            int(value["limit"]),
            _HOWS.get(str(value.get("source")), "manual"),
            server if server in SERVERS else None,
            int(value.get("learned_at") or 0),
        )


def _endpoint_key(model: str, provider: str, base_url: str | None) -> str:
    return f"{provider.strip().lower()}|{(base_url or 'default').rstrip('/')}|{model.strip()}"


class ContextLengthResolver:
    """Resolves context windows and remembers the ones providers confirm.

    One instance per process (it caches the YAML file in memory). ``clock`` is a
    monotonic-style clock for the in-memory probe pause; it never touches the file. A
    window only a cut prompt showed (no server said it) stays in memory: such a lesson
    is the least certain, and a restart should be able to undo it.
    """

    def __init__(
        self,
        data_dir: Path,
        default: int = DEFAULT_CONTEXT_LENGTH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(data_dir).expanduser() / CACHE_FILE_NAME
        self.default = default
        self._clock = clock
        self._confirmed: dict[str, Confirmed] | None = None
        #: Windows cut prompts showed, in this process only (docs/design.md#silent-truncation).
        self._cuts: dict[str, Confirmed] = {}
        self._paused_until: dict[str, float] = {}
        #: What a server said its model declares (an upper bound), in memory only.
        self._declared: dict[str, int] = {}
        #: Endpoints to ask again at the next chance (unreachable since, or the model was
        #: not loaded yet when asked).
        self._ask_again: set[str] = set()
        self._not_loaded_until: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- resolution ----------------------------------------------------------------------

    def resolve(
        self, model: str, provider: str, base_url: str | None = None, override: int | None = None
    ) -> int:
        """The window for ``model`` on this endpoint (docs/design.md#window-resolution)."""
        return self.resolve_with_source(model, provider, base_url, override).tokens

    def resolve_with_source(
        self, model: str, provider: str, base_url: str | None = None, override: int | None = None
    ) -> ResolvedWindow:
        """Like :meth:`resolve`, and says which rule decided."""
        key = _endpoint_key(model, provider, base_url)
        entry = self._entry(key)
        if entry is not None and (not override or entry.limit < override):
            return ResolvedWindow(entry.limit, "confirmed", entry.how, entry.server)
        if override:
            resolved = ResolvedWindow(int(override), "override")
        else:
            table = static_context_length(model)
            resolved = (
                ResolvedWindow(table, "table") if table else ResolvedWindow(self.default, "default")
            )
        declared = self._declared.get(key)
        if declared is not None and declared < resolved.tokens:
            return ResolvedWindow(declared, "declared")  # never more than the model has
        return resolved

    def confirmed_limit(self, model: str, provider: str, base_url: str | None = None) -> int | None:
        """The provider-confirmed window for this endpoint and model, if one was learned."""
        entry = self._entry(_endpoint_key(model, provider, base_url))
        return entry.limit if entry else None

    def _entry(self, key: str) -> Confirmed | None:
        """The smaller of what the file says and what a cut showed in this process."""
        stored, cut = self._entries().get(key), self._cuts.get(key)
        if stored is None or (cut is not None and cut.limit < stored.limit):
            return cut
        return stored

    # -- asking the server (docs/design.md#served-window) ----------------------------------

    async def ask_server(
        self,
        model: str,
        provider: str,
        base_url: str | None,
        ask: Callable[[], Awaitable[ServedWindow | None]],
    ) -> ServedWindow | None:
        """Ask the server what it serves (``ask``, e.g. ``Provider.served_window``) unless a
        recent ask of this endpoint paused it; remember the answer.

        A window the server serves is written down, larger or smaller than what was known:
        the server is the one that counts (what a cut showed is forgotten). A model it
        declares but does not say it serves (an Ollama model not loaded yet) only caps the
        window, in memory, and the endpoint is asked again after a minute. No answer
        pauses asking for five minutes.
        """
        key = _endpoint_key(model, provider, base_url)
        if not self.probe_allowed(model, provider, base_url):
            return None
        self._ask_again.discard(key)
        try:
            served = await ask()
        except Exception as exc:  # asking is best effort: the table still answers
            log.info("asking %s for its window failed: %s", model, type(exc).__name__)
            served = None
        if served is None:
            self.note_probe_failed(model, provider, base_url)
            return None
        if served.declared:
            self._declared[key] = served.declared
        if served.tokens:
            self._cuts.pop(key, None)
            self._store(model, provider, base_url, served.tokens, "served", served.server)
        else:
            self._ask_again.add(key)
            self._not_loaded_until[key] = self._clock() + NOT_LOADED_PAUSE_SECONDS
        return served

    def served(self, model: str, provider: str, base_url: str | None = None) -> ServedWindow | None:
        """What the server last said it serves this model with, if it said."""
        entry = self._entries().get(_endpoint_key(model, provider, base_url))
        if entry is None or entry.how != "served" or entry.server is None:
            return None
        return ServedWindow(entry.server, entry.limit)

    def wants_asking(
        self, model: str, provider: str, base_url: str | None = None, *, load: bool = False
    ) -> bool:
        """Whether this endpoint should be asked again now (and may be). A server that had
        not loaded the model is asked again after a minute — at once when the ask will
        have it load the model (``load``)."""
        key = _endpoint_key(model, provider, base_url)
        if key not in self._ask_again or not self.probe_allowed(model, provider, base_url):
            return False
        return load or self._clock() >= self._not_loaded_until.get(key, 0.0)

    def note_unreachable(self, model: str, provider: str, base_url: str | None = None) -> None:
        """The endpoint could not be reached: ask it again once it answers (a restarted
        server may serve another window)."""
        self._ask_again.add(_endpoint_key(model, provider, base_url))

    # -- learning ------------------------------------------------------------------------

    def learn_limit(
        self, model: str, provider: str, base_url: str | None, limit: int, how: How = "overflow"
    ) -> bool:
        """Remember the window an overflow error stated, or a cut prompt showed
        (docs/design.md#overflow-errors, #silent-truncation; the latter in this process
        only). Returns whether it was taken."""
        if how != "truncation":
            return self._store(model, provider, base_url, limit, how)
        if limit < MIN_PLAUSIBLE_LIMIT:
            return False
        self._cuts[_endpoint_key(model, provider, base_url)] = Confirmed(limit, how)
        log.info(
            "context length of %s via %s is %d for now (from a cut prompt)", model, provider, limit
        )
        return True

    def confirm(self, model: str, provider: str, base_url: str | None, limit: int) -> bool:
        """Remember a window the server serves (as if it had said so when asked)."""
        return self._store(model, provider, base_url, limit, "served")

    def probe_allowed(self, model: str, provider: str, base_url: str | None = None) -> bool:
        """False while a recent failed probe of this endpoint + model is pausing retries."""
        until = self._paused_until.get(_endpoint_key(model, provider, base_url))
        return until is None or self._clock() >= until

    def note_probe_failed(self, model: str, provider: str, base_url: str | None = None) -> None:
        """Pause probes of this endpoint + model for five minutes (in memory only)."""
        key = _endpoint_key(model, provider, base_url)
        self._paused_until[key] = self._clock() + PROBE_RETRY_PAUSE_SECONDS

    def forget(self, model: str, provider: str, base_url: str | None = None) -> None:
        """Drop a learned limit (and any probe pause), e.g. after the server was reconfigured."""
        key = _endpoint_key(model, provider, base_url)
        self._paused_until.pop(key, None)
        self._declared.pop(key, None)
        self._cuts.pop(key, None)
        with self._lock:
            entries = self._entries()
            if entries.pop(key, None) is not None:
                self._write(entries)

    # -- the file ------------------------------------------------------------------------

    def _store(
        self,
        model: str,
        provider: str,
        base_url: str | None,
        limit: int,
        how: How,
        server: Server | None = None,
    ) -> bool:
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            return False
        if limit < MIN_PLAUSIBLE_LIMIT:
            log.warning("ignoring an implausible context length %d for %s", limit, model)
            return False
        key = _endpoint_key(model, provider, base_url)
        self._paused_until.pop(key, None)
        entry = Confirmed(limit, how, server, int(time.time()))
        with self._lock:
            entries = self._entries()
            current = entries.get(key)
            if current is not None and (current.limit, current.how, current.server) == (
                limit,
                how,
                server,
            ):
                return True
            entries[key] = entry
            self._write(entries)
        log.info("context length of %s via %s is %d (from %s)", model, provider, limit, how)
        return True

    def _entries(self) -> dict[str, Confirmed]:
        if self._confirmed is None:
            self._confirmed = self._read()
        return self._confirmed

    def _read(self) -> dict[str, Confirmed]:
        try:
            raw = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, yaml.YAMLError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return {}
        section = raw.get("context_lengths") if isinstance(raw, dict) else None
        entries: dict[str, Confirmed] = {}
        for key, value in (section or {}).items():
            entry = Confirmed.from_yaml(value)
            if entry is not None:
                entries[str(key)] = entry
        return entries

    def _write(self, entries: dict[str, Confirmed]) -> None:
        table = {key: entry.to_yaml() for key, entry in entries.items()}
        text = yaml.safe_dump({"version": 1, "context_lengths": table}, sort_keys=True)
        try:
            # The data dir is private (0700), and mkstemp's 0600 is the cache's mode from
            # its first byte (docs/design.md#private-files).
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(
                dir=self.path.parent, prefix=".context_length_", suffix=".tmp"
            )
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(temp, self.path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            # The limit still applies in memory for this process; only persistence failed.
            log.warning("could not write %s: %s", self.path, exc)
