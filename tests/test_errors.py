"""Every error a caller can handle has one root: ``except NightowlError`` catches them.

The check walks the code rather than a list someone keeps: every module of gateway/,
agent/ and adapters/ is imported and every exception class defined there must derive
from :class:`NightowlError`, unless :data:`NOT_ERRORS` names it with the reason.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from adapters.base import DeliveryError
from agent.providers import ProviderError
from agent.turn_result import CompressionExhausted
from gateway.store import DataDirInUse, SessionEnded, StoreError
from nightowl_errors import NightowlError, redact

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "agent", "adapters")

#: Exception classes that are control flow, not errors: outside the root on purpose.
NOT_ERRORS = {
    "gateway.media.document_text.OutOfTime": (
        "a document worker's CPU time is up: a BaseException, so that no library's "
        "`except Exception` swallows it"
    ),
}


def project_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__main__.py":  # importing it runs the command line
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class the project defines, by qualified name (nested ones too,
    once their module is imported)."""
    for name in project_modules():
        importlib.import_module(name)
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [BaseException]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if sub.__module__.split(".")[0] in PACKAGES:
                found[f"{sub.__module__}.{sub.__qualname__}"] = sub
    return found


def outside_the_root(found: dict[str, type[BaseException]]) -> list[str]:
    """The classes of ``found`` not under NightowlError (nor listed), with their bases."""
    return sorted(
        f"{name} ({', '.join(base.__name__ for base in cls.__mro__[1:-1])})"
        for name, cls in found.items()
        if not issubclass(cls, NightowlError) and name not in NOT_ERRORS
    )


def test_every_exception_class_in_the_project_is_a_nightowl_error() -> None:
    found = exception_classes()
    assert set(NOT_ERRORS) <= set(found), "NOT_ERRORS names a class that no longer exists"
    assert not outside_the_root(found)


def test_the_walk_sees_every_edge_and_layer() -> None:
    found = exception_classes()
    for name in (
        "adapters.base.DeliveryError",
        "adapters.telegram.adapter.TelegramStartError",
        "adapters.telegram.calls.TelegramCallFailed",
        "adapters.discord_adapter.outbound.DiscordCallFailed",
        "agent.compression.summary.SummaryFailure",
        "agent.providers.base.ProviderError",
        "gateway.ops.admin.ExportRefused",
        "gateway.media.document_text.OutOfTime",
    ):
        assert name in found, name


def test_a_stray_exception_class_fails_the_check() -> None:
    class Stray(Exception):
        pass

    class Rooted(DeliveryError):
        pass

    found = {"adapters.probe.Stray": Stray, "adapters.probe.Rooted": Rooted}
    assert outside_the_root(found) == ["adapters.probe.Stray (Exception, BaseException)"]


def test_running_out_of_room_is_not_blamed_on_the_provider() -> None:
    assert not issubclass(CompressionExhausted, ProviderError)
    assert issubclass(DataDirInUse, StoreError) and issubclass(SessionEnded, StoreError)


@pytest.mark.parametrize(
    ("text", "secrets", "gone"),
    [
        ("GET https://api.telegram.org/bot123456789:" + "A" * 35 + "/getMe", (), "AAAA"),
        ("Incorrect API key provided: sk-proj-abcdef1234567890", (), "abcdef"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", (), "eyJhbGciOi"),
        ("https://mcp.example.org/mcp?token=s3cr3t-value&x=1", (), "s3cr3t"),
        ("the configured one: hunter2-very-secret", ("hunter2-very-secret",), "hunter2"),
        ("one of several: second-secret-0002", ("first-secret-0001", "second-secret-0002"), "0002"),
    ],
)
def test_one_redact_serves_logs_providers_and_platforms(
    text: str, secrets: tuple[str, ...], gone: str
) -> None:
    cleaned = redact(text, secrets)
    assert gone not in cleaned and "[redacted]" in cleaned


def test_a_short_placeholder_key_is_not_blanked_everywhere() -> None:
    assert redact("none of the models is loaded", "none") == "none of the models is loaded"


def test_redact_leaves_a_log_lines_words_and_blanks_assigned_credentials() -> None:
    """One redact serves every log line: a "session key: telegram:1" is not a secret,
    a ``key=`` in a URL or an SDK's ``api_key: …`` is."""
    assert (
        redact("session key: telegram:1, token: 3 of 5") == "session key: telegram:1, token: 3 of 5"
    )
    assert redact("GET /v1?key=abcdef&x=1") == "GET /v1?key=[redacted]&x=1"
    assert redact("api_key: abcdef123") == "api_key: [redacted]"
    # The name of the variable a config reads a key from is no secret, and is the fix.
    said = "config.yaml:4: model.api_key: ${VLLM_KEY} is not set"
    assert redact(said) == said
    assert redact("api_key=${X}, key=${Y}") == "api_key=${X}, key=${Y}"
    # Only a whole ${NAME}: a value that merely starts so is still a value.
    assert redact("api_key=${X}realsecretvalue123") == "api_key=[redacted]"
    assert redact("api_key: ${hunter2-my-password}") == "api_key: [redacted]"
