"""Can nightowl reach its model provider and chat platforms with these credentials?

The network half of ``nightowl doctor``: each check returns one :class:`Check`. The
provider check lists the server's models (a wrong ``model.name`` is caught with the names
the server does serve) and sends a 1-token request (the key and the model work
together); Telegram answers getMe and Discord a REST login, through their own libraries;
the alerts webhook accepts a TCP connection (nothing is sent to it).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.model_metadata import ContextLengthResolver
from agent.providers import ProviderError, ProviderSettings, make_provider
from agent.served_window import is_listed
from agent.urls import shown_url
from gateway.config.alerts import alert_target
from gateway.config.platforms import WebhookConfig
from gateway.config.routes import (
    BASE_URL_VARIABLES,
    KEY_VARIABLES,
    NO_KEY_NEEDED,
    OFFICIAL_HOSTS,
    ModelRoute,
    is_providers_own_api,
)
from gateway.config.schema import (
    Config,
    dotenv_beside,
    main_model_route,
    resolve_api_key,
    summary_model_route,
)
from gateway.connecting import connect_problem, proxied
from nightowl_errors import redact


@dataclass(frozen=True)
class Check:
    """One line of ``nightowl doctor``: what was checked, whether it passed, and why."""

    name: str
    ok: bool
    detail: str
    #: What to do about a failure (shown after the detail).
    hint: str = ""


# -- the model provider --------------------------------------------------------------------


async def check_providers(config: Config, timeout: float) -> list[Check]:
    """The provider check for the main model (then its window, when the server says) and
    the summary model's."""
    routes = [("provider", main_model_route(config))]
    summary = summary_model_route(config)
    if summary is not None:
        routes.append(("summary model", summary))
    # What `nightowl run` reads: the environment, and the .env beside the config.
    environ = dict(os.environ)
    if config.source is not None:
        environ |= dotenv_beside(config.source, environ)
    checks = []
    for label, route in routes:
        check = await check_provider(
            label,
            route.provider,
            route.name,
            route.base_url,
            route.api_key,
            timeout,
            environ=environ,
        )
        checks.append(check)
        if check.ok and label == "provider":
            window = await check_window(
                route, config.model.context_length, timeout, config.data_dir
            )
            checks += [window] if window is not None else []
    return checks


def _unsaid_window(route: ModelRoute, configured: int | None, data_dir: Path) -> Check | None:
    """A self-hosted server that does not say its window, where nothing else decides it
    (``model.context_length``, the table of known models, a window already learned in
    ``data_dir``): the window is the resolver's guess, said here, not only in /status."""
    if is_providers_own_api(route.provider, route.base_url):
        return None
    resolved = ContextLengthResolver(data_dir).resolve_with_source(
        route.name, route.provider, route.base_url, override=configured
    )
    if resolved.source != "default":
        return None
    return Check(
        "window",
        True,
        f"the server does not say what window it serves {route.name} with: nightowl assumes"
        f" {resolved.tokens:,} tokens (a cautious guess) until an overflow teaches it the"
        " real one; set model.context_length to what it serves",
    )


async def check_window(
    route: ModelRoute, configured: int | None, timeout: float, data_dir: Path
) -> Check | None:
    """What the server says it serves the model with (docs/design.md#served-window),
    against ``model.context_length``; None when the server lacks the model (the provider's
    check says so), a hosted API does not say, or the window
    is configured or known (``data_dir``: where learned windows are kept)."""
    key = resolve_api_key(route.provider, route.api_key, route.base_url)
    provider = make_provider(
        ProviderSettings(route.provider, route.name, api_key=key, base_url=route.base_url)
    )
    try:
        async with asyncio.timeout(timeout):
            served = await provider.served_window()
    except Exception:  # asking is best effort: the provider check above says what is wrong
        served = None
    finally:
        await provider.aclose()
    if served is None:
        return _unsaid_window(route, configured, data_dir)
    if not served.has_model:  # the provider's line says so, with the names it has
        return None
    if served.tokens is None:
        declared = f" (it declares {served.declared:,})" if served.declared else ""
        return Check(
            "window",
            True,
            f"{served.server} has not loaded {route.name} yet: its window is asked again "
            f"after the first message{declared}",
        )
    if configured and served.tokens < configured:
        return Check(
            "window",
            False,
            f"the server serves {served.tokens:,} tokens, not {configured:,}",
            f"{served.hint(configured)}, or lower model.context_length",
        )
    more = ""
    if served.declared and served.declared > served.tokens:
        more = (
            f" (the model declares {served.declared:,}: to give it more,"
            f" {served.hint(served.declared)})"
        )
    detail = f"{served.server} serves {route.name} with {served.tokens:,} tokens{more}"
    return Check("window", True, detail)


