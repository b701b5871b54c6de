"""``nightowl doctor``: is this install ready to run? One line per check, ✓ or ✗ with a fix.

Checks, in order: the config parses; the secrets it needs resolve; the model provider
answers (a models listing, or a 1-token request where the server has no listing); the
Telegram bot token works (getMe) and the Discord one logs in, when those platforms are
enabled; the database opens read-only, passes ``PRAGMA integrity_check`` and has a known
schema; the database, its WAL files, the config and its ``.env`` are not readable by
other users (``--fix``, or answering yes, makes them private). The exit code is 0 only
when every check passes. Nothing is created, migrated or sent to a chat.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from agent.providers import ProviderError, ProviderSettings, make_provider
from gateway.config import (
    Config,
    ConfigError,
    default_config_paths,
    load_config,
    missing_llm_key_message,
    resolve_api_key,
)
from gateway.logs import config_secrets, redact, setup_logging
from gateway.store import SQLiteStore


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    #: What to do about a failure (shown after the detail).
    hint: str = ""


class Report:
    """Prints each check as it completes; ``ok`` is False after any failure."""

    def __init__(self, out: TextIO, secrets: list[str] | None = None) -> None:
        self.out = out
        self.secrets = list(secrets or [])
        self.ok = True
        encoding = getattr(out, "encoding", None) or "utf-8"
        try:
            "✓✗".encode(encoding)
            self.marks = ("✓", "✗")
        except (UnicodeEncodeError, LookupError):
            self.marks = ("OK  ", "FAIL")

    def add(self, check: Check) -> None:
        self.ok = self.ok and check.ok
        line = f"{self.marks[0] if check.ok else self.marks[1]} {check.name}: {check.detail}"
        if check.hint and not check.ok:
            line += f" — {check.hint}"
        print(redact(line, self.secrets), file=self.out, flush=True)


async def run_doctor(
    config_path: str | None,
    *,
    fix: bool = False,
    timeout: float = 10.0,
    log_format: str | None = None,
    out: TextIO | None = None,
    confirm: Callable[[str], str] | None = None,
) -> int:
    """Run every check, print one line each; 0 when all pass, else 1."""
    report = Report(out or sys.stdout)
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        report.add(Check("config", False, str(exc), "fix that key (see config.yaml.example)"))
        return 1
    setup_logging(config, fmt=log_format)
    report.secrets = config_secrets(config)
    report.add(describe_config(config))
    report.add(check_secrets(config))
    for check in await check_providers(config, timeout):
        report.add(check)
    if config.platforms.telegram.enabled:
        report.add(await check_telegram(config, timeout))
    if config.platforms.discord.enabled:
        report.add(await check_discord(config, timeout))
    report.add(await check_database(config))
    report.add(check_permissions(config, fix=fix, confirm=confirm))
    return 0 if report.ok else 1


# -- config and secrets --------------------------------------------------------------------


def describe_config(config: Config) -> Check:
    if config.source is None:
        looked = ", ".join(str(p) for p in default_config_paths())
        where = f"no config file ({looked} not found): built-in defaults"
    else:
        where = str(config.source.absolute())
    platforms = [
        name
        for name, on in (
            ("telegram", config.platforms.telegram.enabled),
            ("discord", config.platforms.discord.enabled),
            ("console", config.console_enabled),
        )
        if on
    ]
    model = config.model
    return Check(
        "config",
        True,
        f"{where} (model {model.name} via {model.provider}; {', '.join(platforms)})",
    )


def check_secrets(config: Config) -> Check:
    model = config.model
    key = resolve_api_key(model.provider, model.api_key, model.base_url)
    if key is None:
        return Check("secrets", False, "no LLM key", missing_llm_key_message(config))
    found = ["LLM key found" if key != "not-needed" else "no LLM key needed (local server)"]
    for name in ("telegram", "discord"):
        if getattr(config.platforms, name).enabled:
            found.append(f"{name} token set")  # load_config refused it if missing
    detail = ", ".join(found)
    from_shell = shell_only_variables(config)
    if from_shell:
        dotenv = config.source.parent / ".env" if config.source else Path(".env")
        detail += (
            f" (note: {', '.join(from_shell)} came from this shell's environment, which a "
            f"systemd service does not have; put them in {dotenv})"
        )
    return Check("secrets", True, detail)


def shell_only_variables(config: Config) -> list[str]:
    """Environment variables holding a secret in use that the config's ``.env`` lacks."""
    secrets = set(config_secrets(config))
    dotenv = config.source.parent / ".env" if config.source else None
    defined = dotenv.read_text(encoding="utf-8") if dotenv and dotenv.is_file() else ""
    names = {m.group(1) for m in re.finditer(r"^\s*(?:export\s+)?(\w+)\s*=", defined, re.M)}
    return sorted(
        name for name, value in os.environ.items() if value in secrets and name not in names
    )


