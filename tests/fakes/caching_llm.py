"""A fake OpenAI-compatible server whose usage reports automatic prefix caching the way
OpenAI's does, so cost and cached share can be measured without a real account.

OpenAI's prompt caching guide (https://developers.openai.com/api/docs/guides/prompt-caching,
formerly platform.openai.com/docs/guides/prompt-caching) and its "Prompt Caching 201"
cookbook (openai/openai-cookbook, examples/Prompt_Caching_201.ipynb) say:

- caching is automatic for prompts of 1,024 tokens or more; below that ``cached_tokens``
  is 0;
- a hit needs an exact, repeated prefix, and hits come in increments of 128 tokens
  (1,024, 1,152, 1,280...);
- the whole request prefix is cacheable: tools, the system prompt, messages, images;
  so a changed tool list or system prompt changes everything after it;
- the hit is reported as ``usage.prompt_tokens_details.cached_tokens``, a part of
  ``usage.prompt_tokens`` (not added to it), and billed at the cached-input price.

:class:`CachingLLM` is :class:`tests.fakes.llm_server.FakeLLM` (every behaviour of it
stays: scripts, responders, errors, streams, overflow refusals) with two differences for
the OpenAI API: prompt tokens are counted by :func:`prompt_tokens_of`, and a reply whose
usage is ``"auto"`` reports as ``cached_tokens`` the longest prefix, in whole 128-token
blocks and only from 1,024 tokens, that an earlier answered request to the same model
shared. Usage goes with every non-streamed answer, and with a stream when the request
asks for it (``stream_options.include_usage``, which our provider always sends), as
OpenAI does. The Anthropic API is left as FakeLLM has it (its caching is explicit).

Tokens: each piece of the request (the tools' JSON, each message's role, text, tool
calls and tool call id) is cut into 4-character tokens on its own, and an image is 1,500
tokens named after its URL; a request's tokens are its pieces' in order, tools first.
So a request that appends to an earlier one repeats that one's tokens exactly.

What is not modelled: eviction after minutes of inactivity (:meth:`PrefixCache.clear`
stands in for it), the ``prompt_cache_key`` routing hint, and the occasional miss of a
request that lands on another machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aiohttp import web

from tests.fakes.llm_server import IMAGE_TOKENS, FakeLLM, Recorded, Reply

#: No caching below this many prompt tokens.
MINIMUM = 1024
#: Hits are whole blocks of this many tokens.
BLOCK = 128
CHARS_PER_TOKEN = 4


def prompt_tokens_of(body: dict[str, Any]) -> list[str]:
    """The request's tokens as the fake counts them (see the module docstring)."""
    tokens: list[str] = []

    def add(text: str) -> None:
        tokens.extend(text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN))

    if body.get("tools"):
        add(json.dumps(body["tools"]))
    for message in body.get("messages") or []:
        add(f"<|{message.get('role')}|>")
        content = message.get("content")
        if isinstance(content, str):
            add(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image_url":
                    url = json.dumps(part.get("image_url"), sort_keys=True)
                    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
                    tokens.extend(f"<img {digest} {i}>" for i in range(IMAGE_TOKENS))
                else:
                    add(str(part.get("text", "")))
        if message.get("tool_calls"):
            add(json.dumps(message["tool_calls"]))
        if message.get("tool_call_id"):
            add(str(message["tool_call_id"]))
    return tokens


class PrefixCache:
    """What earlier prompts left cached: a hash of every whole 128-token prefix, chained
    block by block (as servers key their KV blocks), per model."""

    def __init__(self) -> None:
        self._prefixes: set[tuple[str, bytes]] = set()

    def cached_tokens(self, model: str, tokens: list[str]) -> int:
        """The tokens of ``tokens`` an earlier prompt to ``model`` would serve."""
        matched = 0
        for length, digest in self._chain(tokens):
            if (model, digest) not in self._prefixes:
                break
            matched = length
        return matched if matched >= MINIMUM else 0

    def store(self, model: str, tokens: list[str]) -> None:
        self._prefixes.update((model, digest) for _, digest in self._chain(tokens))

    def clear(self) -> None:
        """Everything evicted (a real cache forgets after minutes without use)."""
        self._prefixes.clear()

    @staticmethod
    def _chain(tokens: list[str]) -> list[tuple[int, bytes]]:
        chained, digest = [], b""
        for end in range(BLOCK, len(tokens) + 1, BLOCK):
            block = "\x00".join(tokens[end - BLOCK : end])
            digest = hashlib.sha256(digest + block.encode()).digest()
            chained.append((end, digest))
        return chained


@dataclass(frozen=True)
class Report:
    """What the fake reported for one answered OpenAI request."""

    model: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int

    def cost(self, input_: Decimal, cached_input: Decimal, output: Decimal) -> Decimal:
        """What OpenAI would bill, USD, at these per-million prices."""
        uncached = self.prompt_tokens - self.cached_tokens
        total = uncached * input_ + self.cached_tokens * cached_input
        return (total + self.completion_tokens * output) / Decimal(1_000_000)


class CachingLLM(FakeLLM):
    """:class:`FakeLLM` whose OpenAI usage reports automatic prefix caching."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.cache = PrefixCache()
        #: One per answered OpenAI request, in order.
        self.reports: list[Report] = []
        fallback = self.count_tokens

        def count(api: str, body: dict[str, Any]) -> int:
            return len(prompt_tokens_of(body)) if api == "openai" else fallback(api, body)

        self.count_tokens = count

    async def _respond(
        self, request: web.Request, recorded: Recorded, reply: Reply
    ) -> web.StreamResponse:
        answered = reply.status == 200 and reply.raw_body is None and not reply.stream_error
        if recorded.api == "openai" and answered:
            model = str(recorded.body.get("model", ""))
            tokens = prompt_tokens_of(recorded.body)
            if reply.usage == "auto":
                cached = self.cache.cached_tokens(model, tokens)
                reply = dataclasses.replace(reply, cache_read=cached)
                _, completion = self._usage(recorded, reply) or (0, 0)
                self.reports.append(Report(model, len(tokens), cached, completion))
            self.cache.store(model, tokens)  # the prompt was read: its prefix is cached now
        return await super()._respond(request, recorded, reply)