async def check_provider(
    label: str,
    provider: str,
    model: str,
    base_url: str | None,
    configured_key: str | None,
    timeout: float,
    *,
    environ: Mapping[str, str] | None = None,
) -> Check:
    """The server lists the model (where it has a listing) and answers a 1-token request.

    The listing catches a wrong model name with the names it does serve; the request
    proves the key and the model work together (it costs a handful of tokens).
    ``environ``: the variables the config is read with (default: the environment).
    """
    key = resolve_api_key(provider, configured_key, base_url)
    if key is None:
        return Check(label, False, "skipped: no key", "see the secrets line")
    env = os.environ if environ is None else environ
    # Where the SDK sends it: its own variable (OPENAI_BASE_URL...) when no base_url is
    # set, shown without what may hold a secret (its user, password, path and query).
    from_env = env.get(BASE_URL_VARIABLES.get(provider, ""))
    where = base_url or (shown_url(from_env) if from_env else OFFICIAL_HOSTS[provider])
    # The SDK's import (two seconds cold, for anthropic) is no part of the server's answer.
    importlib.import_module("anthropic" if provider == "anthropic" else "openai")
    try:
        async with asyncio.timeout(timeout):
            models = await list_models(provider, key, base_url, timeout)
            if models and not is_listed(model, models):
                return Check(
                    label,
                    False,
                    f"{where} answers, but does not list the model {model}",
                    f"set model.name to one it serves (e.g. {', '.join(models[:5])})",
                )
            await one_token_request(provider, model, key, base_url, timeout)
    except TimeoutError:
        return Check(label, False, f"{where} did not answer within {timeout:g} s", REACH_HINT)
    except ProviderError as exc:
        hint = _provider_hint(exc.kind)
        if exc.kind == "auth" and key == NO_KEY_NEEDED:
            hint = _withheld_key_hint(label, provider, env) or hint
        return Check(label, False, f"{where}: {exc}", hint)
    return Check(label, True, f"{model} at {where} answered a 1-token request")


REACH_HINT = "check model.base_url, the network, and that the server is running"


def _provider_hint(kind: str) -> str:
    return {
        "auth": "the API key was rejected: check it (and its quota) with the provider",
        "network": REACH_HINT,
        "timeout": REACH_HINT,
        "rate_limit": "rate-limited right now: try again in a minute",
    }.get(kind, "see the provider's status page")


def _withheld_key_hint(label: str, provider: str, environ: Mapping[str, str]) -> str | None:
    """A custom endpoint refused the placeholder while the provider's own variable is
    set (in ``environ``): that key goes only to the provider's API
    (gateway/config/routes.py)."""
    variable = KEY_VARIABLES.get(provider)
    if not variable or not environ.get(variable):
        return None
    key_path = "model.api_key" if label == "provider" else "auxiliary.compression.api_key"
    return (
        f"{variable} is sent only to {OFFICIAL_HOSTS[provider]}; to send it to this "
        f"base_url, write {key_path}: ${{{variable}}}"
    )


async def list_models(
    provider: str, key: str, base_url: str | None, timeout: float
) -> list[str] | None:
    """The model ids the server lists; None when it has no listing endpoint. Through the
    provider's own listing (the one the start asks), in doctor's words on failure."""
    client = make_provider(
        ProviderSettings(
            provider, "-", api_key=key, base_url=base_url, timeout=timeout, max_retries=0
        )
    )
    try:
        return await client.listed_models()
    except ProviderError as exc:
        raise _in_doctors_words(exc) from exc
    finally:
        await client.aclose()


def _in_doctors_words(exc: ProviderError) -> ProviderError:
    if exc.status in (401, 403):
        return ProviderError("auth", f"the key was refused (HTTP {exc.status})", status=exc.status)
    if exc.kind == "timeout":
        return ProviderError("timeout", "the request timed out")
    if exc.kind == "network":
        return ProviderError("network", f"cannot connect ({exc})")
    return exc


async def one_token_request(
    provider: str, model: str, key: str, base_url: str | None, timeout: float
) -> None:
    client = make_provider(
        ProviderSettings(
            provider=provider,
            model=model,
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
        )
    )
    try:
        await client.complete([{"role": "user", "content": "ping"}], max_tokens=1)
    finally:
        await client.aclose()


# -- chat platforms ------------------------------------------------------------------------


async def check_telegram(config: Config, timeout: float) -> Check:
    """getMe with the configured token, through python-telegram-bot."""
    import telegram
    from telegram.request import HTTPXRequest

    from adapters.telegram import TelegramSettings

    settings = TelegramSettings(
        token=config.platforms.telegram.token or "", base_url=config.platforms.telegram.base_url
    )
    request = HTTPXRequest(connect_timeout=timeout, read_timeout=timeout)
    bot = telegram.Bot(settings.token, base_url=settings.api_base_url, request=request)
    try:
        async with asyncio.timeout(timeout):
            me = await bot.get_me()
            hook = await bot.get_webhook_info()
    except telegram.error.InvalidToken:
        return Check("telegram", False, "the bot token was refused", _TOKEN_HINT["telegram"])
    except (telegram.error.TelegramError, TimeoutError) as exc:
        return Check("telegram", False, f"getMe failed: {exc}", "check the network / base_url")
    finally:
        await request.shutdown()
    said = f"bot @{me.username} (id {me.id}) answers getMe"
    words = _webhook_words(hook, config.platforms.telegram.webhook)
    return Check("telegram", True, said + redact(words, settings.token))


