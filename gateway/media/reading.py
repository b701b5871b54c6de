"""What a message's voice notes, audio and documents say, as text for its row
(docs/design.md#media).

Called by the router after the sender was judged (docs/design.md#authorization): only a
message that starts a turn — or, when the config opts in, one observed in a group — has
its attachments downloaded. Every attachment becomes a note in the row, whatever
happens: a transcript (``[voice 0:42] …``), a document's header and bounded excerpt, or
what could not be done and why. Nothing is ever lost for a failed download or service;
the user of an addressed message is told in one sentence.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field

from adapters.base import Attachment, InboundMessage
from gateway.config.media import MediaConfig
from gateway.cost.meter import BudgetStopped, CostMeter
from gateway.cost.payer import person_of
from gateway.media.documents import ReadingLimits, Unreadable, document_kind, extract_document
from gateway.media.transcription import MAX_AUDIO_BYTES, Transcriber, TranscriptionFailed
from gateway.store import DocumentInfo, DocumentStore, DocumentText

log = logging.getLogger(__name__)

SOUND_KINDS = ("voice", "audio", "video_note")
_DEFAULT_NAMES = {"voice": "voice.ogg", "video_note": "video_note.mp4", "audio": "audio.mp3"}
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f\"\[\]·]+")
#: Documents read at once (each in a process of its own, docs/design.md#documents); more
#: wait their turn, so a flood of files costs time, not memory.
DOCUMENT_READERS = 1


@dataclass
class MediaText:
    """One note per attachment that is not an image, in order, and what to tell the user."""

    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class MediaReader:
    def __init__(
        self,
        settings: MediaConfig,
        documents: DocumentStore | None,
        transcriber: Transcriber | None = None,
        meter: CostMeter | None = None,
    ) -> None:
        self.settings = settings
        self.documents = documents
        self.transcriber = transcriber
        #: Where a transcription's cost is kept (docs/cost.md#transcription).
        self.meter = meter
        self._readers = asyncio.Semaphore(DOCUMENT_READERS)

    async def read(
        self, message: InboundMessage, session_key: str, *, addressed: bool
    ) -> MediaText:
        """Notes for ``message``'s attachments other than images. ``addressed``: it starts
        a turn (its media are read); an observed one is read only where the config opts in."""
        found = MediaText()
        for attachment in message.attachments:
            if attachment.kind == "image":
                continue
            if attachment.kind in SOUND_KINDS:
                take = addressed or self.settings.transcription.observe
                # An observed voice note is the chat's, not its sender's: nobody asked.
                person = person_of(message.platform, message.user_id) if addressed else None
                note, problem = await self._listen(
                    attachment, take=take, session_key=session_key, person=person
                )
            elif attachment.kind == "document":
                take = addressed or self.settings.documents.observe
                note, problem = await self._read(attachment, session_key, take=take)
            else:
                note, problem = _not_readable(attachment), None
            found.notes.append(note)
            if problem and addressed:
                found.problems.append(problem)
        return found

    # -- voice and audio (docs/design.md#voice) ------------------------------------------

    async def _listen(
        self, sound: Attachment, *, take: bool, session_key: str, person: str | None
    ) -> tuple[str, str | None]:
        label = sound_label(sound)
        limit = self.settings.transcription.max_seconds
        if not take:
            return f"[{label}]", None
        if self.transcriber is None:
            return f"[{label}, not transcribed: voice transcription is not set up]", None
        if sound.duration is not None and sound.duration > limit:
            reason = f"longer than the {clock(limit)} limit"
            return (
                f"[{label}, not transcribed: {reason}]",
                f"{_what(sound)} is {clock(sound.duration)} long; I transcribe up to"
                f" {clock(limit)}, so I could not listen to it.",
            )
        # The duration is the client's word; the bytes are not: at a generous bit rate,
        # more bytes than the limit's worth is a longer recording than it says.
        most = audio_byte_limit(sound.kind, limit)
        if (sound.size or 0) > most:
            reason = "too large to transcribe"
            return f"[{label}, not transcribed: {reason}]", f"{_what(sound)} is {reason}."
        route = self.transcriber.route
        hold = None
        if self.meter is not None:  # docs/cost.md#transcription: checked like any call
            seconds = sound.duration if sound.duration is not None else limit
            try:
                hold = await self.meter.allow_transcription(
                    route.name, route.base_url, seconds, session_key, person
                )
            except BudgetStopped as stopped:
                return f"[{label}, not transcribed: {stopped.why}]", stopped.sentence
        try:
            data = await sound.read()
            if data is None:
                raise TranscriptionFailed("it could not be downloaded")
            if len(data) > most:
                raise TranscriptionFailed("it is too large to transcribe")
            name = sound.name or _DEFAULT_NAMES[sound.kind]
            text = await self.transcriber.transcribe(data, name, sound.mime_type)
            if self.meter is not None:  # its row written, and its hold let go with it
                await self.meter.transcribed(
                    route.name, route.base_url, sound.duration, session_key, person, hold=hold
                )
        except TranscriptionFailed as failure:
            return (
                f"[{label}, not transcribed: {failure.reason}]",
                f"I could not transcribe {_what(sound).lower()} ({failure.reason}).",
            )
        finally:
            if self.meter is not None:
                await self.meter.release(hold)
        return f"[{label}] {text}", None

    # -- documents (docs/design.md#documents) --------------------------------------------

    async def _read(
        self, document: Attachment, session_key: str, *, take: bool
    ) -> tuple[str, str | None]:
        settings = self.settings.documents
        name = safe_name(document.name) or "unnamed"
        if document_kind(name, document.mime_type) is None:
            return _not_readable(document), None
        if not settings.enabled or self.documents is None:
            return f'[document "{name}", not read: reading documents is off]', None
        if not take:
            return f'[document "{name}"]', None
        limit = settings.max_bytes
        if document.size is not None and document.size > limit:
            return self._unread(name, document.size, f"is larger than the {size(limit)} limit")
        data = await document.read()
        if data is None:
            return self._unread(name, document.size, "could not be downloaded")
        if len(data) > limit:
            return self._unread(name, len(data), f"is larger than the {size(limit)} limit")
        try:
            async with self._readers:
                text = await extract_document(
                    data, name, document.mime_type, ReadingLimits.of(settings)
                )
        except Unreadable as unreadable:
            return self._unread(name, len(data), unreadable.reason)
        info = await self.documents.keep_document(session_key, name, text)
        problem = None
        if text.kept:
            problem = f"I read only {text.kept} of {name}: that is as much as I read of one file."
        return document_note(info, text, settings.excerpt_tokens * 4), problem

    @staticmethod
    def _unread(name: str, bytes_: int | None, reason: str) -> tuple[str, str]:
        facts = f" · {size(bytes_)}" if bytes_ else ""
        return (
            f'[document "{name}"{facts}, not read: it {reason}]',
            f"I could not read {name}: it {reason}.",
        )


def document_note(info: DocumentInfo, text: DocumentText, excerpt_chars: int) -> str:
    """The row's part for a kept document: a header and a bounded excerpt."""
    whole = "".join(text.parts)
    facts = [info.kind.upper() if info.kind != "text" else "text"]
    if info.pages is not None:
        facts.append(f"{info.pages} page{'s' if info.pages != 1 else ''}")
    facts += [size(info.size), f"{info.chars:,} characters"]
    if text.kept:
        facts.append(f"only {text.kept} read")
    header = f'[document "{info.name}" · id {info.document_id} · {", ".join(facts)}'
    if len(whole) <= excerpt_chars:
        return f'{header}]\n{whole.strip()}\n[end of "{info.name}"]'
    excerpt = whole[:excerpt_chars]
    cut = excerpt.rfind("\n", excerpt_chars // 2)
    excerpt = excerpt[: cut if cut != -1 else excerpt_chars].rstrip()
    return (
        f"{header} · its first {len(excerpt):,} characters below; the read_document tool"
        f' reads the rest, session_search finds words in it]\n{excerpt}\n[end of the excerpt of "{info.name}"]'
    )


#: Bytes per second a recording of each kind takes at most, generously: a voice note's
#: Opus at 64 kbit/s (Telegram records 16-32), a video note's video and sound at
#: 1.28 Mbit/s, any audio file at 1.6 Mbit/s (CD-quality WAV is 1.41).
AUDIO_BYTES_PER_SECOND = {"voice": 8_000, "video_note": 160_000}
ANY_AUDIO_BYTES_PER_SECOND = 200_000


def audio_byte_limit(kind: str, max_seconds: float) -> int:
    """The most bytes a recording of ``kind`` no longer than ``max_seconds`` takes (and
    never more than the transcription endpoint takes)."""
    rate = AUDIO_BYTES_PER_SECOND.get(kind, ANY_AUDIO_BYTES_PER_SECOND)
    return min(MAX_AUDIO_BYTES, int(max_seconds * rate))


def sound_label(sound: Attachment) -> str:
    """``voice 0:42``, ``video note 0:15``, ``audio "song.mp3" 3:12``."""
    if sound.kind == "audio":
        name = safe_name(sound.name)
        label = f'audio "{name}"' if name else "audio"
    else:
        label = sound.kind.replace("_", " ")
    return f"{label} {clock(sound.duration)}" if sound.duration is not None else label


def clock(seconds: float) -> str:
    """0:42, 16:40, 1:02:03."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def size(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f} MB"
    if count >= 1000:
        return f"{count / 1000:.1f} KB"
    return f"{count} bytes"


def safe_name(name: str) -> str:
    """A file name as the row may quote it: no line breaks, quotes or brackets that could
    pass for nightowl's own notes; at most 100 characters."""
    return _UNSAFE_NAME.sub(" ", name).strip()[:100]


def _what(sound: Attachment) -> str:
    return {"voice": "Your voice message", "video_note": "Your video message"}.get(
        sound.kind, "Your audio file"
    )


def _not_readable(attachment: Attachment) -> str:
    name = safe_name(attachment.name) or "a file"
    return f"[attached: {name} ({attachment.mime_type}), not readable here]"
