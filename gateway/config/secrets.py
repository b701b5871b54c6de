"""Every secret a config holds, so that logs and ``doctor`` never print one
(docs/design.md#private).

Found by walking the parsed config rather than by a list of keys, so a key added later
is covered the day it is added: a value is a secret when its key's name says so (token,
api_key, secret_token, dsn...: :data:`SECRET_NAME`, the names whose unset ``${VAR}``
stops the start) or its field holds nothing else (an MCP server's ``env`` and
``headers``); a URL anywhere may carry a password or a token. The keys the model routes
resolve to from the environment (``OPENAI_API_KEY``...) count too.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

from gateway.config.media import transcription_route
from gateway.config.models import model_choices
from gateway.config.routes import NO_KEY_NEEDED, resolve_api_key
from gateway.config.schema import Config, main_model_route, summary_model_route
from gateway.config.typed_yaml import SECRET_NAME

#: Query parameters that carry a credential, beside those named like a secret key.
_QUERY_CREDENTIALS = ("apikey", "auth", "pass", "sig", "signature")


def configured_secrets(config: Config) -> list[str]:
    """Every secret in ``config`` and every key its models are sent, each once."""
    found = [*_walk(config, secret=False), *_route_keys(config)]
    return [v for v in dict.fromkeys(found) if v and v != NO_KEY_NEEDED]


def _walk(obj: Any, *, secret: bool, loose: bool = False) -> Iterator[str]:
    """``secret``: every string below is one; ``loose``: a field of values that may be
    (an MCP server's ``env`` and ``headers``): those that look like a credential are."""
    if isinstance(obj, str):
        if secret or (loose and _looks_like_credential(obj)):
            yield obj
            yield obj.split()[-1] if obj.strip() else ""  # "Bearer <credential>" alone
        yield from _url_secrets(obj)
    elif is_dataclass(obj):
        for spec in fields(obj):
            if spec.metadata.get("internal"):
                continue
            value = getattr(obj, spec.name)
            if spec.name == "dsn" and isinstance(value, str) and _plain_dsn(value):
                # A database URL whose credentials are all in plain sight: those, not
                # where it points (doctor names the database it checked).
                yield from _url_secrets(value)
                continue
            named = bool(SECRET_NAME.search(spec.name))
            # SECRET_VALUES (typed_yaml) marks a field whose values may be secrets.
            values = bool(spec.metadata.get("secret"))
            yield from _walk(value, secret=secret or named, loose=values)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            named = secret or _names_a_secret(str(key))
            yield from _walk(value, secret=named, loose=loose)
    elif isinstance(obj, tuple):
        # A command line: the value after "--api-key", or of "--token=...", is a secret.
        flag = False
        for item in obj:
            name, equals, value = str(item).partition("=")
            if equals and _names_a_secret(name):
                yield value
            yield from _walk(item, secret=secret or flag, loose=loose)
            flag = isinstance(item, str) and item.startswith("-") and _names_a_secret(item)


def _plain_dsn(dsn: str) -> bool:
    """A URL DSN whose only credentials are its password and ``password=``: anything
    else (``sslpassword=``, a password with ``#`` or ``/`` that hides the ``@``, a keyword
    DSN) keeps the whole DSN a secret."""
    try:
        parts = urllib.parse.urlsplit(dsn.strip())
        parts.port  # noqa: B018  (raises on a netloc a stray character broke)
    except ValueError:
        return False
    if "://" not in dsn or "#" in dsn or ("@" in dsn and "@" not in parts.netloc):
        return False
    keys = [key.lower() for key, _ in urllib.parse.parse_qsl(parts.query)]
    return all(key == "password" or not _CREDENTIAL_KEY.search(key) for key in keys)


#: A query parameter that may carry a credential, wherever the word is in its name.
_CREDENTIAL_KEY = re.compile(r"pass|secret|token|key|cert|auth")


def _names_a_secret(name: str) -> bool:
    """``GITHUB_TOKEN``, ``api_key``, ``--api-key``, ``X-Api-Key``: a name that says so."""
    return bool(SECRET_NAME.search(name.strip("-").lower().replace("-", "_")))


def _looks_like_credential(value: str) -> bool:
    """A value that may be a credential: one long word, neither a path nor a URL
    (``production``, ``/home/owl/notes``, ``application/json`` are not)."""
    word = value.split()[-1] if value.strip() else ""
    return len(word) >= 12 and "/" not in word and not (word.isalpha() and word.islower())


def _url_secrets(text: str) -> list[str]:
    """The password of a URL or DSN, and query values named like a secret
    (``?token=``, ``?password=``, ``?api_key=``), each alone: a driver's or an HTTP
    library's error may quote one without the rest."""
    if "://" not in text:
        return []
    try:
        parts = urllib.parse.urlsplit(text.strip())
        password = parts.password or ""
    except ValueError:  # not a URL after all (a port that is not a number...)
        return []
    query = urllib.parse.parse_qsl(parts.query)
    named = [
        value
        for key, value in query
        if SECRET_NAME.search(key.lower()) or key.lower() in _QUERY_CREDENTIALS
    ]
    return [password, *named]


def _route_keys(config: Config) -> Iterator[str]:
    """The key each model route sends, where it comes from the environment."""
    main = main_model_route(config)
    routes = [
        main,
        summary_model_route(config),
        transcription_route(config.media.transcription, main),
        *(choice.route for choice in model_choices(config.model, config.models).values()),
    ]
    for route in routes:
        if route is not None:
            yield resolve_api_key(route.provider, route.api_key, route.base_url) or ""
