"""YAML → frozen dataclasses, checked against their type hints (used by gateway.config).

Supports bool, int, float, str, Path, ``X | None``, ``Literal[...]``, ``tuple[X, ...]``,
``dict[str, X]`` and nested dataclasses; a field's ``metadata={"range": (lo, hi)}``
bounds numbers and ``metadata={"check": f}`` refuses a value when ``f(value)`` returns a
reason. Every problem is collected, not only the first: each names the key path and the
reason, and — for text read with :func:`read_yaml` — the file and line. ``${VAR}`` in
strings is replaced from the environment once (a value holding ``${B}`` stays as it is);
an unset one becomes :class:`Unset`, which the caller may refuse where the value is
needed (:func:`unset_strict`: in secrets and :data:`STRICT` keys). A list key refuses a
lone value: ``allowed_users: 1, 2`` is one string, not two ids.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from nightowl_errors import NightowlError


@dataclass(frozen=True)
class Problem:
    """One reason the configuration cannot be used, and where: file, line, key path."""

    path: str  #: e.g. "platforms.telegram.token"; "" for the file as a whole
    reason: str
    file: Path | None = None
    line: int | None = None  #: 1-based

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.path}: {self.reason}" if self.path else f"{where}{self.reason}"


class ConfigError(NightowlError):
    """The configuration cannot be used. ``problems`` holds every one found, each printed
    as ``<file>:<line>: <key.path>: <reason>`` (file and line when known)."""

    def __init__(self, problems: str | Problem | Iterable[Problem]) -> None:
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        lines = [str(problem) for problem in self.problems]
        if len(lines) == 1:
            super().__init__(lines[0])
        else:
            super().__init__(f"{len(lines)} problems in the configuration:\n" + "\n".join(lines))


class _PartlyBuilt(ConfigError):
    """Problems inside a nested part, with that part built from the keys that were fine."""

    def __init__(self, problems: list[Problem], instance: Any) -> None:
        super().__init__(problems)
        self.instance = instance


# -- reading files -------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """A config-side text file (config.yaml, .env); anything unreadable is one clear line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(Problem("", f"cannot read the file ({exc.strerror})", path)) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        byte = data[exc.start : exc.start + 1].hex()
        reason = f"not UTF-8 text (byte 0x{byte}); save the file as UTF-8"
        raise ConfigError(Problem("", reason, path, line)) from None