# -- the model provider --------------------------------------------------------------------


async def check_providers(config: Config, timeout: float) -> list[Check]:
    model = config.model
    checks = [
        await check_provider(
            "provider", model.provider, model.name, model.base_url, model.api_key, timeout
        )
    ]
    aux = config.auxiliary.compression
    if aux.model or aux.provider or aux.base_url:
        provider = aux.provider or model.provider
        base_url = aux.base_url or (model.base_url if provider == model.provider else None)
        checks.append(
            await check_provider(
                "summary model",
                provider,
                aux.model or model.name,
                base_url,
                aux.api_key or model.api_key,
                timeout,
            )
        )
    return checks


async def check_provider(
    label: str,
    provider: str,
    model: str,
    base_url: str | None,
    configured_key: str | None,
    timeout: float,
) -> Check:
    """The server lists the model (where it has a listing) and answers a 1-token request.

    The listing catches a wrong model name with the names it does serve; the request
    proves the key and the model work together (it costs a handful of tokens).
    """
    key = resolve_api_key(provider, configured_key, base_url)
    if key is None:
        return Check(label, False, "skipped: no key", "see the secrets line")
    where = base_url or ("api.anthropic.com" if provider == "anthropic" else "api.openai.com")
    try:
        async with asyncio.timeout(timeout):
            models = await list_models(provider, key, base_url, timeout)
            if models and not _model_listed(model, models):
                return Check(
                    label,
                    False,
                    f"{where} answers, but does not list the model {model}",
                    f"set model.name to one it serves (e.g. {', '.join(models[:5])})",
                )
            await one_token_request(provider, model, key, base_url, timeout)
    except TimeoutError:
        return Check(label, False, f"{where} did not answer within {timeout:g} s", _REACH_HINT)
    except ProviderError as exc:
        return Check(label, False, f"{where}: {exc}", _provider_hint(exc.kind))
    return Check(label, True, f"{model} at {where} answered a 1-token request")


_REACH_HINT = "check model.base_url, the network, and that the server is running"


def _provider_hint(kind: str) -> str:
    return {
        "auth": "the API key was rejected: check it (and its quota) with the provider",
        "network": _REACH_HINT,
        "timeout": _REACH_HINT,
        "rate_limit": "rate-limited right now: try again in a minute",
    }.get(kind, "see the provider's status page")


def _model_listed(model: str, models: list[str]) -> bool:
    # Anthropic lists dated ids and accepts the undated alias.
    return any(m == model or m.startswith(model + "-") for m in models)


async def list_models(
    provider: str, key: str, base_url: str | None, timeout: float
) -> list[str] | None:
    """The model ids the server lists; None when it has no listing endpoint."""
    if provider == "anthropic":
        import anthropic

        client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=0
        )
        sdk_errors: tuple[type[Exception], ...] = (anthropic.APIError,)
    else:
        import openai

        client = openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)
        sdk_errors = (openai.APIError,)
    try:
        page = await client.models.list()
        return [m.id for m in page.data]
    except sdk_errors as exc:
        status = getattr(exc, "status_code", None)
        if status in (404, 405):
            return None
        raise _as_provider_error(provider, exc, status) from exc
    finally:
        await client.close()


