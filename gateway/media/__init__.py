"""Voice, audio and documents -> text the agent can read (docs/design.md#media)."""

from gateway.media.reading import MediaReader, MediaText
from gateway.media.transcription import Transcriber, TranscriptionFailed

__all__ = ["MediaReader", "MediaText", "Transcriber", "TranscriptionFailed"]
