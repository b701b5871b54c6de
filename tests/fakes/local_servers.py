"""Fakes of the local model servers nightowl's users run — Ollama, llama.cpp's
``llama-server`` and vLLM — each answering the way the real one does, quirks included.

Each is a :class:`~tests.fakes.llm_server.FakeLLM` (the OpenAI-compatible
``/v1/chat/completions`` the gateway talks to, scripting and all) with the server's own
endpoints, its own way of counting and its own way of failing. What they do was read from
each server's source, docs and issue tracker (2025-2026); the sources are named below.

**A tokenizer that is not cl100k** (:class:`LlamaTokens`): Llama- and Qwen-family
tokenizers count Latin text a little heavier than ``chars / 4``, Cyrillic about 1.6 times
heavier (0.4 token per character), CJK a token per character; their chat templates add
tokens per message (Llama 3: ``<|start_header_id|>role<|end_header_id|>\\n\\n ...
<|eot_id|>``) and a block of instructions around tool schemas. Only the server's ``usage``
is the truth, as with the real ones.

**Ollama** (:class:`FakeOllama`, ``ollama/ollama`` source at v0.6-v0.33):

- ``/v1/chat/completions`` ignores ``num_ctx`` and any ``options`` (its request type has no
  such field; ``docs/api/openai-compatibility.mdx``: "create a Modelfile") and serves the
  server's default window, ``OLLAMA_CONTEXT_LENGTH`` (4096 from v0.6.7; 2048 before), or a
  Modelfile's ``num_ctx``. ``max_tokens`` is ``num_predict``: prompt + ``max_tokens`` over
  the window is never refused.
- A longer prompt gets **200 OK**, cut silently, in two layers: ``server/prompt.go``
  ``chatPrompt`` drops whole old messages, keeping the system messages and the latest
  one, until the rest fits ``num_ctx``; the runner then cuts what still does not fit to
  the first ``num_keep`` (4) tokens and the newest ones (log: ``truncating input prompt
  limit=4096 prompt=7900 keep=4 new=4096``; ollama/ollama#10368, Roo-Code#1372). From
  v0.30 (llama-server inside) a prompt of ``num_ctx`` tokens or more is cut to
  ``num_ctx - (num_ctx - keep) / 2``, about half the window (``llm/llama_server.go``
  ``contextShiftPromptLimit``; ``keep`` is 4, 5 for a tokenizer that adds BOS;
  ollama/ollama#17427, Stirling-PDF#7770 "clipped to exactly 2,050"):
  ``version=(0, 30)``, ``keep=5``. 0.30.x before ollama/ollama#16428 counted only what its
  KV cache did not hold (``counts_cached=False``). Qwen3's template drops the reasoning
  (``<think>...</think>``) of earlier replies. ``usage.prompt_tokens`` is the count after the cut (ollama#6026);
  nothing in the response says a cut happened (feature requests ollama#8386, #3839).
- With context shift off (``"shift": false``, the deepseek2 family, v0.30.9+) a prompt
  at least as long as the window is refused instead: 400 ``the prompt is longer than the
  context length currently available to the model; shorten the prompt, adjust the context
  length in settings, or use a model with a longer context length`` (``shift=False``).
  That wording names no number, whatever is said of it elsewhere.
- ``GET /api/ps`` lists loaded models with the ``context_length`` they were loaded with
  (v0.10.0+, PR #11331; ``version=(0, 9)`` leaves it out); a model is loaded by its first
  request. ``POST /api/show``
  (``{"model": ...}``) gives ``model_info["<arch>.context_length"]``, the *declared*
  length, and a Modelfile's ``num_ctx`` in the ``parameters`` string
  (``"num_ctx                        8192"``); 404 ``model 'x' not found``. An empty
  ``POST /api/generate`` loads a model (``done_reason: "load"``; docs/api.md).
  ``GET /api/tags`` lists models; ``/v1/models`` has ``owned_by: "library"`` and no window.
- A model that was never pulled (or a name typed wrong: names are case-sensitive) is a
  404 on every endpoint, also ``/v1/chat/completions``: ``{"error": {"message": "model
  'qwen3:8B' not found", "type": "not_found_error", "param": null, "code": null}}``
  (``openai.NewError`` types every 404 so, a wrong path's too; the native
  ``{"error": "model 'x' not found"}`` in OpenAI's envelope; before v0.5 it added ", try
  pulling it first"; netease-youdao/QAnything#555, CrestApps/CrestApps.Core#142).
- ``POST /api/chat`` (native) honours ``options.num_ctx``, streams NDJSON by default and
  reports ``prompt_eval_count``, ``eval_count`` and ``done_reason``; tool-call arguments
  are JSON objects. Errors are ``{"error": "..."}``.

**llama.cpp** (:class:`FakeLlamaCpp`, ``tools/server`` README and ``server-context.cpp``):
``GET /props`` gives ``default_generation_settings.n_ctx``, the window of one slot
(``--ctx-size`` divided among ``--parallel`` slots), and ``total_slots``; ``/v1/models``
gives ``meta.n_ctx_train``, the training window (larger). Only the prompt is checked: at
``n_ctx`` or more it is a 400 ``{"error": {"code": 400, "message": "request (N tokens)
exceeds the available context size (M tokens), try increasing it", "type":
"exceed_context_size_error", "n_prompt_tokens": N, "n_ctx": M}}``; ``max_tokens`` past
the window is not refused — the reply stops when the slot fills, ``finish_reason:
"length"``.

**vLLM** (:class:`FakeVllm`, ``vllm/entrypoints/openai``; vllm-project/vllm#12886,
#20409, PR #22803): ``GET /v1/models`` gives ``max_model_len``, ``owned_by: "vllm"``.
A name other than ``--served-model-name`` (by default the path or repo it was started
with) is a 404: ``The model `x` does not exist.``, type ``NotFoundError``
(vllm-project/vllm#3485), in the envelope of the wording below.
Prompt + ``max_tokens`` must fit: 400, worded as OpenAI's before v0.10.1 ("However, you
requested 4200 tokens (3000 in the messages, 1200 in the completion)", envelope ``{"object":
"error", ..., "code": 400}``) and since as ``'max_tokens' or 'max_completion_tokens' is too
large: 1200. This model's maximum context length is 4096 tokens and your request has 3000
input tokens (1200 > 4096 - 3000).`` (or ``However, your request has 5000 input tokens``
for a prompt alone too long), envelope ``{"error": {...}}`` (``wording="2024" | "2025"``).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from tests.fakes.llm_server import FakeLLM, Recorded, Reply, _text_of

_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class LlamaTokens:
    """Counts a chat request as a Llama/Qwen tokenizer and chat template would (roughly)."""

    latin: float = 0.27  # tokens per character of other text (cl100k-like chars / 4: 0.25)
    cyrillic: float = 0.4  # 1.6 times the estimate's 0.25
    cjk: float = 1.0
    per_message: int = 5  # role header and end-of-turn marker
    base: int = 5  # BOS, and the assistant header the template ends with
    tools_preamble: int = 60  # the template's instructions around tool schemas

    def text(self, text: str) -> int:
        cyrillic = len(_CYRILLIC.findall(text))
        cjk = len(_CJK.findall(text))
        other = len(text) - cyrillic - cjk
        return math.ceil(other * self.latin + cyrillic * self.cyrillic + cjk * self.cjk)

    def message(self, message: Mapping[str, Any]) -> int:
        text = _text_of(message.get("content"))
        if message.get("role") == "assistant":  # Qwen3's template drops earlier reasoning
            text = _THINK.sub("", text)
        tokens = self.per_message + self.text(text)
        if message.get("tool_calls"):
            tokens += self.text(json.dumps(message["tool_calls"]))
        return tokens

    def request(self, body: Mapping[str, Any]) -> int:
        tokens = self.base + sum(self.message(m) for m in body.get("messages") or [])
        if body.get("tools"):
            tokens += self.tools_preamble + self.text(json.dumps(body["tools"]))
        return tokens


class _LocalServer(FakeLLM):
    """What the three fakes share: a tokenizer of their own, one model, its window."""

    kind = "local"

    def __init__(
        self,
        *,
        served: int,
        model: str = "qwen3:8b",
        declared: int = 40_960,
        tokens: LlamaTokens | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(models=(model,), **kwargs)
        self.model = model
        #: The window the server serves; what its model declares (larger).
        self.served = served
        self.declared = declared
        self.tokens = tokens or LlamaTokens()
        self.count_tokens = lambda api, body: self.tokens.request(body)
        #: How often its own endpoints were asked about windows.
        self.window_asks = 0

    def _json(self, payload: Any, status: int = 200) -> web.Response:
        return web.Response(
            status=status, text=json.dumps(payload), content_type="application/json"
        )

    def completion_room(self, recorded: Recorded) -> int | None:
        """Tokens a reply may take before the window is full (None: as many as asked)."""
        return None

    def _usage(self, recorded: Recorded, reply: Reply) -> tuple[int, int] | None:
        if reply.usage != "auto":
            return reply.usage
        return (recorded.prompt_tokens, self.tokens.text(reply.text) + 1)

    async def _next_reply(self, recorded: Recorded) -> Reply:
        # All three stop a reply at max_tokens (num_predict, n_predict) and say
        # finish_reason "length" (done_reason on Ollama's own API).
        reply = await super()._next_reply(recorded)
        return _cut_to(reply, recorded.max_tokens, self.tokens) if recorded.max_tokens else reply


def _cut_to(reply: Reply, tokens: int, counter: LlamaTokens) -> Reply:
    """``reply`` stopped after ``tokens`` of its text, as a server's generation limit does."""
    if reply.status != 200 or counter.text(reply.text) <= tokens:
        return reply
    words = reply.text.split()
    while words and counter.text(" ".join(words)) > tokens:
        words.pop()
    return replace(reply, text=" ".join(words), finish_reason="length", tool_calls=[])


