"""YAML → frozen dataclasses, checked against their type hints (used by gateway.config).

Supports bool, int, float, str, Path, ``X | None``, ``Literal[...]``, ``tuple[X, ...]``,
``dict[str, X]`` and nested dataclasses; a field's ``metadata={"range": (lo, hi)}``
bounds numbers. Errors name the key path and the reason. ``${VAR}`` in strings is
replaced from the environment; an unset variable becomes :class:`Unset`, which the caller
may refuse where the value is needed.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key path and the reason."""


def read_dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Unset(str):
    """A ``${VAR}`` whose variable is not set; an error only where the value is needed."""

    variable: str


def interpolate(value: str, path: str, env: dict[str, str]) -> str:
    missing = [name for name in VARIABLE.findall(value) if name not in env]
    if missing:
        unset = Unset("")
        unset.variable = missing[0]
        return unset
    return VARIABLE.sub(lambda m: env[m.group(1)], value)


def describe(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "nothing"
    return repr(value) if not isinstance(value, dict | list) else type(value).__name__


def build(cls: type, raw: Any, path: str, env: dict[str, str]) -> Any:
    where = path or "config"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {describe(raw)}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in known:
            close = [k for k in known if k.startswith(str(key)[:3])]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{join_path(path, str(key))}: unknown key{hint}")
    values: dict[str, Any] = {}
    for name, spec in known.items():
        key_path = join_path(path, name)
        if name in raw:
            values[name] = coerce(hints[name], raw[name], key_path, env, spec.metadata)
        elif spec.default is MISSING and spec.default_factory is MISSING:
            raise ConfigError(f"{key_path}: required")
    return cls(**values)


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def coerce(hint: Any, value: Any, path: str, env: dict[str, str], meta: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if isinstance(value, str) and not isinstance(value, Unset):
        value = interpolate(value, path, env)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return coerce(option, value, path, env, meta)
            except ConfigError as exc:
                errors.append(str(exc).split(": ", 1)[1])
        raise ConfigError(f"{path}: {' or '.join(dict.fromkeys(errors))}")
    if origin is Literal:
        if value in args:
            return value
        choices = ", ".join(str(a) for a in args)
        raise ConfigError(f"{path}: expected one of {choices}, got {describe(value)}")
    if origin is tuple:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            value = [value]
        return tuple(
            coerce(args[0], item, f"{path}[{i}]", env, meta) for i, item in enumerate(value)
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {describe(value)}")
        return {str(k): coerce(args[1], v, f"{path}.{k}", env, meta) for k, v in value.items()}
    if is_dataclass(hint):
        return build(hint, value, path, env)
    return coerce_scalar(hint, value, path, meta)


def coerce_scalar(hint: Any, value: Any, path: str, meta: Any) -> Any:
    lo, hi = meta.get("range", (None, None))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {describe(value)}")
    if hint in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and hint is int and not float(value).is_integer():
            ok = False
        if ok and (lo is None or value >= lo) and (hi is None or value <= hi):
            return hint(value)
        noun = "a whole number" if hint is int else "a number"
        if lo is not None and hi is not None:
            noun += f" between {format_number(lo)} and {format_number(hi)}"
        elif lo is not None:
            noun += f" of at least {format_number(lo)}"
        raise ConfigError(f"{path}: expected {noun}, got {describe(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # ids written as numbers in YAML
        raise ConfigError(f"{path}: expected text, got {describe(value)}")
    if hint is Path:
        if isinstance(value, str) and value:
            return Path(value).expanduser()
        raise ConfigError(f"{path}: expected a path, got {describe(value)}")
    raise ConfigError(f"{path}: unsupported setting type {hint!r}")  # a bug in this module


def format_number(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)
