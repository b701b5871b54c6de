"""``POST /v1/audio/transcriptions`` for the fake LLM server: what the openai SDK sends
(multipart: ``model``, ``file``), recorded; answers scripted or a fixed text.

Installed by :class:`tests.fakes.llm_server.FakeLLM` on its own app, so one fake serves
chat and transcription at the same base URL (``llm.transcriptions``). It decodes nothing:
the audio is kept as bytes for the test to compare.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web

from tests.waiting import CEILING


@dataclass
class Upload:
    """One transcription request as the fake received it."""

    model: str
    file_name: str
    content_type: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Transcript:
    """A scripted answer: the text, or an HTTP error ``status``."""

    text: str = "hello from a voice note"
    status: int = 200


class FakeTranscriptions:
    def __init__(self) -> None:
        self.uploads: list[Upload] = []
        self.default = Transcript()
        self._queue: list[Transcript] = []
        self._arrived = asyncio.Condition()

    def install(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._handle)

    def script(self, *answers: Transcript) -> None:
        self._queue.extend(answers)

    async def wait_for(self, count: int, within: float = CEILING) -> list[Upload]:
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.uploads) >= count), within
            )
        return self.uploads

    async def _handle(self, request: web.Request) -> web.Response:
        fields: dict[str, str] = {}
        upload = Upload("", "", "", b"", {k.lower(): v for k, v in request.headers.items()})
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if getattr(part, "filename", None):
                upload.file_name = part.filename or ""
                upload.content_type = part.headers.get("Content-Type", "")
                upload.data = bytes(await part.read())  # type: ignore[union-attr]
            else:
                fields[part.name or ""] = await part.text()  # type: ignore[union-attr]
        upload.model = fields.get("model", "")
        async with self._arrived:
            self.uploads.append(upload)
            self._arrived.notify_all()
        answer = self._queue.pop(0) if self._queue else self.default
        if answer.status != 200:
            error = {"message": "The server had an error.", "type": "server_error"}
            return web.json_response({"error": error}, status=answer.status)
        return web.json_response({"text": answer.text})
