"""``nightowl init``: a first-run setup that asks only what it must.

Which platforms; each token, checked at once (Telegram getMe, Discord login); the model,
an API key or a local server's URL, checked with a 1-token request, and the window a
local server serves shown; then ``config.yaml`` and ``.env`` are written in the data dir
(:mod:`gateway.ops.init_files`) and the owner is offered to pair
(:mod:`gateway.ops.init_owner`). Questions are plain lines, so a script or a bad SSH link
can answer them; ``--non-interactive`` takes everything from flags. The checks are
doctor's own (:mod:`gateway.ops.reachability`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import termios
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from adapters.base import DeliveryError
from agent.providers import ProviderError
from gateway.config.routes import KEY_VARIABLES, NO_KEY_NEEDED, OFFICIAL_HOSTS, ModelRoute
from gateway.config.schema import load_config, parse_config
from gateway.conversation.pairing import printable
from gateway.ops.init_files import (
    TOKEN_VARIABLES,
    Answers,
    Model,
    Platform,
    find_example,
    owners_by_platform,
    write_files,
)
from gateway.ops.init_owner import wait_for_owner
from gateway.ops.reachability import (
    REACH_HINT,
    Check,
    check_discord,
    check_provider,
    check_telegram,
    check_window,
    list_models,
)
from nightowl_errors import NightowlError

PLATFORMS = ("telegram", "discord", "console")
PROVIDERS = ("openai", "anthropic")
DEFAULT_DATA_DIR = "~/.nightowl"
DEFAULT_MODELS = {"openai": "gpt-4o-mini"}
PAIR_LATER = (
    "Later: start nightowl, write to the bot, and approve the code it answers with:"
    " nightowl pairing approve CODE."
)
PROVIDER_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic"}
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

TOKEN_WHERE = {
    "telegram": "from @BotFather",
    "discord": "Developer Portal → your application → Bot → Reset Token",
}


class Stop(NightowlError):
    """The answers ended (Ctrl-D, or a script's input ran out)."""


def add_init_parser(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser(
        "init", help="first-run setup: platforms, tokens, model; writes config.yaml and .env"
    )
    init.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help=f"where config.yaml, .env and the database go (default {DEFAULT_DATA_DIR})",
    )
    init.add_argument(
        "--non-interactive", action="store_true", help="ask nothing: take every answer from flags"
    )
    init.add_argument(
        "--example",
        action="store_true",
        help="print config.yaml.example (every key, with its default, commented) and stop",
    )
    init.add_argument(
        "--force", action="store_true", help="--non-interactive: overwrite an existing config"
    )
    init.add_argument(
        "--platform", action="append", choices=PLATFORMS, help="(repeatable; default console)"
    )
    init.add_argument(
        "--telegram-token",
        metavar="TOKEN",
        help="(visible to other users in ps: prefer $TELEGRAM_BOT_TOKEN in the environment)",
    )
    init.add_argument(
        "--telegram-base-url", metavar="URL", help="a self-hosted Bot API server (…/bot)"
    )
    init.add_argument(
        "--discord-token",
        metavar="TOKEN",
        help="(visible to other users in ps: prefer $DISCORD_BOT_TOKEN in the environment)",
    )
    init.add_argument(
        "--owner",
        action="append",
        metavar="PLATFORM:ID",
        help="the owner's user id, e.g. telegram:123456789 (repeatable): put in "
        "allowed_users instead of pairing",
    )
    init.add_argument("--model-url", metavar="URL", help="a local OpenAI-compatible server")
    init.add_argument(
        "--api-key-env",
        metavar="VARIABLE",
        help="the environment variable holding the OpenAI/Anthropic key (e.g. OPENAI_API_KEY)",
    )
    init.add_argument("--provider", choices=PROVIDERS, help="with --api-key-env (default openai)")
    init.add_argument("--model", metavar="NAME", help="the model's name (default: asked/listed)")
    init.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="per network check"
    )
    init.add_argument(
        "--no-check",
        action="store_true",
        help="--non-interactive: write without trying the model and the tokens (a machine "
        "not online yet); `nightowl doctor` tries them later",
    )
    init.add_argument(
        "--pair-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the owner's message (default 600)",
    )
    init.set_defaults(handler=cmd_init, reports_config=True)


