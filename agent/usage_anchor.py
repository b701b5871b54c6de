"""The usage anchor: real token counts from the provider, reused until the transcript moves.

After each response the provider says how many prompt and completion tokens it saw. The
anchor keeps those numbers together with how many messages they account for (the reply
included) and a fingerprint of the message at that boundary. The next gate then needs
only an estimate of the reply and the messages appended since (docs/design.md#usage-anchor, #token-source):

    anchored = prompt_tokens + estimate(messages[covered - 1:])

The check is O(rows appended since), not O(history). It fails closed — returns None, so
the caller falls back to an estimate — when the model route changed, the list is shorter
than what the anchor covered, or the boundary message is no longer the same one (the
transcript was compacted, edited or reset). The anchor is persisted on the session row
(:meth:`UsageAnchor.to_dict`), so it survives restarts while the stored transcript still
matches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agent.messages import JSON, Message
from agent.providers.base import Usage
from agent.tokens import estimate_messages_tokens_rough


def boundary_fingerprint(messages: Sequence[Message], covered: int) -> str:
    """A cheap hash of ``covered`` and the last covered message's role, content, tool calls.

    Only that one message is hashed (O(1) in history length): enough to notice that the
    list was rewritten, without hashing the whole prefix.
    """
    if covered <= 0 or covered > len(messages):
        return ""
    message = messages[covered - 1]
    payload = json.dumps(
        [covered, message.get("role"), message.get("content"), message.get("tool_calls")],
        ensure_ascii=False,
        sort_keys=True,
        default=str,
    )
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=12).hexdigest()


@dataclass(frozen=True)
class UsageAnchor:
    """Provider-reported tokens of the last response and the transcript point they cover."""

    prompt_tokens: int
    completion_tokens: int
    covered: int
    fingerprint: str
    route: str
    #: The calibration's ratio when the anchor was taken: how this session's server counts
    #: against the estimate (docs/design.md#calibration), kept so it survives a restart.
    ratio: float = 1.0
    #: Estimated tokens that travelled beside the messages in the counted request (tool
    #: schemas, the memory block): a later request with other ones counts differently.
    #: None: not known (an anchor stored before it was kept).
    overhead: int | None = None

    @classmethod
    def from_response(
        cls,
        usage: Usage | None,
        messages: Sequence[Message],
        route: str,
        ratio: float = 1.0,
        overhead: int | None = None,
    ) -> UsageAnchor | None:
        """Anchor a response whose reply is already the last item of ``messages``.

        No usage (or an all-zero one) means no anchor: there is nothing real to anchor on.
        """
        if usage is None or (usage.prompt_tokens <= 0 and usage.completion_tokens <= 0):
            return None
        covered = len(messages)
        if covered == 0:
            return None
        return cls(
            prompt_tokens=int(usage.prompt_tokens),
            completion_tokens=int(usage.completion_tokens),
            covered=covered,
            fingerprint=boundary_fingerprint(messages, covered),
            route=route,
            ratio=ratio,
            overhead=overhead,
        )

    def to_dict(self) -> JSON:
        """JSON-safe form for the session row."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> UsageAnchor | None:
        """Rebuild a persisted anchor; anything malformed gives None (no anchor)."""
        if not data:
            return None
        try:
            return cls(
                prompt_tokens=int(data["prompt_tokens"]),
                completion_tokens=int(data["completion_tokens"]),
                covered=int(data["covered"]),
                fingerprint=str(data["fingerprint"]),
                route=str(data["route"]),
                ratio=float(data.get("ratio") or 1.0),
                overhead=None if data.get("overhead") is None else int(data["overhead"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


#: :meth:`UsageAnchor.from_response`, by the name the loop calls it.
build_anchor = UsageAnchor.from_response


def anchor_matches(anchor: UsageAnchor, messages: Sequence[Message], route: str) -> bool:
    """Whether ``anchor`` still describes a prefix of ``messages`` on this route."""
    return (
        anchor.route == route
        and 0 < anchor.covered <= len(messages)
        and boundary_fingerprint(messages, anchor.covered) == anchor.fingerprint
    )


def anchored_tokens(
    anchor: UsageAnchor | None,
    messages: Sequence[Message],
    route: str,
    *,
    estimate: Callable[[Sequence[Message]], int] = estimate_messages_tokens_rough,
) -> int | None:
    """The server's count of the prompt it answered + an ``estimate`` of only the rows
    after it: its reply, and what came since. The reply is estimated, not taken from the
    output count, which holds the reasoning of a thinking model (Qwen3, DeepSeek-R1, the o
    series) that the next prompt does not carry.

    None (fail closed) when there is no anchor or it no longer matches ``messages``.
    """
    if anchor is None or not anchor_matches(anchor, messages, route):
        return None
    return anchor.prompt_tokens + estimate(messages[anchor.covered - 1 :])
