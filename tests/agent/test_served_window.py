"""Asking a server what window it serves (docs/design.md#served-window), against fakes of
Ollama, llama.cpp and vLLM that answer as the real ones do (tests/fakes/local_servers.py)."""

from __future__ import annotations

import logging

import httpx2
import pytest
from aiohttp import web

from agent.providers import ProviderSettings, make_provider
from agent.providers.base import ProviderError
from agent.providers.errors import NO_SUCH_MODEL, classify_failure
from agent.served_window import ServedWindow, ask_served_window, server_root
from tests.fakes.llm_server import FakeLLM
from tests.fakes.local_servers import FakeLlamaCpp, FakeOllama, FakeVllm


async def test_ollama_says_the_window_its_loaded_model_serves_not_the_declared_one() -> None:
    async with FakeOllama(served=4_096, declared=40_960, loaded=True) as ollama:
        served = await ask_served_window(ollama.openai_base_url, "qwen3:8b")
    assert served == ServedWindow("ollama", 4_096, declared=40_960)


async def test_an_ollama_model_not_loaded_only_declares_its_length() -> None:
    async with FakeOllama(served=4_096, declared=40_960) as ollama:
        served = await ask_served_window(ollama.openai_base_url, "qwen3:8b")
        assert served == ServedWindow("ollama", None, declared=40_960)
        # A Modelfile's num_ctx is what /v1 serves, loaded or not.
        ollama.modelfile_num_ctx = 8_192
        served = await ask_served_window(ollama.openai_base_url, "qwen3:8b")
    assert served == ServedWindow("ollama", 8_192, declared=40_960)


async def test_ollama_loads_a_model_to_say_its_window_when_asked_to() -> None:
    async with FakeOllama(served=4_096, declared=40_960) as ollama:
        served = await ask_served_window(ollama.openai_base_url, "qwen3:8b", load_timeout=30)
    assert served == ServedWindow("ollama", 4_096, declared=40_960)
    assert ollama.loads == 1


async def test_a_bare_ollama_model_name_means_its_latest_tag() -> None:
    async with FakeOllama(model="llama3.2:latest", served=2_048, loaded=True) as ollama:
        served = await ask_served_window(ollama.openai_base_url, "llama3.2")
    assert served is not None and served.tokens == 2_048


async def test_ollama_without_the_model_says_so_and_names_the_ones_it_has() -> None:
    # Names are case-sensitive: "qwen3:8B" was never pulled, "qwen3:8b" was.
    async with FakeOllama(served=4_096, loaded=True) as ollama:
        served = await ask_served_window(ollama.openai_base_url, "qwen3:8B", load_timeout=30)
    assert served == ServedWindow("ollama", None, has_model=False, models=("qwen3:8b",))
    assert ollama.loads == 0  # nothing to load
    assert served.fix("qwen3:8B") == "set model.name to qwen3:8b (names are case-sensitive)"
    assert served.fix("llama3.2") == (
        "set model.name to a model it has, or fetch it with `ollama pull llama3.2`"
    )


@pytest.mark.parametrize("wording", ["2024", "2025"])
async def test_vllm_asked_for_another_model_says_which_one_it_serves(wording: str) -> None:
    async with FakeVllm(served=8_192, model="Qwen/Qwen3-8B", wording=wording) as server:
        served = await ask_served_window(server.openai_base_url, "qwen3:8b")
        assert served == ServedWindow("vllm", None, has_model=False, models=("Qwen/Qwen3-8B",))
        assert served.fix("qwen3:8b", "models.small.name") == (
            "set models.small.name to a model it has"  # nothing to pull on vLLM
        )
        # ...and the chat request for it is refused as vLLM refuses it.
        provider = make_provider(
            ProviderSettings("openai", "qwen3:8b", api_key="k", base_url=server.openai_base_url)
        )
        try:
            with pytest.raises(ProviderError) as refused:
                await provider.complete([{"role": "user", "content": "hi"}], max_tokens=10)
        finally:
            await provider.aclose()
    assert refused.value.status == 404 and refused.value.detail == NO_SUCH_MODEL


async def test_sglang_answers_any_name_and_is_never_said_to_lack_it() -> None:
    """SGLang lists ``max_model_len`` as vLLM does, but serves whatever name it is sent
    (its docs use ``model="default"``): only vLLM's own listing says a name is missing."""
    listing = {
        "object": "list",
        "data": [{"id": "Qwen/Qwen3-8B", "owned_by": "sglang", "max_model_len": 32_768}],
    }

    async def models(request: web.Request) -> web.Response:
        return web.json_response(listing)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        served = await ask_served_window(f"http://127.0.0.1:{port}/v1", "default")
    finally:
        await runner.cleanup()
    assert served is None


def test_a_404_names_a_missing_model_only_when_it_is_about_the_model() -> None:
    def detail(message: str, error_type: str | None = None, code: str | None = None) -> str:
        failure = classify_failure(
            "openai", status=404, error_type=error_type, code=code, message=message
        )
        return failure.detail

    openai = "The model `gpt-9` does not exist or you do not have access to it."
    assert detail(openai, "invalid_request_error", "model_not_found") == NO_SUCH_MODEL
    assert detail("model: claude-9", "not_found_error") == NO_SUCH_MODEL  # Anthropic
    assert detail("model 'qwen3:8B' not found", "not_found_error") == NO_SUCH_MODEL  # Ollama
    # A wrong path, not a missing model: Ollama's base_url without /v1, Anthropic's with it.
    assert detail("404 page not found") == ""
    assert detail("Not Found", "not_found_error") == ""

    def proxied(message: str) -> str:  # a 400, as LiteLLM answers it
        return classify_failure(
            "openai", status=400, error_type=None, code="400", message=message
        ).detail

    litellm = "Invalid model name passed in model=qwen3:8B. Call `/v1/models` to view"
    assert proxied(litellm) == NO_SUCH_MODEL
    assert proxied("Invalid 'messages': empty array.") == ""


