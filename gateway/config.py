"""config.yaml → frozen dataclasses, parsed and checked once at start.

Every key has a default here (mirrored in config.yaml.example). ``${VAR}`` in a string is
replaced from the environment, or from a ``.env`` file beside the config. Unknown keys and
wrong types are refused with the key path and the reason, e.g.
``compression.threshold: expected a number between 0 and 1, got "high"``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from gateway.typed_yaml import ConfigError, Unset, build, read_dotenv

__all__ = ["Config", "ConfigError", "load_config", "parse_config"]

DEFAULT_SYSTEM_PROMPT = (
    "You are nightowl, a helpful assistant in a chat. Conversations can be long and span "
    "days; earlier parts may appear as a structured summary. Use the session_search tool "
    "to look up details from earlier in this conversation when you need them. In group "
    "chats, lines from other people are prefixed with their name. Answer concisely."
)


def _range(lo: float, hi: float) -> dict[str, Any]:
    return {"range": (lo, hi)}


def _min(lo: float) -> dict[str, Any]:
    return {"range": (lo, None)}


@dataclass(frozen=True)
class ModelConfig:
    provider: Literal["openai", "anthropic"] = "openai"
    name: str = "gpt-4o-mini"
    base_url: str | None = None
    #: None means: take OPENAI_API_KEY / ANTHROPIC_API_KEY from the environment.
    api_key: str | None = None
    context_length: int | None = field(default=None, metadata=_min(512))
    max_output_tokens: int = field(default=4096, metadata=_min(16))
    timeout_seconds: float = field(default=120.0, metadata=_min(1))
    max_retries: int = field(default=2, metadata=_range(0, 10))
    supports_vision: bool = False
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


@dataclass(frozen=True)
class WebhookConfig:
    url: str
    listen: str = "127.0.0.1"
    port: int = field(default=8443, metadata=_range(1, 65535))
    secret_token: str | None = None


@dataclass(frozen=True)
class TelegramConfig:
    enabled: bool = False
    token: str | None = None
    base_url: str | None = None
    allowed_users: tuple[str, ...] = ()
    allowed_chats: tuple[str, ...] = ()
    require_mention: bool = True
    free_response_chats: tuple[str, ...] = ()
    stream: bool = False
    webhook: WebhookConfig | None = None
    health_timeout_seconds: float = field(default=300.0, metadata=_min(10))


@dataclass(frozen=True)
class DiscordConfig:
    enabled: bool = False
    token: str | None = None
    allowed_users: tuple[str, ...] = ()
    allowed_channels: tuple[str, ...] = ()
    allowed_roles: tuple[str, ...] = ()
    require_mention: bool = True
    free_response_channels: tuple[str, ...] = ()
    allow_bots: bool = False


@dataclass(frozen=True)
class ConsoleConfig:
    #: "auto": on when no other platform is enabled.
    enabled: bool | Literal["auto"] = "auto"
    name: str = "local"


@dataclass(frozen=True)
class PlatformsConfig:
    telegram: TelegramConfig = field(default_factory=TelegramConfig)
    discord: DiscordConfig = field(default_factory=DiscordConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)


@dataclass(frozen=True)
class GroupsConfig:
    #: Store group messages not addressed to the bot, so it has the context (SPEC F3).
    observe: bool = True


@dataclass(frozen=True)
class CompressionConfig:
    enabled: bool = True
    threshold: float = field(default=0.50, metadata=_range(0, 1))
    model_thresholds: dict[str, float] = field(default_factory=dict, metadata=_range(0, 1))
    target_ratio: float = field(default=0.20, metadata=_range(0, 1))
    tail_mode: Literal["lean", "legacy"] = "lean"
    protect_last_n: int = field(default=20, metadata=_min(1))
    min_tail_user_messages: int = field(default=1, metadata=_min(0))
    in_place: bool = True
    hygiene_hard_message_limit: int = field(default=5000, metadata=_min(4))
    abort_on_summary_failure: bool = False
    max_compression_attempts: int = field(default=3, metadata=_range(1, 10))
    context_timeout_seconds: float = field(default=120.0, metadata=_min(1))
    #: Idle compression (SPEC C13) is off unless this is set.
    idle_after_minutes: float | None = field(default=None, metadata=_min(1))
    idle_threshold: float = field(default=0.30, metadata=_range(0, 1))


@dataclass(frozen=True)
class AuxiliaryModelConfig:
    #: None: use the main model for summaries.
    model: str | None = None
    provider: Literal["openai", "anthropic"] | None = None
    base_url: str | None = None
    api_key: str | None = None


@dataclass(frozen=True)
class AuxiliaryConfig:
    compression: AuxiliaryModelConfig = field(default_factory=AuxiliaryModelConfig)


@dataclass(frozen=True)
class ContextConfig:
    engine: str = "compressor"


@dataclass(frozen=True)
class PromptCachingConfig:
    cache_ttl: Literal["5m", "1h", "auto"] = "5m"


@dataclass(frozen=True)
class HookConfig:
    events: tuple[str, ...]
    handler: str  # "module:function"
    timeout_seconds: float = field(default=5.0, metadata=_min(0.01))


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = field(default=12, metadata=_range(1, 100))
    tool_result_max_chars: int = field(default=8000, metadata=_min(200))
    #: IANA zone for "remind me at 7:00" and the current_time tool.
    timezone: str = "UTC"


@dataclass(frozen=True)
class LoggingConfig:
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


@dataclass(frozen=True)
class Config:
    data_dir: Path = Path("~/.nightowl")
    model: ModelConfig = field(default_factory=ModelConfig)
    platforms: PlatformsConfig = field(default_factory=PlatformsConfig)
    groups: GroupsConfig = field(default_factory=GroupsConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    auxiliary: AuxiliaryConfig = field(default_factory=AuxiliaryConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    prompt_caching: PromptCachingConfig = field(default_factory=PromptCachingConfig)
    hooks: tuple[HookConfig, ...] = ()
    agent: AgentConfig = field(default_factory=AgentConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    #: Where the config came from (None: built-in defaults only). Not a YAML key.
    source: Path | None = field(default=None, metadata={"internal": True})

    @property
    def database_path(self) -> Path:
        return self.data_dir / "state.db"

    @property
    def console_enabled(self) -> bool:
        console = self.platforms.console.enabled
        if console == "auto":
            return not (self.platforms.telegram.enabled or self.platforms.discord.enabled)
        return bool(console)


# ---------------------------------------------------------------------------------------
# Loading


def default_config_paths() -> list[Path]:
    return [Path("config.yaml"), Path("~/.nightowl/config.yaml").expanduser()]


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read, interpolate and check a config file (or the defaults when there is none).

    ``path=None`` looks for ./config.yaml, then ~/.nightowl/config.yaml; when neither
    exists the built-in defaults are used, so ``nightowl run`` works with only an API key
    in the environment.
    """
    if path is None:
        path = next((p for p in default_config_paths() if p.is_file()), None)
    env = dict(os.environ if environ is None else environ)
    raw: Any = {}
    source: Path | None = None
    if path is not None:
        source = Path(path).expanduser()
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read the config file ({exc.strerror})") from exc
        for key, value in read_dotenv(source.parent / ".env").items():
            env.setdefault(key, value)
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML ({exc})") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: expected a mapping of keys at the top level")
    config = parse_config(raw, env)
    data_dir = config.data_dir.expanduser()
    if source is not None and not data_dir.is_absolute():
        data_dir = (source.parent / data_dir).resolve()
    return _replace(config, data_dir=data_dir, source=source)


