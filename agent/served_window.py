"""Ask a model server what window it really serves (docs/design.md#served-window).

Local servers serve a smaller window than the model declares, and say so only when asked:

- **Ollama** ``GET /api/ps`` lists each loaded model with the ``context_length`` it was
  loaded with (v0.10+); that is the window its OpenAI-compatible ``/v1`` serves, whatever a
  request says (``/v1`` ignores ``num_ctx``). ``POST /api/show`` gives a Modelfile's
  ``num_ctx`` in ``parameters`` (served, loaded or not) and
  ``model_info["<arch>.context_length"]``, only what the model declares — an upper bound
  (the server's default, ``OLLAMA_CONTEXT_LENGTH``, is not visible to a client). A model
  not loaded yet can be loaded by an empty ``POST /api/generate`` and asked again.
- **llama.cpp** ``GET /props``: ``default_generation_settings.n_ctx`` is one slot's window
  (``--ctx-size`` divided among ``--parallel`` slots); ``/v1/models``' ``meta.n_ctx_train``
  is the training window, larger.
- **LM Studio** ``GET /api/v0/models``: ``loaded_context_length`` of a loaded model,
  ``max_context_length`` declared.
- **vLLM** ``GET /v1/models``: ``max_model_len``; other OpenAI-compatible servers put
  ``context_length`` (or ``context_window``) there.

Each endpoint is tried in that order; a 404, a timeout or an odd body only moves on to
the next. Nothing here is sent to OpenAI's or Anthropic's own API: their windows are in
the static table.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx2

from agent.tls import tls_context
from agent.urls import shown_url

log = logging.getLogger(__name__)

Server = Literal["ollama", "llama.cpp", "lmstudio", "vllm", "openai-compatible"]
SERVERS: tuple[Server, ...] = ("ollama", "llama.cpp", "lmstudio", "vllm", "openai-compatible")

#: What to change on each server for a window of ``{tokens}`` (the operator's fix).
_ENLARGE: dict[str, str] = {
    "ollama": "set OLLAMA_CONTEXT_LENGTH={tokens} where Ollama runs"
    " (or PARAMETER num_ctx {tokens} in the model's Modelfile)",
    "llama.cpp": "start llama-server with --parallel 1 --ctx-size {tokens}"
    " (with more slots, --ctx-size is shared among them)",
    "lmstudio": "load the model with a context length of {tokens} in LM Studio",
    "vllm": "start vLLM with --max-model-len {tokens}",
}


def enlarge_hint(server: str | None, tokens: int) -> str:
    """How the operator gives ``server`` a window of ``tokens``, as they would type it."""
    template = _ENLARGE.get(server or "", "give the server a window of {tokens} tokens")
    return template.format(tokens=tokens)


#: Servers told to be silent in the log, until they answer again.
_SILENT: set[str] = set()

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ServedWindow:
    """What a server said about one model's window."""

    server: Server
    #: The window it serves this model with; None when it did not say (not loaded yet).
    tokens: int | None
    #: What the model declares (its training window): an upper bound, never served more.
    declared: int | None = None
    #: False: the server does not have this model at all (never pulled, a name typed
    #: wrong), and every request for it is refused; ``models`` are the ones it has (None:
    #: it did not say).
    has_model: bool = True
    models: tuple[str, ...] | None = ()

    @property
    def cuts_silently(self) -> bool:
        """Whether this server cuts a prompt longer than its window and answers anyway
        (Ollama; docs/design.md#silent-truncation) rather than refusing it."""
        return self.server == "ollama"

    def has_cut(self, sent: int, reported: int) -> bool:
        """Whether this server cut a prompt of about ``sent`` tokens that it counted as
        ``reported``. Ollama cuts only a prompt that fills its window: it drops old
        messages until the rest fits, then cuts tokens from the front to exactly
        ``num_ctx`` — or, from v0.30 with context shift, to ``num_ctx - (num_ctx - keep)
        // 2`` (``keep`` is 4, 5 with a BOS token; ``llm/llama_server.go``)."""
        if not self.cuts_silently or not self.tokens:
            return False
        window = self.tokens
        if sent > window and reported <= window:
            return True  # sized for a larger window than it serves
        if reported == window:
            return True  # a prompt that fills the whole window leaves no room to answer
        halves = {window - (window - keep) // 2 for keep in (4, 5)}
        return reported in halves and sent >= min(halves)

    def confirms_cut(self, sent: int, reported: int) -> bool:
        """Whether a cut the counts suggest can be this server's: it cuts silently, and it
        kept at least about half its window (Ollama never keeps less), or it serves less
        than was sent. A count below that is of what its cache did not hold (Ollama
        0.30.x before ollama/ollama#16428), not of a cut."""
        if not self.cuts_silently or not self.tokens:
            return False
        return sent > self.tokens or reported >= self.tokens // 2

    @property
    def listed(self) -> str:
        """The models a server without this one has: ``it has a, b``."""
        if self.models is None:
            return "it did not say which it has"
        return f"it has {', '.join(self.models)}" if self.models else "it has none"

    def fix(self, model: str, key: str = "model.name") -> str:
        """What the operator does about a server without ``model`` (config ``key``): the
        name it has in another case (names are case-sensitive), else one it has, or on
        Ollama the pull that fetches it."""
        same = [m for m in self.models or () if same_model(m.lower(), model.lower())]
        if same:
            return f"set {key} to {same[0]} (names are case-sensitive)"
        fix = f"set {key} to a model it has"
        return fix + (
            f", or fetch it with `ollama pull {model}`" if self.server == "ollama" else ""
        )

    def missing(self, where: str, model: str, key: str, so: str) -> str:
        """The log's sentence for a server at ``where`` without ``model``: what it has,
        what follows (``so``), and :meth:`fix` for config ``key``."""
        return (
            f"the model server at {where} has no model {model} ({self.listed}), so {so}: "
            f"{self.fix(model, key)}"
        )

    def hint(self, tokens: int) -> str:
        """How the operator gives this server a window of ``tokens``."""
        return enlarge_hint(self.server, tokens)


def server_root(base_url: str) -> str:
    """The server's root URL: ``base_url`` without a trailing ``/v1`` (Ollama's and llama.cpp's
    own endpoints live beside their OpenAI-compatible ones)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def ask_served_window(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 5.0,
    load_timeout: float | None = None,
) -> ServedWindow | None:
    """What the server at ``base_url`` says about ``model``'s window; None when it says
    nothing (no endpoint answers, or none knows the model).

    With ``load_timeout``, an Ollama that has not loaded the model yet is asked to load it
    (as the next request would) and then says the window it loaded it with."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = server_root(base_url)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, verify=tls_context()) as client:
        asker = _Http(client, load_timeout)
        for ask in (_ollama, _llama_cpp, _lmstudio, _openai_models):
            answer = await ask(asker, root, base_url.rstrip("/"), model)
            if answer is not None:
                _SILENT.discard(root)
                return answer
    if asker.answered:
        _SILENT.discard(root)
    elif asker.failure and root not in _SILENT:  # not one response: nothing listens there
        _SILENT.add(root)  # said once until it answers (the alerts ask every minute)
        log.warning(
            "the model server at %s does not answer (%s): replies fail until it does"
            " (is it running, and is that its address?)",
            shown_url(base_url),
            asker.failure,
        )
    return None


class _Http:
    """GET/POST JSON; any failure is None (the next endpoint is tried)."""

    def __init__(self, client: httpx2.AsyncClient, load_timeout: float | None = None) -> None:
        self.client = client
        #: How long a model may take to load; None: never ask for it.
        self.load_timeout = load_timeout
        #: Whether any request got an HTTP response (of any status), and why one did not.
        self.answered = False
        self.failure: str | None = None
        #: The status of the last response.
        self.status: int | None = None

    async def json(
        self, method: str, url: str, body: Any = None, timeout: float | None = None
    ) -> Any:
        try:
            response = await self.client.request(
                method,
                url,
                json=body,
                timeout=self.client.timeout if timeout is None else httpx2.Timeout(timeout),
            )
        except Exception as exc:  # asking is best effort: a bad URL, a reset, a timeout...
            log.debug("window probe %s %s: %s", method, url, type(exc).__name__)
            self.failure = self.failure or type(exc).__name__
            return None
        self.answered = True
        self.status = response.status_code
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None


def _is_vllm(entry: Mapping[str, Any]) -> bool:
    return entry.get("owned_by") == "vllm" or "max_model_len" in entry


def _names(names: Iterable[Any]) -> tuple[str, ...]:
    """The model names a server listed (at most ten, in its order)."""
    return tuple(name for name in names if isinstance(name, str) and name)[:10]


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def same_model(name: Any, model: str) -> bool:
    """Ollama names carry a tag (``qwen3:8b``); a bare name means ``:latest``."""
    if not isinstance(name, str):
        return False
    return name == model or name == f"{model}:latest" or f"{name}:latest" == model


def is_listed(model: str, models: list[str]) -> bool:
    """Whether a listing of ``models`` has ``model``: Anthropic lists dated ids and
    accepts the undated alias (as OpenAI does its snapshots); Ollama lists tagged names
    and takes a bare one as its ``:latest``."""
    return any(same_model(m, model) or m.startswith(model + "-") for m in models)


async def _ollama(asker: _Http, root: str, base: str, model: str) -> ServedWindow | None:
    listing = await asker.json("GET", f"{root}/api/ps")
    if not isinstance(listing, Mapping) or not isinstance(listing.get("models"), list):
        return None
    # What the model's own files say: its declared length, and a Modelfile's num_ctx
    # (served whether it is loaded or not).
    shown = await asker.json("POST", f"{root}/api/show", {"model": model})
    if shown is None and asker.status == 404:  # "model 'x' not found": not pulled
        tags = await asker.json("GET", f"{root}/api/tags")
        listed = tags.get("models") if isinstance(tags, Mapping) else None
        if not isinstance(listed, list):  # it did not say what it has
            return ServedWindow("ollama", None, has_model=False, models=None)
        names = _names(m.get("name") for m in listed if isinstance(m, Mapping))
        return ServedWindow("ollama", None, has_model=False, models=names)
    declared = num_ctx = None
    if isinstance(shown, Mapping):
        parameters = shown.get("parameters")
        match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
        num_ctx = int(match.group(1)) if match else None
        info = shown.get("model_info")
        if isinstance(info, Mapping):
            declared = next(
                (_positive(v) for k, v in info.items() if str(k).endswith(".context_length")),
                None,
            )
    loaded = _loaded_context(listing, model)
    if loaded is None and asker.load_timeout is not None:
        # An empty generate loads the model, with the window the server gives it
        # (docs/api.md: "If an empty prompt is provided, the model will be loaded").
        body = {"model": model, "stream": False}
        await asker.json("POST", f"{root}/api/generate", body, timeout=asker.load_timeout)
        loaded = _loaded_context(await asker.json("GET", f"{root}/api/ps"), model)
    return ServedWindow("ollama", loaded or num_ctx, declared)


def _loaded_context(listing: Any, model: str) -> int | None:
    """The ``context_length`` /api/ps gives ``model`` (v0.10+), if it is loaded."""
    models = listing.get("models") if isinstance(listing, Mapping) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, Mapping) and (
            same_model(entry.get("name"), model) or same_model(entry.get("model"), model)
        ):
            return _positive(entry.get("context_length"))
    return None