class FakeOllama(_LocalServer):
    """Ollama: see the module docstring."""

    kind = "ollama"

    def __init__(
        self,
        *,
        served: int = 4_096,
        version: tuple[int, int] = (0, 12),
        shift: bool = True,
        modelfile_num_ctx: int | None = None,
        loaded: bool = False,
        keep: int = 4,
        counts_cached: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(served=served, **kwargs)
        self.version = version
        self.shift = shift
        #: A Modelfile's ``PARAMETER num_ctx``: served instead of the default.
        self.modelfile_num_ctx = modelfile_num_ctx
        self.loaded = loaded
        #: How many prompts were cut, and by how much (tokens sent, tokens kept).
        self.cuts: list[tuple[int, int]] = []
        #: How many times a client asked it to load the model (an empty /api/generate).
        self.loads = 0
        #: Tokens kept from the start of a prompt it cuts: 4, and one more for a BOS token.
        self.keep = keep
        #: False: ``usage.prompt_tokens`` counts only what its KV cache did not hold, as
        #: 0.30.x did before ollama/ollama#16428.
        self.counts_cached = counts_cached
        self._previous: list[Any] = []
        self._held = 0

    @property
    def num_ctx(self) -> int:
        return self.modelfile_num_ctx or self.served

    def install(self, app: web.Application) -> None:
        app.router.add_get("/api/ps", self._ps)
        app.router.add_post("/api/show", self._show)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_post("/api/generate", self._generate)
        app.router.add_post("/api/chat", self._native_chat)

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        data = [{"id": self.model, "object": "model", "created": 0, "owned_by": "library"}]
        return self._json({"object": "list", "data": data})

    def _known(self, name: Any) -> bool:
        return name in (self.model, f"{self.model}:latest") or f"{name}:latest" == self.model

    def _missing_model_reply(self, recorded: Recorded) -> Reply | None:
        name = recorded.body.get("model")
        if self._known(name):
            return None
        message = f"model '{name}' not found"
        return Reply(status=404, error_type="not_found_error", error_message=message)

    def _details(self) -> dict[str, Any]:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": "qwen3",
            "families": ["qwen3"],
            "parameter_size": "8.2B",
            "quantization_level": "Q4_K_M",
        }

    async def _ps(self, request: web.Request) -> web.Response:
        self.window_asks += 1
        models = []
        if self.loaded:
            models.append(
                {
                    "name": self.model,
                    "model": self.model,
                    "size": 6_654_289_920,
                    "digest": "500a1f067a9f",
                    "details": self._details(),
                    "expires_at": "2026-12-06T12:00:00Z",
                    "size_vram": 6_654_289_920,
                }
            )
            if self.version >= (0, 10):  # PR #11331
                models[-1]["context_length"] = self.num_ctx
        return self._json({"models": models})

    async def _show(self, request: web.Request) -> web.Response:
        self.window_asks += 1
        body = await request.json()
        name = body.get("model") or body.get("name")
        if not name:
            return self._json({"error": "model is required"}, 400)
        if not self._known(name):
            return self._json({"error": f"model '{name}' not found"}, 404)
        parameters = 'stop                           "<|im_end|>"'
        if self.modelfile_num_ctx:
            parameters = f"num_ctx                        {self.modelfile_num_ctx}\n" + parameters
        return self._json(
            {
                "modelfile": '# Modelfile generated by "ollama show"',
                "parameters": parameters,
                "template": "{{ .Prompt }}",
                "details": self._details(),
                "model_info": {
                    "general.architecture": "qwen3",
                    "general.parameter_count": 8_190_735_360,
                    "qwen3.context_length": self.declared,
                    "qwen3.embedding_length": 4096,
                },
                "capabilities": ["completion", "tools"],
                "modified_at": "2026-11-01T10:00:00Z",
            }
        )

    async def _generate(self, request: web.Request) -> web.Response:
        """Only what nightowl uses: an empty prompt loads the model (``done_reason: "load"``)."""
        body = await request.json()
        if not self._known(body.get("model")):
            return self._json({"error": f"model '{body.get('model')}' not found"}, 404)
        if body.get("prompt"):
            return self._json({"error": "this fake generates only to load a model"}, 501)
        self.loaded = True
        self.loads += 1
        return self._json(
            {
                "model": self.model,
                "created_at": "2026-12-06T12:00:00Z",
                "response": "",
                "done": True,
                "done_reason": "load",
            }
        )

    async def _tags(self, request: web.Request) -> web.Response:
        model = {"name": self.model, "model": self.model, "modified_at": "2026-11-01T10:00:00Z"}
        return self._json({"models": [model | {"size": 5_225_388_164, "details": self._details()}]})

    def admit(self, recorded: Recorded) -> Recorded:
        """``/v1`` serves ``num_ctx`` whatever the request says, and cuts a longer prompt."""
        self.loaded = True
        messages = recorded.body.get("messages") or []
        shared = 0
        while (
            shared < min(len(messages), len(self._previous))
            and messages[shared] == self._previous[shared]
        ):
            shared += 1
        #: Tokens of this prompt its KV cache holds from the last one (whole messages).
        self._held = sum(self.tokens.message(m) for m in messages[:shared])
        if not self.shift:
            self._previous = messages
            return recorded  # refused in _overflow_reply instead
        limit = self.num_ctx
        body, kept = _drop_old_messages(recorded.body, limit, self.tokens)
        if kept >= limit:  # the system messages and the latest one alone fill the window
            new = limit
            if self.version >= (0, 30):  # llama-server with context shift keeps about half
                new = limit - max((limit - self.keep) // 2, 1)
            body, kept = _keep_head_and_tail(body, new, self.tokens)
        self._previous = recorded.body.get("messages") or []
        if kept == recorded.prompt_tokens:
            return recorded
        self.cuts.append((recorded.prompt_tokens, kept))
        return replace(recorded, body=body, prompt_tokens=kept, sent_tokens=recorded.prompt_tokens)

    def _usage(self, recorded: Recorded, reply: Reply) -> tuple[int, int] | None:
        usage = super()._usage(recorded, reply)
        if usage is None or self.counts_cached or not self._held:
            return usage
        return (max(1, usage[0] - self._held), usage[1])

    def _overflow_reply(self, recorded: Recorded) -> Reply | None:
        if self.shift or recorded.prompt_tokens < self.num_ctx:
            return None
        message = (
            "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with "
            "a longer context length"
        )
        return Reply(status=400, error_type="invalid_request_error", error_message=message)

    async def _native_chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /api/chat``: ``options.num_ctx`` is honoured here (and only here)."""
        body = await request.json()
        if not self._known(body.get("model")):
            return self._json({"error": f"model '{body.get('model')}' not found"}, 404)
        options = body.get("options") or {}
        num_ctx = int(options.get("num_ctx") or self.num_ctx)
        self.loaded = True
        prompt = self.tokens.request(body)
        seen, kept = _drop_old_messages(body, num_ctx, self.tokens)
        recorded = Recorded("openai", seen, {}, kept)
        reply = await self._next_reply(recorded)
        done = {
            "model": self.model,
            "created_at": "2026-12-06T12:00:00Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": min(prompt, kept),
            "eval_count": self.tokens.text(reply.text) + 1,
            "total_duration": 1_000_000,
        }
        if reply.tool_calls:
            done["message"]["tool_calls"] = [
                {
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, dict) else json.loads(args),
                    }
                }
                for name, args in reply.tool_calls
            ]
        if body.get("stream") is False:
            done["message"]["content"] = reply.text
            return self._json(done)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for word in re.findall(r"\S+\s*", reply.text):
            chunk = {"model": self.model, "created_at": done["created_at"], "done": False}
            chunk["message"] = {"role": "assistant", "content": word}
            await response.write((json.dumps(chunk) + "\n").encode())
        await response.write((json.dumps(done) + "\n").encode())
        await response.write_eof()
        return response


class FakeLlamaCpp(_LocalServer):
    """llama.cpp's ``llama-server``: see the module docstring."""

    kind = "llama.cpp"

    def __init__(self, *, served: int = 4_096, slots: int = 1, **kwargs: Any) -> None:
        super().__init__(served=served, **kwargs)
        self.slots = slots
        #: Replies stopped because the slot was full (finish_reason "length").
        self.clipped = 0

    def install(self, app: web.Application) -> None:
        app.router.add_get("/props", self._props)
        app.router.add_get("/health", self._health)

    async def _health(self, request: web.Request) -> web.Response:
        return self._json({"status": "ok"})

    async def _props(self, request: web.Request) -> web.Response:
        self.window_asks += 1
        return self._json(
            {
                "default_generation_settings": {
                    "id": 0,
                    "id_task": -1,
                    "n_ctx": self.served,
                    "speculative": False,
                    "is_processing": False,
                    "params": {"n_predict": -1, "max_tokens": -1, "n_keep": 0},
                },
                "total_slots": self.slots,
                "model_path": f"/models/{self.model}.gguf",
                "chat_template": "{{ messages }}",
                "modalities": {"vision": False},
                "build_info": "b7100-0c1b2d3e",
            }
        )

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        meta = {"vocab_type": 2, "n_vocab": 151_936, "n_ctx_train": self.declared, "n_embd": 4096}
        entry = {"id": self.model, "object": "model", "created": int(time.time())}
        return self._json(
            {
                "models": [{"name": self.model, "model": self.model, "type": "model"}],
                "object": "list",
                "data": [entry | {"owned_by": "llamacpp", "meta": meta}],
            }
        )

    def _overflow_reply(self, recorded: Recorded) -> Reply | None:
        prompt, n_ctx = recorded.prompt_tokens, self.served
        if prompt < n_ctx:
            return None
        error = {
            "code": 400,
            "message": (
                f"request ({prompt} tokens) exceeds the available context size ({n_ctx} "
                "tokens), try increasing it"
            ),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": n_ctx,
        }
        return Reply(status=400, raw_body=json.dumps({"error": error}))

    async def _next_reply(self, recorded: Recorded) -> Reply:
        reply = await super()._next_reply(recorded)
        room = self.served - recorded.prompt_tokens
        if reply.status != 200 or self.tokens.text(reply.text) <= room:
            return reply
        # The slot is full before the reply is: it stops where the window ends.
        self.clipped += 1
        return _cut_to(reply, room, self.tokens)


class FakeVllm(_LocalServer):
    """vLLM: see the module docstring."""

    kind = "vllm"

    def __init__(
        self, *, served: int = 4_096, wording: str = "2025", listed: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(served=served, **kwargs)
        self.wording = wording
        #: False: behind a proxy that serves an OpenAI-shaped model list (ids only).
        self.listed = listed

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        self.window_asks += 1
        if not self.listed:
            entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "proxy"}
            return self._json({"object": "list", "data": [entry]})
        entry = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.served,
        }
        return self._json({"object": "list", "data": [entry]})

    def _missing_model_reply(self, recorded: Recorded) -> Reply | None:
        name = recorded.body.get("model")
        if name == self.model:
            return None
        error = {"message": f"The model `{name}` does not exist.", "type": "NotFoundError"}
        error |= {"param": None, "code": 404}
        body = {"object": "error"} | error if self.wording == "2024" else {"error": error}
        return Reply(status=404, raw_body=json.dumps(body))

    def _overflow_reply(self, recorded: Recorded) -> Reply | None:
        prompt, out, window = recorded.prompt_tokens, recorded.max_tokens, self.served
        if prompt + out <= window:
            return None
        if self.wording == "2024":
            message = (
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + out} tokens ({prompt} in the messages, {out} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            error = {"object": "error", "message": message, "type": "BadRequestError"}
            return Reply(status=400, raw_body=json.dumps(error | {"param": None, "code": 400}))
        if prompt >= window:
            message = (
                f"This model's maximum context length is {window} tokens. However, your "
                f"request has {prompt} input tokens. Please reduce the length of the input "
                "messages."
            )
        else:
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {out}. This model's "
                f"maximum context length is {window} tokens and your request has {prompt} "
                f"input tokens ({out} > {window} - {prompt})."
            )
        error = {"message": message, "type": "BadRequestError", "param": "max_tokens", "code": 400}
        return Reply(status=400, raw_body=json.dumps({"error": error}))