def parse_config(raw: dict[str, Any], environ: dict[str, str] | None = None) -> Config:
    """Build a :class:`Config` from already-parsed YAML (used by tests and tools)."""
    env = dict(os.environ if environ is None else environ)
    config = build(Config, raw, "", env)
    return _check_semantics(config, env)


def _replace(config: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(config, **changes)


def _unset_var(value: Any) -> str | None:
    return value.variable if isinstance(value, Unset) else None


def _check_semantics(config: Config, env: dict[str, str]) -> Config:
    """Checks across keys; ``${VAR}`` left unset is an error only where it is needed."""
    telegram, discord = config.platforms.telegram, config.platforms.discord
    for name, platform in (("telegram", telegram), ("discord", discord)):
        if not platform.enabled:
            continue
        variable = _unset_var(platform.token)
        if variable:
            raise ConfigError(f"platforms.{name}.token: environment variable {variable} is not set")
        if not platform.token:
            raise ConfigError(f"platforms.{name}.token: required when {name} is enabled")
    try:
        ZoneInfo(config.agent.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f'agent.timezone: expected an IANA time zone like "Europe/Berlin", '
            f'got "{config.agent.timezone}"'
        ) from None
    for hook in config.hooks:
        if ":" not in hook.handler:
            raise ConfigError(f"hooks: handler {hook.handler!r} must look like 'module:function'")
    # Unset variables elsewhere (an optional key) simply mean "not configured".
    model = config.model
    api_key = model.api_key
    if _unset_var(api_key) or api_key == "":
        api_key = None
    aux = config.auxiliary.compression
    aux_key = None if _unset_var(aux.api_key) or aux.api_key == "" else aux.api_key
    return _replace(
        config,
        model=_replace(model, api_key=api_key, base_url=model.base_url or None),
        auxiliary=_replace(
            config.auxiliary,
            compression=_replace(aux, api_key=aux_key, base_url=aux.base_url or None),
        ),
    )


_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def resolve_api_key(
    provider: str,
    configured: str | None,
    base_url: str | None,
    environ: dict[str, str] | None = None,
) -> str | None:
    """The key to use: the configured one, else the provider's usual environment variable.

    A local OpenAI-compatible server (``base_url`` set) needs no key; the SDK still wants
    a string, so it gets a placeholder.
    """
    env = os.environ if environ is None else environ
    if configured:
        return configured
    key = env.get(_KEY_VARIABLES.get(provider, ""), "")
    if key:
        return key
    if base_url or (provider == "openai" and env.get("OPENAI_BASE_URL")):
        return "not-needed"
    return None


def missing_llm_key_message(config: Config) -> str:
    variable = _KEY_VARIABLES.get(config.model.provider, "OPENAI_API_KEY")
    return (
        f"No LLM key configured: set {variable} in the environment (or model.api_key in "
        f"config.yaml, or model.base_url for a local OpenAI-compatible server)."
    )