async def _llama_cpp(asker: _Http, root: str, base: str, model: str) -> ServedWindow | None:
    props = await asker.json("GET", f"{root}/props")
    settings = props.get("default_generation_settings") if isinstance(props, Mapping) else None
    served = _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    if served is None:
        return None
    return ServedWindow("llama.cpp", served)


async def _lmstudio(asker: _Http, root: str, base: str, model: str) -> ServedWindow | None:
    listing = await asker.json("GET", f"{root}/api/v0/models")
    data = listing.get("data") if isinstance(listing, Mapping) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, Mapping) and entry.get("id") == model:
            loaded = entry.get("state") == "loaded"
            return ServedWindow(
                "lmstudio",
                _positive(entry.get("loaded_context_length")) if loaded else None,
                _positive(entry.get("max_context_length")),
            )
    return None


async def _openai_models(asker: _Http, root: str, base: str, model: str) -> ServedWindow | None:
    listing = await asker.json("GET", f"{base}/models")
    data = listing.get("data") if isinstance(listing, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    if (  # vLLM's own listing (SGLang lists max_model_len too, and answers any name)
        entries
        and all(e.get("owned_by") == "vllm" for e in entries)
        and not any(e.get("id") == model for e in entries)
    ):
        # vLLM serves only its --served-model-name: "The model `x` does not exist."
        return ServedWindow(
            "vllm", None, has_model=False, models=_names(e.get("id") for e in entries)
        )
    for entry in entries:
        if entry.get("id") != model:
            continue
        if _is_vllm(entry):
            return ServedWindow("vllm", _positive(entry.get("max_model_len")))
        meta = entry.get("meta")
        if isinstance(meta, Mapping):  # llama.cpp without /props: only the training window
            return ServedWindow(
                "llama.cpp", _positive(meta.get("n_ctx")), _positive(meta.get("n_ctx_train"))
            )
        for key in ("context_length", "context_window", "max_context_length"):
            served = _positive(entry.get(key))
            if served is not None:
                return ServedWindow("openai-compatible", served)
    return None