def _as_provider_error(provider: str, exc: Exception, status: int | None) -> ProviderError:
    name = type(exc).__name__
    if status in (401, 403):
        return ProviderError("auth", f"the key was refused (HTTP {status})", status=status)
    if "Timeout" in name:
        return ProviderError("timeout", "the request timed out")
    if "Connection" in name:
        cause = exc.__cause__ or exc
        return ProviderError("network", f"cannot connect ({cause})")
    return ProviderError("other", f"HTTP {status}: {exc}" if status else str(exc), status=status)


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
    except telegram.error.InvalidToken:
        return Check("telegram", False, "the bot token was refused", _TOKEN_HINT["telegram"])
    except (telegram.error.TelegramError, TimeoutError) as exc:
        return Check("telegram", False, f"getMe failed: {exc}", "check the network / base_url")
    finally:
        await request.shutdown()
    return Check("telegram", True, f"bot @{me.username} (id {me.id}) answers getMe")


async def check_discord(config: Config, timeout: float) -> Check:
    """Log in over REST (GET /users/@me) with discord.py's HTTP client; no gateway socket."""
    import aiohttp
    import discord
    from discord.http import HTTPClient

    http = HTTPClient(asyncio.get_running_loop())
    try:
        async with asyncio.timeout(timeout):
            me = await http.static_login(config.platforms.discord.token or "")
    except discord.LoginFailure:
        return Check("discord", False, "the bot token was refused", _TOKEN_HINT["discord"])
    except (discord.HTTPException, aiohttp.ClientError, TimeoutError) as exc:
        return Check("discord", False, f"login failed: {exc}", "check the network")
    finally:
        await http.close()
    return Check("discord", True, f"bot {me['username']} (id {me['id']}) logged in")


_TOKEN_HINT = {
    "telegram": "check platforms.telegram.token (from @BotFather)",
    "discord": "check platforms.discord.token (Developer Portal → Bot → Reset Token)",
}


# -- database and files --------------------------------------------------------------------


async def check_database(config: Config) -> Check:
    path = config.database_path
    if not path.exists():
        writable = _nearest_existing(path.parent)
        if not _can_write(writable):
            return Check(
                "database",
                False,
                f"{path} does not exist and {writable} is not writable",
                "fix data_dir or its owner",
            )
        return Check("database", True, f"none yet; the first run creates {path}")
    try:
        found = await SQLiteStore.inspect(path)
    except sqlite3.Error as exc:
        return Check("database", False, f"cannot open {path}: {exc}", _RESTORE_HINT)
    if not found.sound:
        problems = "; ".join(found.integrity[:3])
        return Check("database", False, f"integrity check failed: {problems}", _RESTORE_HINT)
    version = f"schema v{found.schema_version}"
    if found.schema_version > found.current_version:
        return Check(
            "database",
            False,
            f"{version} is newer than this nightowl (v{found.current_version})",
            "upgrade nightowl",
        )
    if found.schema_version < found.current_version:
        version += f" (upgraded to v{found.current_version} at the next start)"
    return Check("database", True, f"{path}: integrity ok, {version}")


_RESTORE_HINT = "stop the gateway and restore state.db from a backup"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _can_write(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def private_files(config: Config) -> list[Path]:
    """Files that hold transcripts or secrets: they must not be readable by other users."""
    db = config.database_path
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    if config.source is not None:
        files += [config.source, config.source.parent / ".env"]
    return [f for f in files if f.is_file()]


def check_permissions(
    config: Config, *, fix: bool = False, confirm: Callable[[str], str] | None = None
) -> Check:
    """Flag private files other users can read or write; ``fix`` (or a yes) chmods them 600.

    ``confirm`` asks the question; by default only an interactive terminal is asked.
    """
    modes = [(f, stat.S_IMODE(f.stat().st_mode)) for f in private_files(config)]
    exposed = [(f, mode) for f, mode in modes if mode & 0o007]
    if not exposed:
        return Check("permissions", True, "database and config are not readable by other users")
    listing = ", ".join(f"{f} ({mode:04o})" for f, mode in exposed)
    if not fix:
        fix = _ask_to_fix(listing, confirm)
    if not fix:
        return Check(
            "permissions",
            False,
            f"readable by other users: {listing}",
            "run: nightowl doctor --fix (chmod 600)",
        )
    for path, _ in exposed:
        path.chmod(0o600)
    return Check("permissions", True, f"made private (0600): {listing}")


def _ask_to_fix(listing: str, confirm: Callable[[str], str] | None) -> bool:
    if confirm is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return False
        confirm = input
    try:
        answer = confirm(f"Other users can read {listing}. Make them private now? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