def _drop_old_messages(
    body: dict[str, Any], limit: int, tokens: LlamaTokens
) -> tuple[dict[str, Any], int]:
    """Ollama's ``chatPrompt``: whole old messages go, oldest first, until the rest fits;
    the system messages and the latest message always stay."""
    messages = list(body.get("messages") or [])
    total = tokens.request(body)
    index = 0
    while total > limit and index < len(messages) - 1:
        if messages[index].get("role") == "system":
            index += 1
            continue
        total -= tokens.message(messages.pop(index))
    return {**body, "messages": messages}, total


def _keep_head_and_tail(
    body: dict[str, Any], limit: int, tokens: LlamaTokens
) -> tuple[dict[str, Any], int]:
    """The runner's cut: the first ``num_keep`` (4) tokens and the newest ones, exactly
    ``limit`` in all. In messages: the oldest text is cut from its start, word by word,
    until the rest fits (the system prompt first)."""
    messages = [dict(m) for m in body.get("messages") or []]
    total = tokens.request(body)
    for message in messages:
        if total <= limit:
            break
        text = _text_of(message.get("content"))
        words = text.split()
        while words and total > limit:
            total -= tokens.text(words.pop(0) + " ")
        message["content"] = " ".join(words)
    # The runner keeps exactly ``limit`` tokens ("new=4096"; "clipped to exactly 2,050").
    return {**body, "messages": messages}, limit