def _webhook_words(hook: Any, webhook: WebhookConfig | None) -> str:
    """What getWebhookInfo says of where updates go, against the config: whether
    Telegram sends them to this config's webhook, how many wait, its last delivery error
    (a reverse proxy down, a certificate it refuses)."""
    waiting = f"; {hook.pending_update_count} update(s) wait" if hook.pending_update_count else ""
    if webhook is None:
        if not hook.url:
            return waiting
        return f"; a webhook is set ({hook.url}): nightowl run removes it to poll{waiting}"
    if not hook.url:
        return f"; no webhook is set yet (nightowl run sets {webhook.url}){waiting}"
    if hook.url != webhook.url:
        return f"; Telegram sends updates to {hook.url}, not {webhook.url} (run sets it){waiting}"
    words = f"; Telegram sends updates to {webhook.url}{waiting}"
    if hook.last_error_date and hook.last_error_message:
        ago = max(0, round((datetime.now(UTC) - hook.last_error_date).total_seconds() / 60))
        words += f"; its last delivery error, {ago} min ago: {hook.last_error_message}"
    return words


async def check_discord(config: Config, timeout: float) -> Check:
    """Log in over REST (GET /users/@me) with discord.py's HTTP client; no gateway socket."""
    import aiohttp
    import discord
    from discord.http import HTTPClient

    http = HTTPClient(asyncio.get_running_loop())
    try:
        async with asyncio.timeout(timeout):
            me = await http.static_login(config.platforms.discord.token or "")
            flags = int((await http.application_info()).get("flags") or 0)
    except discord.LoginFailure:
        return Check("discord", False, "the bot token was refused", _TOKEN_HINT["discord"])
    except (discord.HTTPException, aiohttp.ClientError, TimeoutError) as exc:
        return Check("discord", False, f"login failed: {exc}", "check the network")
    finally:
        await http.close()
    who = f"bot {me['username']} (id {me['id']}) logged in"
    if not flags & MESSAGE_CONTENT_FLAGS:
        return Check(
            "discord",
            False,
            f"{who}, but its Message Content intent is off: run would be refused",
            "turn it on in Discord's developer portal (Bot, Privileged Gateway Intents)",
        )
    return Check("discord", True, who)


#: The application flags of the portal's Message Content switch: GATEWAY_MESSAGE_CONTENT
#: (a verified bot, 100 servers or more) and ..._LIMITED (under 100): without either the
#: gateway refuses the intent at IDENTIFY (close code 4014).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)


_TOKEN_HINT = {
    "telegram": "check platforms.telegram.token (from @BotFather)",
    "discord": "check platforms.discord.token (Developer Portal → Bot → Reset Token)",
}


# -- alerts --------------------------------------------------------------------------------


async def check_alerts_reach(config: Config, timeout: float) -> Check | None:
    """Whether the alerts can leave (docs/operations.md#alerts): each ``alerts.to`` on a
    platform that is enabled, the webhook's host accepting a TCP connection (nothing is
    sent to it: no alert, fake or real). None when nobody is to be told."""
    alerts = config.alerts
    if not alerts.enabled:
        return None
    problems: list[tuple[str, str]] = []
    chats = []
    for entry in alerts.to:
        platform, _ = alert_target(entry)
        if getattr(config.platforms, platform).enabled:  # load_config knows the platform
            chats.append(entry)
            continue
        problems.append(
            (
                f"alerts.to has {entry} but {platform} is not enabled: its alerts are only logged",
                f"enable platforms.{platform} or remove {entry} from alerts.to",
            )
        )
    told = list(chats)
    if alerts.webhook:
        shown = shown_url(alerts.webhook)
        if proxied(alerts.webhook):
            told.append(f"{shown} (through the environment's proxy: not checked)")
        elif (why := await connect_problem(alerts.webhook, timeout)) is None:
            told.append(f"{shown} (it accepts connections; nothing was sent)")
        else:
            rest = "go to alerts.to only" if chats else "only be logged"
            problems.append(
                (
                    f"the alerts webhook {shown} cannot be reached: {why}; alerts will {rest}",
                    "check alerts.webhook, the network, and that the receiver is running",
                )
            )
    if problems:
        details, hints = zip(*problems, strict=True)
        return Check("alerts", False, "; ".join(details), "; ".join(dict.fromkeys(hints)))
    return Check("alerts", True, f"to {', '.join(told)}, after {alerts.after_seconds:g} s")