async def test_llama_cpp_says_one_slots_window_not_the_training_one() -> None:
    async with FakeLlamaCpp(served=4_096, declared=131_072, slots=2) as server:
        served = await ask_served_window(server.openai_base_url, "qwen3:8b")
    assert served == ServedWindow("llama.cpp", 4_096)
    assert served.hint(8_192) == (
        "start llama-server with --parallel 1 --ctx-size 8192 (with more slots, --ctx-size is"
        " shared among them)"
    )


async def test_vllm_says_max_model_len() -> None:
    async with FakeVllm(served=8_192) as server:
        served = await ask_served_window(server.openai_base_url, "qwen3:8b")
    assert served == ServedWindow("vllm", 8_192)


async def test_lm_studio_says_the_loaded_context_length() -> None:
    async def models(request: web.Request) -> web.Response:
        entry = {"id": "gemma-3-4b-it", "object": "model", "type": "llm", "state": "loaded"}
        entry |= {"max_context_length": 131_072, "loaded_context_length": 4_096}
        return web.json_response({"object": "list", "data": [entry]})

    class FakeLmStudio(FakeLLM):
        def install(self, app: web.Application) -> None:
            app.router.add_get("/api/v0/models", models)

    async with FakeLmStudio(models=("gemma-3-4b-it",)) as server:
        served = await ask_served_window(server.openai_base_url, "gemma-3-4b-it")
    assert served == ServedWindow("lmstudio", 4_096, declared=131_072)


async def test_a_server_that_says_nothing_of_windows_gives_no_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeLLM() as server:  # /v1/models lists ids only, as OpenAI's does
        assert await ask_served_window(server.openai_base_url, "fake-model") is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # it is up


async def test_an_unreachable_server_gives_no_answer_quickly_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeLLM() as server:
        port = server.port
    url = f"http://owl:s3cret@127.0.0.1:{port}/v1"
    for _ in range(3):  # the alerts ask every minute: said once, not each time
        assert await ask_served_window(url, "m", timeout=2.0) is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        f"the model server at http://127.0.0.1:{port} does not answer (ConnectError): replies"
        " fail until it does (is it running, and is that its address?)"
    ]


async def test_the_openai_provider_asks_only_self_hosted_servers() -> None:
    async with FakeVllm(served=8_192) as server:
        local = make_provider(
            ProviderSettings("openai", "qwen3:8b", base_url=server.openai_base_url)
        )
        hosted = make_provider(ProviderSettings("openai", "gpt-4o", api_key="sk-test"))
        try:
            assert (await local.served_window()) == ServedWindow("vllm", 8_192)
            assert await hosted.served_window() is None  # the table knows OpenAI's models
        finally:
            await local.aclose()
            await hosted.aclose()
        assert server.window_asks == 1


def test_the_server_root_is_the_base_url_without_v1() -> None:
    assert server_root("http://box:11434/v1/") == "http://box:11434"
    assert server_root("http://box:8080") == "http://box:8080"


def test_each_servers_overflow_wording_gives_the_window_and_the_prompt() -> None:
    cases = [
        # vLLM before and since v0.10.1, llama.cpp now, Ollama without context shift.
        (
            "This model's maximum context length is 4096 tokens. However, you requested "
            "4200 tokens (3000 in the messages, 1200 in the completion). Please reduce the "
            "length of the messages or completion.",
            None,
            (4096, 3000),
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 1200. This model's maximum "
            "context length is 4096 tokens and your request has 3000 input tokens "
            "(1200 > 4096 - 3000).",
            None,
            (4096, 3000),
        ),
        (
            "request (4476 tokens) exceeds the available context size (4096 tokens), try "
            "increasing it",
            {"n_prompt_tokens": 4476, "n_ctx": 4096},
            (4096, 4476),
        ),
        (
            "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with "
            "a longer context length",
            None,
            (None, None),
        ),
    ]
    for message, body, (limit, prompt) in cases:
        error = classify_failure(
            "openai", status=400, error_type=None, code=None, message=message, body=body
        )
        assert error.kind == "overflow", message
        assert (error.context_limit, error.prompt_tokens) == (limit, prompt), message


async def test_the_ollama_fake_honours_num_ctx_only_natively_as_ollama_does() -> None:
    """Why nightowl asks Ollama instead of telling it (docs/design.md#served-window): the
    OpenAI-compatible endpoint it talks to ignores ``num_ctx`` and cuts to the server's
    window; only the native ``/api/chat`` takes it."""
    long = [{"role": "user", "content": "word " * 8_000}]
    options = {"num_ctx": 16_384}
    async with FakeOllama(served=4_096) as ollama, httpx2.AsyncClient() as client:
        root = server_root(ollama.openai_base_url)
        native = await client.post(
            f"{root}/api/chat",
            json={"model": "qwen3:8b", "messages": long, "stream": False, "options": options},
        )
        compatible = await client.post(
            f"{ollama.openai_base_url}/chat/completions",
            json={"model": "qwen3:8b", "messages": long, "options": options},
        )
        missing = await client.post(f"{root}/api/chat", json={"model": "nope", "messages": long})
    assert native.json()["prompt_eval_count"] > 4_096 and native.json()["done_reason"] == "stop"
    assert compatible.status_code == 200  # silently cut, not refused
    assert compatible.json()["usage"]["prompt_tokens"] == 4_096
    assert (missing.status_code, missing.json()) == (404, {"error": "model 'nope' not found"})