def read_dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    values: dict[str, str] = {}
    for line in read_text(path).splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def read_yaml(text: str, source: Path | None = None) -> tuple[Any, dict[str, int]]:
    """Parse YAML; also return the 1-based line where each key path (as :func:`build`
    names them: ``a.b``, ``hooks[0].events``) is written."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        if node is not None:
            _record_lines(node, "", lines, set())  # before construction flattens merge keys
        return (loader.construct_document(node) if node is not None else None), lines
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line = text[: exc.position].count("\n") + 1
        character = exc.character if isinstance(exc.character, int) else ord(exc.character)
        reason = f"not valid YAML: {exc.reason} (#x{character:04x})"
        raise ConfigError(Problem("", reason, source, line)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "unreadable"
        if what.startswith("but ") and exc.context:  # "expected a single document ... but"
            what = f"{exc.context} {what}"
        reason = f"not valid YAML: {what}"
        raise ConfigError(Problem("", reason, source, mark.line + 1 if mark else None)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(Problem("", f"not valid YAML ({exc})", source)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _record_lines(node: yaml.Node, path: str, lines: dict[str, int], seen: set[int]) -> None:
    if id(node) in seen:  # an alias that contains itself
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                child = join_path(path, str(key.value))
                lines[child] = key.start_mark.line + 1  # a repeated key: YAML keeps the last
                _record_lines(value, child, lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = f"{path}[{i}]"
            lines[child] = item.start_mark.line + 1
            _record_lines(item, child, lines, seen)
    seen.discard(id(node))


_LAST_STEP = re.compile(r"(?:\.[^.\[\]]*|\[\d+\])$")


def locate(problems: Iterable[Problem], lines: dict[str, int], file: Path) -> list[Problem]:
    """The problems with ``file`` and the line of their key (or of the nearest enclosing
    key that is written down), in file order."""
    located = []
    for problem in problems:
        path, line = problem.path, None
        while path and line is None:
            line = lines.get(path)
            shorter = _LAST_STEP.sub("", path)
            path = "" if shorter == path else shorter
        located.append(replace(problem, file=file, line=line or problem.line))
    return sorted(located, key=lambda p: p.line or 0)


# -- ${VAR} --------------------------------------------------------------------------------

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Keys holding secrets: an unset ``${VAR}`` in one of them is an error where it is in use.
SECRET_NAME = re.compile(r"(?:^|_)(?:token|key|secret|password|dsn)$")

#: A field's metadata marking it strict like a secret (an allowlist: who may talk to the
#: bot); an unset ``${VAR}`` in it, or in any of its items, is an error where it is in use.
STRICT: Mapping[str, Any] = types.MappingProxyType({"strict": True})
#: Strict, and every value in it is a secret whatever its name (an MCP server's env and
#: headers): logs never show one (gateway/config/secrets.py).
SECRET_VALUES: Mapping[str, Any] = types.MappingProxyType({"strict": True, "secret": True})


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


def _enabled(path: str, part: Any) -> bool:
    return getattr(part, "enabled", True) is not False


def unset_strict(
    obj: Any,
    path: str = "",
    in_use: Callable[[str, Any], bool] = _enabled,
    strict: bool = False,
) -> Iterator[tuple[str, str]]:
    """(key path, variable) for each unset ``${VAR}`` that is an error: in a secret-like
    key (see :data:`SECRET_NAME`) or a key marked :data:`STRICT`, and in every item of a
    list or mapping held by one; nested parts ``in_use`` rejects are skipped (default:
    those with ``enabled: false``)."""
    if isinstance(obj, Unset):
        if strict:
            yield path, obj.variable
        return
    if is_dataclass(obj):
        items: Iterable[tuple[str, Any, bool]] = (
            (
                join_path(path, f.name),
                getattr(obj, f.name),
                bool(f.metadata.get("strict")) or bool(SECRET_NAME.search(f.name)),
            )
            for f in fields(obj)
            if not f.metadata.get("internal")
        )
    elif isinstance(obj, tuple):
        items = ((f"{path}[{i}]", item, strict) for i, item in enumerate(obj))
    elif isinstance(obj, dict):
        items = (
            (join_path(path, str(k)), v, strict or bool(SECRET_NAME.search(str(k))))
            for k, v in obj.items()
        )
    else:
        return
    for child, value, child_strict in items:
        if is_dataclass(value) and not in_use(child, value):
            continue
        yield from unset_strict(value, child, in_use, child_strict)


# -- building ------------------------------------------------------------------------------


def describe(value: Any) -> str:
    if isinstance(value, Unset):
        return f'"" (${{{value.variable}}} is not set)'
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "nothing"
    return repr(value) if not isinstance(value, dict | list) else type(value).__name__


def build(cls: type, raw: Any, path: str, env: dict[str, str]) -> Any:
    """An instance of the dataclass ``cls``, or :class:`ConfigError` with every problem."""
    instance, problems = build_partial(cls, raw, path, env)
    if problems:
        raise _PartlyBuilt(problems, instance)
    return instance


def build_partial(
    cls: type, raw: Any, path: str, env: dict[str, str]
) -> tuple[Any | None, list[Problem]]:
    """Like :func:`build`, but returns the problems with an instance in which each wrong
    key has its default (None when a required key is missing), so checks across keys can
    still run and report their own problems in the same pass."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        # A section may show its shape (``EXAMPLE``): `price: 0.15` is a common first try.
        example = getattr(cls, "EXAMPLE", None)
        wanted = f"expected a mapping{f' such as {example}' if example else ''}"
        return None, [Problem(path or "config", f"{wanted}, got {describe(raw)}")]
    problems: list[Problem] = []
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in known:
            close = [k for k in known if k.startswith(str(key)[:3])]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(join_path(path, str(key)), f"unknown key{hint}"))
    values: dict[str, Any] = {}
    complete = True
    for name, spec in known.items():
        key_path = join_path(path, name)
        required = spec.default is MISSING and spec.default_factory is MISSING
        if name in raw:
            try:
                values[name] = coerce(hints[name], raw[name], key_path, env, spec.metadata)
            except ConfigError as exc:
                problems.extend(exc.problems)
                partial = exc.instance if isinstance(exc, _PartlyBuilt) else None
                if partial is not None:
                    values[name] = partial  # its other keys still count for later checks
                complete = complete and (not required or partial is not None)
        elif required:
            problems.append(Problem(key_path, "required"))
            complete = False
    return (cls(**values) if complete else None), problems


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def coerce(hint: Any, value: Any, path: str, env: dict[str, str], meta: Any) -> Any:
    """``value`` as written in the YAML, as ``hint``: its ``${VAR}`` replaced, once."""
    if isinstance(value, str) and not isinstance(value, Unset):
        value = interpolate(value, path, env)
    return _coerce_expanded(hint, value, path, env, meta)


