"""Which key goes to which server: a key is reused only for the same provider and endpoint.

Two fake LLM servers stand in for two hosts; each records the ``Authorization`` (or
``x-api-key``) it received, so the tests assert what the real SDKs sent where.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.build import build_providers
from gateway.config.routes import model_label
from gateway.config.schema import NO_KEY_NEEDED, Config, parse_config, resolve_api_key
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing
from tests.waiting import CEILING

MAIN_KEY = "sk-main-0123456789"
ENV_KEY = "sk-env-0123456789"


@pytest.fixture
async def other_host() -> AsyncIterator[FakeLLM]:
    """A second server: the summary model's host, a proxy, a local model."""
    async with FakeLLM() as llm:
        yield llm


@pytest.fixture(autouse=True)
def no_provider_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def keys(llm: FakeLLM) -> set[str | None]:
    return {request.api_key for request in llm.requests}


async def ask_both(config: Config) -> None:
    """One request to the main model and one to the summary model, as the gateway builds them."""
    providers = build_providers(config)
    try:
        for provider in (providers.main, providers.auxiliary):
            if provider is not None:
                await provider.complete([{"role": "user", "content": "hi"}], max_tokens=16)
    finally:
        await providers.aclose()


def configured(main: FakeLLM, **sections: Any) -> Config:
    raw: dict[str, Any] = {
        "model": {"base_url": main.openai_base_url, "name": "fake-model", "max_retries": 0},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return parse_config(raw, {})


async def test_a_summary_model_on_another_host_never_gets_the_main_key(
    tmp_path: Path, fake_llm: FakeLLM, other_host: FakeLLM
) -> None:
    # Only auxiliary.compression.base_url is set: the summaries go to that host, and
    # used to take model.api_key with them.
    fake_llm.responder = summarizing()
    other_host.responder = summarizing()
    config = make_config(
        tmp_path,
        fake_llm,
        model={"api_key": MAIN_KEY},
        auxiliary={"compression": {"base_url": other_host.openai_base_url}},
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter):
        for i in range(30):
            await adapter.say(f"message {i}: fact: item {i} matters")
            await adapter.wait_sent(i + 1)
        await adapter.say("/compress")
        await adapter.wait_sent(31)
    assert other_host.request_count >= 1  # the summary went there...
    assert keys(other_host) == {NO_KEY_NEEDED}  # ...without the main model's key
    assert keys(fake_llm) == {MAIN_KEY}


@pytest.mark.parametrize(
    ("auxiliary", "summary_key"),
    [
        ({"model": "cheap"}, MAIN_KEY),  # same provider, same endpoint: the main key
        ({"model": "cheap", "base_url": "{main}/"}, MAIN_KEY),  # the same endpoint, spelled /
        ({"model": "cheap", "base_url": "{other}"}, NO_KEY_NEEDED),
        ({"base_url": "{other}", "api_key": "sk-aux"}, "sk-aux"),  # a key written for it
    ],
)
async def test_the_main_key_reaches_the_summary_model_only_on_the_same_endpoint(
    fake_llm: FakeLLM, other_host: FakeLLM, auxiliary: dict[str, str], summary_key: str
) -> None:
    urls = {"main": fake_llm.openai_base_url, "other": other_host.openai_base_url}
    auxiliary = {k: v.format(**urls) for k, v in auxiliary.items()}
    config = configured(fake_llm, model={"api_key": MAIN_KEY}, auxiliary={"compression": auxiliary})
    await ask_both(config)
    if auxiliary.get("base_url", "").startswith(urls["other"]):
        assert keys(fake_llm) == {MAIN_KEY} and keys(other_host) == {summary_key}
    else:
        assert keys(fake_llm) == {MAIN_KEY, summary_key} and other_host.request_count == 0


async def test_a_summary_model_of_another_provider_never_gets_the_main_key(
    fake_llm: FakeLLM, other_host: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)  # Anthropic's key: for Anthropic's API
    config = configured(
        fake_llm,
        model={"api_key": MAIN_KEY},
        auxiliary={
            "compression": {"provider": "anthropic", "base_url": other_host.anthropic_base_url}
        },
    )
    await ask_both(config)
    assert [request.api for request in other_host.requests] == ["anthropic"]
    assert keys(other_host) == {NO_KEY_NEEDED}


async def test_the_providers_environment_key_never_goes_to_a_custom_base_url(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    await ask_both(configured(fake_llm))
    assert keys(fake_llm) == {NO_KEY_NEEDED}

    # Written out for that endpoint, the same variable is sent there.
    fake_llm.requests.clear()
    config = parse_config(
        {"model": {"base_url": fake_llm.openai_base_url, "api_key": "${OPENAI_API_KEY}"}},
        {"OPENAI_API_KEY": ENV_KEY},
    )
    await ask_both(config)
    assert keys(fake_llm) == {ENV_KEY}


async def test_a_base_url_from_the_sdks_own_variable_is_a_custom_endpoint_too(
    fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No base_url in the config: the OpenAI SDK then reads OPENAI_BASE_URL itself.
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    await ask_both(parse_config({"model": {"name": "m", "max_retries": 0}}, {}))
    assert keys(fake_llm) == {NO_KEY_NEEDED}


@pytest.mark.parametrize(
    ("provider", "base_url", "expected"),
    [
        ("openai", None, ENV_KEY),
        ("openai", "https://api.openai.com/v1", ENV_KEY),
        ("openai", "https://API.openai.com/v1/", ENV_KEY),
        ("anthropic", "https://api.anthropic.com", ENV_KEY),
        ("openai", "https://api.openai.com.proxy.example/v1", NO_KEY_NEEDED),
        ("openai", "http://api.openai.com/v1", NO_KEY_NEEDED),  # not over plain HTTP
        ("openai", "https://api.anthropic.com", NO_KEY_NEEDED),  # another provider's host
        ("anthropic", "http://127.0.0.1:8080", NO_KEY_NEEDED),
    ],
)
def test_the_environment_key_goes_to_the_providers_own_api_only(
    provider: str, base_url: str | None, expected: str
) -> None:
    variable = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    assert resolve_api_key(provider, None, base_url, {variable: ENV_KEY}) == expected
    assert resolve_api_key(provider, "written", base_url, {variable: ENV_KEY}) == "written"


async def test_doctor_says_how_to_send_a_withheld_key_to_a_custom_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway.ops.reachability import check_providers

    # A proxy that wants the OpenAI key: it is no longer sent there unasked.
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    async with FakeLLM(api_key=ENV_KEY) as proxy:
        [check] = await check_providers(configured(proxy), timeout=CEILING)
        assert not check.ok and "401" in check.detail
        assert check.hint == (
            "OPENAI_API_KEY is sent only to api.openai.com; to send it to this base_url, "
            "write model.api_key: ${OPENAI_API_KEY}"
        )
        written = {
            "base_url": proxy.openai_base_url,
            "name": "fake-model",
            "api_key": "${OPENAI_API_KEY}",
        }
        config = parse_config({"model": written}, {"OPENAI_API_KEY": ENV_KEY})
        [check, window] = await check_providers(config, timeout=CEILING)
        assert check.ok, check
        assert window.name == "window" and "cautious guess" in window.detail
        # The placeholder was refused by the listing, before any request; the key went
        # only once written for this base_url.
        assert keys(proxy) == {ENV_KEY}


async def test_doctor_reads_the_key_from_the_env_file_beside_the_config_as_run_does(
    tmp_path: Path,
) -> None:
    from gateway.config.schema import load_config
    from gateway.ops.reachability import check_providers

    # OPENAI_API_KEY only in the .env (the environment has none): still withheld from
    # a proxy, and doctor says how to send it there.
    async with FakeLLM(api_key=ENV_KEY) as proxy:
        (tmp_path / ".env").write_text(f"OPENAI_API_KEY={ENV_KEY}\n")
        (tmp_path / "config.yaml").write_text(
            f"model:\n  base_url: {proxy.openai_base_url}\n  name: fake-model\n"
        )
        [check] = await check_providers(load_config(tmp_path / "config.yaml"), timeout=CEILING)
    assert not check.ok and "401" in check.detail
    assert check.hint == (
        "OPENAI_API_KEY is sent only to api.openai.com; to send it to this base_url, "
        "write model.api_key: ${OPENAI_API_KEY}"
    )


def test_a_model_is_named_by_its_server_unless_that_is_the_provider_s_own_api() -> None:
    """An Ollama speaks OpenAI's protocol but is not OpenAI; two servers' models differ."""
    assert model_label("gpt-4o-mini", "openai", None) == "gpt-4o-mini via openai"
    assert model_label("gpt-4o", "openai", "https://api.openai.com/v1") == "gpt-4o via openai"
    assert (
        model_label("qwen3:8b", "openai", "http://127.0.0.1:11434/v1")
        == "qwen3:8b at 127.0.0.1:11434"
    )
    proxied = model_label("m", "openai", "https://owl:pw@proxy.lan/v1?key=k")
    assert proxied == "m at proxy.lan"
