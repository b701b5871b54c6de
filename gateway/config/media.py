"""The ``media`` section: images, voice and audio transcription, documents
(docs/design.md#media). Part of :class:`gateway.config.schema.Config`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.config.routes import ModelRoute, same_endpoint


def _range(lo: float, hi: float | None) -> dict[str, Any]:
    return {"range": (lo, hi)}


@dataclass(frozen=True)
class TranscriptionConfig:
    """Voice notes, audio files and video notes -> text, through an OpenAI-compatible
    ``/audio/transcriptions`` endpoint (OpenAI's whisper, or a local whisper server)."""

    #: "auto": on when an OpenAI-compatible endpoint is configured (``base_url`` here, or
    #: the main model with provider openai).
    enabled: bool | Literal["auto"] = "auto"
    #: None: the main model's base_url when model.provider is openai.
    base_url: str | None = None
    #: None: the main model's key for the same endpoint only, else as model.api_key.
    api_key: str | None = None
    model: str = "whisper-1"
    #: Longer audio is refused with a sentence, not downloaded nor transcribed.
    max_seconds: float = field(default=900.0, metadata=_range(1, 24 * 3600))
    #: Transcribe voice notes the bot only observes in groups (transcription costs money).
    observe: bool = False
    #: USD per minute of audio; None: OpenAI's listed price for its models, free at a
    #: local endpoint, else unknown (docs/cost.md#transcription).
    price_per_minute: float | None = field(default=None, metadata=_range(0, None))


@dataclass(frozen=True)
class DocumentsConfig:
    """PDF, .docx and text files -> text, stored once and read on demand."""

    enabled: bool = True
    #: Larger files are not downloaded (Telegram's Bot API refuses over 20 MB anyway).
    max_bytes: int = field(default=20_000_000, metadata=_range(1, None))
    #: Tokens of a document's text the message row shows; read_document reads the rest.
    excerpt_tokens: int = field(default=1500, metadata=_range(100, 100_000))
    #: Read documents the bot only observes in groups (they are kept in the database).
    observe: bool = False
    #: Of one document, at most this many characters and pages are read; the rest is
    #: left out, and the row and the sender are told (docs/design.md#documents).
    max_chars: int = field(default=2_000_000, metadata=_range(1_000, None))
    max_pages: int = field(default=2_000, metadata=_range(1, None))
    #: CPU seconds reading one document may take (a file built to be slow is refused).
    read_seconds: int = field(default=20, metadata=_range(1, 600))


@dataclass(frozen=True)
class MediaConfig:
    #: Images of a message that starts a turn are kept up to this many MB (each message);
    #: observed messages keep only a placeholder (docs/design.md#groups).
    max_image_mb: float = field(default=5.0, metadata=_range(0, 100))
    transcription: TranscriptionConfig = field(default_factory=TranscriptionConfig)
    documents: DocumentsConfig = field(default_factory=DocumentsConfig)

    @property
    def max_image_bytes(self) -> int:
        return int(self.max_image_mb * 1_000_000)


def transcription_route(settings: TranscriptionConfig, model: ModelRoute) -> ModelRoute | None:
    """Where audio goes to be transcribed, or None when transcription is off; ``model``
    is the main model's route.

    The key follows the main model's rule (gateway/config/routes.py): the main model's
    key only for the same endpoint; otherwise the one written here, or (for OpenAI's
    own API only) OPENAI_API_KEY, resolved by ``resolve_api_key`` when it is used.
    """
    if settings.enabled is False:
        return None
    base_url = settings.base_url or None
    if base_url is None and model.provider == "openai":
        base_url = model.base_url
    elif base_url is None and settings.enabled == "auto":
        return None  # an Anthropic main model: no OpenAI-compatible endpoint configured
    api_key = settings.api_key or None
    if api_key is None and same_endpoint(model.provider, model.base_url, "openai", base_url):
        api_key = model.api_key
    return ModelRoute("openai", settings.model, base_url, api_key)