def _coerce_expanded(hint: Any, value: Any, path: str, env: dict[str, str], meta: Any) -> Any:
    """Like :func:`coerce` for a value whose own ``${VAR}`` are replaced already: text
    that came from a variable is never expanded again (its items and entries still are)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _coerce_expanded(options[0], value, path, env, meta)
        reasons: list[str] = []
        for option in options:
            try:
                return _coerce_expanded(option, value, path, env, meta)
            except ConfigError as exc:
                reasons.extend(problem.reason for problem in exc.problems)
        raise ConfigError(Problem(path, " or ".join(dict.fromkeys(reasons))))
    if origin is Literal:
        if value in args:
            return value
        choices = ", ".join(str(a) for a in args)
        raise ConfigError(Problem(path, f"expected one of {choices}, got {describe(value)}"))
    if origin is tuple:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):  # `allowed_users: 1, 2` is one odd string
            raise ConfigError(Problem(path, f"expected a list, got {describe(value)}"))
        return tuple(
            _each(((f"{path}[{i}]", item) for i, item in enumerate(value)), args[0], env, meta)
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(Problem(path, f"expected a mapping, got {describe(value)}"))
        items = [(f"{path}.{k}", v) for k, v in value.items()]
        return dict(zip(map(str, value), _each(items, args[1], env, meta), strict=True))
    if isinstance(hint, type) and is_dataclass(hint):
        return build(hint, value, path, env)
    value = coerce_scalar(hint, value, path, meta)
    reason = meta["check"](value) if "check" in meta else None
    if reason:
        raise ConfigError(Problem(path, reason))
    return value


def _each(items: Iterable[tuple[str, Any]], hint: Any, env: dict[str, str], meta: Any) -> list:
    """Coerce every item; the problems of all of them, not only the first, are raised."""
    values: list[Any] = []
    problems: list[Problem] = []
    for path, item in items:
        try:
            values.append(coerce(hint, item, path, env, meta))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return values


def coerce_scalar(hint: Any, value: Any, path: str, meta: Any) -> Any:
    lo, hi = meta.get("range", (None, None))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(Problem(path, f"expected true or false, got {describe(value)}"))
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
        raise ConfigError(Problem(path, f"expected {noun}, got {describe(value)}"))
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # ids written as numbers in YAML
        raise ConfigError(Problem(path, f"expected text, got {describe(value)}"))
    if hint is Path:
        if isinstance(value, str) and value:
            return Path(value).expanduser()
        raise ConfigError(Problem(path, f"expected a path, got {describe(value)}"))
    raise ConfigError(Problem(path, f"unsupported setting type {hint!r}"))  # a bug here


def format_number(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)