def cmd_init(args: argparse.Namespace) -> int:
    if args.example:
        return print_example()
    data_dir = Path(args.data_dir).expanduser().absolute()
    try:
        if args.non_interactive:
            return Scripted(args, data_dir).run()
        return Interview(args, data_dir).run()
    except KeyboardInterrupt:
        print("\nnightowl init: stopped; nothing more written.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Stop:
        print("\nnightowl init: the answers ended first; nothing more written.", file=sys.stderr)
        return EXIT_FAILED


def print_example() -> int:
    """``nightowl init --example``: the commented example, wherever it was installed."""
    example = find_example()
    if example is None:
        print("nightowl: config.yaml.example is missing from this installation", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(example.read_text(encoding="utf-8"))
    sys.stdout.flush()
    return 0


def say(text: str = "") -> None:
    print(text, flush=True)


def show(check: Check) -> None:
    mark = "✓" if check.ok else "✗"
    say(f"  {mark} {check.detail}" + (f" — {check.hint}" if check.hint and not check.ok else ""))


# -- the checks (doctor's, on what was typed) ----------------------------------------------


def check_token(platform: Platform, timeout: float) -> Check:
    section: dict[str, object] = {"enabled": True, "token": platform.token}
    if platform.base_url:
        section["base_url"] = platform.base_url
    config = parse_config({"platforms": {platform.name: section}}, {})
    check = check_telegram if platform.name == "telegram" else check_discord
    return asyncio.run(check(config, timeout))


def check_model(model: Model, timeout: float, data_dir: Path) -> list[Check]:
    """The 1-token request, then the window the server serves (or that it does not say)."""

    async def checks() -> list[Check]:
        key = model.key or (NO_KEY_NEEDED if model.base_url else None)
        answered = await check_provider(
            "model", model.provider, model.name, model.base_url, key, timeout
        )
        if not answered.ok:
            return [answered]
        route = ModelRoute(model.provider, model.name, model.base_url, key)
        window = await check_window(route, None, timeout, data_dir)
        return [answered] + ([window] if window is not None else [])

    return asyncio.run(checks())


def as_flags(check: Check, model: Model) -> Check:
    """A check's hint as ``init --non-interactive`` is answered: by its flags, not by the
    config keys it has not written yet."""
    if check.hint == REACH_HINT and not model.base_url:  # the provider's own API: no URL given
        return replace(check, hint="check the network")
    hint = check.hint.replace("model.name", "--model").replace("model.base_url", "--model-url")
    for name, variable in TOKEN_VARIABLES.items():
        hint = hint.replace(f"platforms.{name}.token", f"--{name}-token or ${variable}")
    return replace(check, hint=hint)


def listed_models(provider: str, key: str, base_url: str | None, timeout: float) -> list[str]:
    """The models the server lists ([] when it has no listing); raises ProviderError."""

    async def ask() -> list[str]:
        try:
            async with asyncio.timeout(timeout):
                return await list_models(provider, key, base_url, timeout) or []
        except TimeoutError:
            raise ProviderError("timeout", f"no answer within {timeout:g} s") from None

    return asyncio.run(ask())


def server_url(text: str) -> str:
    """A local server's OpenAI-compatible base URL: ``/v1`` added to a bare address."""
    url = text.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def next_steps(answers: Answers) -> list[str]:
    default = Path(DEFAULT_DATA_DIR).expanduser() / "config.yaml"
    option = "" if answers.config_path == default else f" -c {answers.config_path}"
    written = str(answers.config_path)
    if answers.env_path.is_file():
        written += f" and {answers.env_path}"
    groups = {"telegram": "platforms.telegram.allowed_chats (a group's id)",
              "discord": "platforms.discord.allowed_channels (Copy ID on a channel)"}  # fmt: skip
    where = [groups[p.name] for p in answers.platforms if p.name in groups]
    return [
        f"Wrote {written} (0600; {answers.data_dir} is 0700).",
        f"Check it: nightowl doctor{option}",
        f"Start it: nightowl run{option}",
        *(
            [f"It answers in private chats; for groups, add them to {' and '.join(where)}."]
            if where
            else []
        ),
    ]


# -- asked in the terminal -----------------------------------------------------------------


class Interview:
    def __init__(self, args: argparse.Namespace, data_dir: Path) -> None:
        self.args = args
        self.timeout = args.timeout
        self.data_dir = data_dir

    def run(self) -> int:
        config = self.data_dir / "config.yaml"
        say(
            f"Setting up nightowl in {self.data_dir}. Ctrl-C stops; nothing is written before the model answers."
        )
        if config.exists() and not self.yes(f"{config} exists. Overwrite it?", default=False):
            say("Left as it is.")
            return 0
        names = self.platforms()
        owners = owners_by_platform(self.args.owner or [], names)
        if isinstance(owners, str):
            return _refuse(owners, EXIT_USAGE)
        platforms = [self.token(name) for name in names if name != "console"]
        model = self.model()
        for platform in platforms:
            platform.allowed_users += owners.get(platform.name, [])
        answers = Answers(self.data_dir, model, platforms, console="console" in names)
        write_files(answers)
        for platform in platforms:
            if platform.allowed_users:
                say(f"  {platform.name}: {', '.join(platform.allowed_users)} in allowed_users.")
            else:
                self.pair(answers, platform)
        say()
        for line in next_steps(answers):
            say(line)
        return 0

    # -- one line per answer

    def ask(self, question: str, *, hidden: bool = False) -> str:
        with _no_echo(hidden):
            # The question on stdout (input() puts it on stderr when reading a terminal),
            # once the echo is off: what is typed after it is not shown.
            print(question, end="", flush=True)
            try:
                answer = input()
            except EOFError:
                raise Stop from None
        if hidden:
            say()
        return answer.strip()

    def yes(self, question: str, *, default: bool) -> bool:
        while True:
            answer = self.ask(f"{question} [{'Y/n' if default else 'y/N'}] ").lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            say("  Please answer y or n.")

    def platforms(self) -> list[str]:
        while True:
            answer = self.ask(
                "Platforms: telegram, discord, or both (comma-separated); Enter for the"
                " console only: "
            ).lower()
            chosen = [word for word in answer.replace(",", " ").split() if word]
            unknown = [word for word in chosen if word not in PLATFORMS]
            if unknown:
                say(f"  {', '.join(unknown)}: not one of telegram, discord, console.")
                continue
            return list(dict.fromkeys(chosen)) or ["console"]

    def token(self, name: str) -> Platform:
        base_url = self.args.telegram_base_url if name == "telegram" else None
        while True:
            token = self.ask(f"{name.capitalize()} bot token ({TOKEN_WHERE[name]}): ", hidden=True)
            if not token:
                continue
            platform = Platform(name, token, base_url)
            check = check_token(platform, self.timeout)
            if not check.ok and "refused" in check.detail:
                check = replace(check, hint=f"paste the whole token ({TOKEN_WHERE[name]})")
            show(check)
            if check.ok:
                return platform
            say("  Try again (Ctrl-C stops).")

    def model(self) -> Model:
        while True:
            answer = self.ask(
                "Model: type openai or anthropic (you have an API key), or a local server's URL"
                " (Ollama, llama.cpp, vLLM, LM Studio; e.g. http://127.0.0.1:11434): "
            )
            if not answer:
                continue
            model = (
                self.hosted(answer.lower()) if answer.lower() in PROVIDERS else self.local(answer)
            )
            if model is None:
                continue
            checks = check_model(model, self.timeout, self.data_dir)
            for check in checks:
                show(check)
            if all(check.ok for check in checks):
                return model
            say("  Try again (Ctrl-C stops).")

    def hosted(self, provider: str) -> Model | None:
        variable = KEY_VARIABLES[provider]
        key = self.ask(
            f"{PROVIDER_NAMES[provider]} API key (stored in .env as {variable}): ", hidden=True
        )
        if not key:
            return None
        try:
            models = listed_models(provider, key, None, self.timeout)
        except ProviderError as exc:
            show(Check("model", False, f"{OFFICIAL_HOSTS[provider]}: {exc}"))
            return None
        name = self.model_name(models, DEFAULT_MODELS.get(provider))
        return Model(provider, name, key_variable=variable, key=key)

    def local(self, text: str) -> Model | None:
        url = server_url(text)
        try:
            models = listed_models("openai", NO_KEY_NEEDED, url, self.timeout)
        except ProviderError as exc:
            show(Check("model", False, f"{url}: {exc}", "is the server running there?"))
            return None
        name = self.model_name(models, None)
        return Model("openai", name, base_url=url)

    def model_name(self, models: list[str], default: str | None) -> str:
        if self.args.model:
            return str(self.args.model)
        if len(models) == 1:
            say(f"  It serves {models[0]}.")
            return models[0]
        default = default if default in models or not models else models[0]
        listing = f" ({', '.join(models[:8])})" if models else ""
        while True:
            suffix = f" [{default}]" if default else ""
            name = self.ask(f"Model name{listing}{suffix}: ") or default
            if name:
                return name

    def pair(self, answers: Answers, platform: Platform) -> None:
        if not self.yes(f"Pair yourself as the owner on {platform.name} now?", default=True):
            say(f"  {PAIR_LATER}")
            return
        config = load_config(answers.config_path)
        try:
            owner = asyncio.run(wait_for_owner(config, platform.name, self.args.pair_timeout, say))
        except DeliveryError as exc:  # the adapter could not start (it says why, redacted)
            show(Check(platform.name, False, str(exc)))
            owner = None
        if owner is None:
            say(f"  Not paired. {PAIR_LATER}")
            return
        platform.allowed_users.append(owner.user_id)
        write_files(answers)
        named = f" ({printable(owner.user_name)})" if owner.user_name else ""
        say(f"  ✓ Paired {platform.name} user {owner.user_id}{named}: added to allowed_users.")


@contextlib.contextmanager
def _no_echo(hidden: bool) -> Iterator[None]:
    """Typed secrets are not shown, when the input is a terminal."""
    if not hidden or not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    before = termios.tcgetattr(fd)
    quiet = list(before)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, before)


# -- from flags ----------------------------------------------------------------------------


class Scripted:
    """``--non-interactive``: every answer a flag, every check still made; nothing is
    written unless all pass."""

    def __init__(self, args: argparse.Namespace, data_dir: Path) -> None:
        self.args = args
        self.data_dir = data_dir

    def run(self) -> int:
        args = self.args
        config = self.data_dir / "config.yaml"
        if config.exists() and not args.force:
            return _refuse(f"{config} exists: pass --force to overwrite it", EXIT_USAGE)
        names = list(dict.fromkeys(args.platform or ["console"]))
        owners = owners_by_platform(args.owner or [], names)
        if isinstance(owners, str):
            return _refuse(owners, EXIT_USAGE)
        platforms = []
        for name in names:
            if name == "console":
                continue
            token = getattr(args, f"{name}_token") or os.environ.get(TOKEN_VARIABLES[name])
            if not token:
                return _refuse(
                    f"--platform {name} needs its token: set {TOKEN_VARIABLES[name]} in the"
                    f" environment (or pass --{name}-token, which ps shows to other users)",
                    EXIT_USAGE,
                )
            base_url = args.telegram_base_url if name == "telegram" else None
            platforms.append(Platform(name, token, base_url, owners.get(name, [])))
        model = self.model()
        if isinstance(model, int):
            return model
        if args.no_check:
            say("  not checked (--no-check): run `nightowl doctor` once the machine is online")
        else:
            checks = [as_flags(check_token(p, args.timeout), model) for p in platforms]
            checks += [as_flags(c, model) for c in check_model(model, args.timeout, self.data_dir)]
            for check in checks:
                show(check)
            if not all(check.ok for check in checks):
                return _refuse("a check failed (above): nothing written", EXIT_FAILED)
        answers = Answers(self.data_dir, model, platforms, console="console" in names)
        write_files(answers)
        for line in next_steps(answers):
            say(line)
        return 0

    def model(self) -> Model | int:
        args = self.args
        if bool(args.model_url) == bool(args.api_key_env):
            return _refuse("give one of --model-url URL or --api-key-env VARIABLE", EXIT_USAGE)
        if args.model_url:
            url = server_url(args.model_url)
            if args.model:
                return Model("openai", args.model, base_url=url)
            if args.no_check:
                return _refuse("--no-check needs --model (nothing asks the server)", EXIT_USAGE)
            try:
                models = listed_models("openai", NO_KEY_NEEDED, url, args.timeout)
            except ProviderError as exc:  # what the interactive question adds, too
                return _refuse(f"{url}: {exc}; check that the server runs there", EXIT_FAILED)
            if len(models) != 1:
                return _refuse(
                    f"{url} serves {', '.join(models) or 'no listed model'}: pass --model",
                    EXIT_USAGE,
                )
            return Model("openai", models[0], base_url=url)
        variable = args.api_key_env
        key = os.environ.get(variable)
        if not key:
            return _refuse(f"${variable} is not set in this environment", EXIT_USAGE)
        provider = args.provider or (
            "anthropic" if variable == KEY_VARIABLES["anthropic"] else "openai"
        )
        name = args.model or DEFAULT_MODELS.get(provider)
        if not name:
            return _refuse(f"pass --model (the {provider} model to use)", EXIT_USAGE)
        return Model(provider, name, key_variable=variable, key=key)


def _refuse(sentence: str, code: int) -> int:
    print(f"nightowl init: {sentence}.", file=sys.stderr)
    return code
