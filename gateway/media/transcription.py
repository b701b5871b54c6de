"""Speech -> text through an OpenAI-compatible ``/audio/transcriptions`` endpoint
(docs/design.md#voice): OpenAI's whisper, or a local faster-whisper / whisper.cpp server
speaking the same API. nightowl decodes nothing itself: the bytes go as they came.
"""

from __future__ import annotations

import logging

import openai

from agent.tls import tls_context
from gateway.config.media import TranscriptionConfig, transcription_route
from gateway.config.routes import NO_KEY_NEEDED, ModelRoute, resolve_api_key
from nightowl_errors import NightowlError

log = logging.getLogger(__name__)

#: OpenAI's limit on one upload; larger files are refused before they are downloaded.
MAX_AUDIO_BYTES = 25 * 1024 * 1024


class TranscriptionFailed(NightowlError):
    """Audio that was not transcribed; ``reason`` is a short phrase for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Transcriber:
    """One endpoint and model; :meth:`transcribe` is all the gateway calls."""

    def __init__(self, route: ModelRoute, *, timeout: float = 120.0, max_retries: int = 1) -> None:
        self.route = route
        key = resolve_api_key("openai", route.api_key, route.base_url)
        self.has_key = key is not None
        self._key, self._timeout, self._retries = key or NO_KEY_NEEDED, timeout, max_retries
        #: Built at the first voice message: a client and its pool are memory a gateway
        #: that never hears one does not spend (docs/design.md#memory-footprint).
        self._built: openai.AsyncOpenAI | None = None

    @property
    def _client(self) -> openai.AsyncOpenAI:
        if self._built is None:
            http_client = openai.DefaultAsyncHttpxClient(verify=tls_context())
            self._built = openai.AsyncOpenAI(
                base_url=self.route.base_url,
                api_key=self._key,
                timeout=self._timeout,
                max_retries=self._retries,
                http_client=http_client,
            )
        return self._built

    async def transcribe(self, data: bytes, file_name: str, mime_type: str) -> str:
        """The text spoken in ``data``; raises :class:`TranscriptionFailed`."""
        if not self.has_key:
            raise TranscriptionFailed("no API key is set for the transcription service")
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.route.name, file=(file_name, data, mime_type)
            )
        except openai.APITimeoutError:
            raise TranscriptionFailed("the transcription service took too long") from None
        except openai.APIConnectionError:
            raise TranscriptionFailed("the transcription service could not be reached") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError):
            raise TranscriptionFailed("the transcription service refused our key") from None
        except openai.RateLimitError:
            raise TranscriptionFailed("the transcription service is busy") from None
        except openai.APIStatusError as error:
            log.warning("transcription failed: HTTP %s", error.status_code)
            raise TranscriptionFailed(
                f"the transcription service answered with an error (HTTP {error.status_code})"
            ) from None
        except openai.APIError as error:  # a body the SDK could not read
            log.warning("transcription failed: %s", type(error).__name__)
            raise TranscriptionFailed("the transcription service gave no usable answer") from None
        text = (getattr(result, "text", "") or "").strip()
        if not text:
            raise TranscriptionFailed("no speech was recognised")
        return text

    async def aclose(self) -> None:
        if self._built is not None:
            await self._built.close()


def transcriber_for(
    settings: TranscriptionConfig, main: ModelRoute, timeout: float
) -> Transcriber | None:
    """The transcriber ``media.transcription`` describes, or None when it is off."""
    route = transcription_route(settings, main)
    return Transcriber(route, timeout=timeout) if route is not None else None
