"""Counting tokens: a rough estimator everywhere, exact counts where the tokenizer is known.

The rough estimate (docs/design.md#tokens) is what every gate and the compressor use: cheap, stable,
the same on every machine. Exact counts (docs/design.md#tokens) come from tiktoken for OpenAI model families
and are meant to be taken once per stored row, at insert; no turn re-tokenizes history.

tiktoken downloads its BPE files on first use, which fails on a machine without egress.
The ``bpe-openai`` package ships byte-identical copies; when it is installed they seed
tiktoken's cache, and tiktoken still checks their sha256 itself. Without either, counting
falls back to the rough estimate (logged once): a missing tokenizer never stops a turn.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from agent.messages import Message

log = logging.getLogger(__name__)

#: Tokens an image part counts, whatever its encoded size (docs/design.md#tokens).
IMAGE_TOKENS = 1500
#: Per-message framing tokens in OpenAI chat formats (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 3

_IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
#: Said when tiktoken's files could not be fetched and none are installed.
OFFLINE_HINT = (
    " (a machine with no internet: pip install 'nightowl[offline]', or '.[offline]' from a"
    " checkout, installs the tokenizer's files)"
)
#: How long the network loader may take before counting settles for the rough estimate.
DOWNLOAD_TIMEOUT_SECONDS = 10.0


# -- the rough estimator (docs/design.md#tokens) ------------------------------------------------------------


def _content_chars_and_images(content: Any) -> tuple[int, int]:
    if content is None:
        return 0, 0
    if isinstance(content, str):
        return len(content), 0
    if isinstance(content, list):
        chars = images = 0
        for part in content:
            if not isinstance(part, Mapping):
                chars += len(str(part))
            elif part.get("type") in _IMAGE_PART_TYPES:
                images += 1
            else:
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else 0
        return chars, images
    return len(str(content)), 0


def _message_chars_and_images(message: Message) -> tuple[int, int]:
    chars, images = _content_chars_and_images(message.get("content"))
    chars += len(str(message.get("role") or ""))
    tool_calls = message.get("tool_calls")
    if tool_calls:
        chars += len(json.dumps(tool_calls, ensure_ascii=False, default=str))
    return chars, images


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def token_floor(messages: Iterable[Message]) -> int:
    """Tokens any real tokenizer counts at least for ``messages``' text: one per
    whitespace-separated word (tokenizers split text at whitespace before merging; a run of
    one character, a line of dashes, may be a single long token) and one per two CJK
    characters, which come without spaces. O(text): for rare checks, never per turn."""
    total = 0
    for message in messages:
        content = message.get("content")
        parts = [content] if isinstance(content, str) else []
        if isinstance(content, list):
            parts = [
                p["text"]
                for p in content
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
        if message.get("tool_calls"):
            parts.append(json.dumps(message["tool_calls"], ensure_ascii=False, default=str))
        for text in parts:
            total += len(text.split()) + len(_CJK.findall(text)) // 2
    return total


class MessageSize(NamedTuple):
    """What the window arithmetic needs of one message, from the rough estimate."""

    #: (chars of role + content + tool calls + 3) // 4, plus :data:`IMAGE_TOKENS` an image.
    rough: int
    #: ``rough`` plus what it leaves out but a request carries (a tool call's id, a name).
    wire: int
    #: Image parts (their tokens are a flat guess, never measured).
    images: int


#: Messages whose size is remembered (docs/design.md#memory-footprint): enough for the
#: conversations a few turns at once are measuring. The memo holds the messages it knows
#: (an id is only a message's own while the message lives), so it is also bounded by their
#: characters; when either bound is reached it starts again empty. Messages with images
#: (megabytes of base64 each) and single rows past ``SIZE_MEMO_LARGEST`` characters are
#: measured every time instead: holding them could keep megabytes alive that the chat no
#: longer needs.
SIZE_MEMO_ENTRIES = 4096
SIZE_MEMO_CHARS = 1_000_000
SIZE_MEMO_LARGEST = 20_000
# id(message) -> (message, its content, its tool calls, its size, its characters). Content
# and calls are compared by identity, so a message given new ones is measured again
# (stored rows are read-only: gateway/store/active_rows.py).
_sizes: dict[int, tuple[Message, Any, Any, MessageSize, int]] = {}
_held_chars = 0


def message_size(message: Message) -> MessageSize:
    """The rough size of ``message``. Every gate measures the whole conversation each
    turn, so a message is measured once and remembered (see ``SIZE_MEMO_ENTRIES``)."""
    global _held_chars
    content, calls = message.get("content"), message.get("tool_calls")
    held = _sizes.get(id(message))
    if held is not None:
        if held[0] is message and held[1] is content and held[2] is calls:
            return held[3]
        del _sizes[id(message)]  # changed since, or another message at a reused id
        _held_chars -= held[4]
    size, chars = _measured(message)
    if size.images or chars > SIZE_MEMO_LARGEST:
        return size
    if len(_sizes) >= SIZE_MEMO_ENTRIES or _held_chars + chars > SIZE_MEMO_CHARS:
        _sizes.clear()
        _held_chars = 0
    _sizes[id(message)] = (message, content, calls, size, chars)
    _held_chars += chars
    return size


def measure_message(message: Message) -> MessageSize:
    """:func:`message_size` of a message made for one request (an excerpt), not kept."""
    return _measured(message)[0]


def _measured(message: Message) -> tuple[MessageSize, int]:
    chars, images = _message_chars_and_images(message)
    rough = (chars + 3) // 4 + images * IMAGE_TOKENS
    call_id, name = message.get("tool_call_id"), message.get("name")
    carried = str(call_id or "") + str(name or "") if call_id or name else ""
    wire = rough + estimate_text_tokens_rough(carried) if carried else rough
    return MessageSize(rough, wire, images), chars


def estimate_message_tokens_rough(message: Message) -> int:
    """Rough tokens of one message: (chars of role + content + tool calls + 3) // 4.

    Image parts count :data:`IMAGE_TOKENS` each, never their base64 length.
    """
    return message_size(message).rough


def estimate_text_tokens_rough(text: str) -> int:
    """Rough tokens of plain text (a note, tool schemas as JSON): (chars + 3) // 4."""
    return (len(text) + 3) // 4


def estimate_json_tokens_rough(value: object) -> int:
    """Rough tokens of ``value`` as JSON, as tool schemas travel beside the messages."""
    return estimate_text_tokens_rough(json.dumps(value)) if value else 0


#: Lists of tool schemas whose size is remembered: a few per model and tool set.
SCHEMA_MEMO_ENTRIES = 64
# The schemas' ids -> (the schemas, held so the ids stay theirs; their estimate).
_schema_sizes: dict[tuple[int, ...], tuple[tuple[object, ...], int]] = {}


def estimate_schemas_tokens_rough(schemas: Sequence[object]) -> int:
    """:func:`estimate_json_tokens_rough` of a list of tool schemas, remembered: a turn
    measures them several times and they never change (each is built once, at start)."""
    key = tuple(map(id, schemas))
    held = _schema_sizes.get(key)
    if held is None:
        if len(_schema_sizes) >= SCHEMA_MEMO_ENTRIES:
            _schema_sizes.clear()
        held = _schema_sizes[key] = (tuple(schemas), estimate_json_tokens_rough(list(schemas)))
    return held[1]


def estimate_messages_tokens_rough(messages: Iterable[Message]) -> int:
    """Rough tokens of a message list (docs/design.md#tokens): total chars + 3, divided by 4."""
    chars = images = 0
    for message in messages:
        c, i = _message_chars_and_images(message)
        chars += c
        images += i
    return (chars + 3) // 4 + images * IMAGE_TOKENS


# -- exact counting (docs/design.md#tokens) -----------------------------------------------------------------

# Checked in order: the first prefix of the bare model name that matches decides.
_ENCODING_BY_PREFIX: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada", "cl100k_base"),
)


def encoding_name_for_model(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model family, or None when it is not one.

    Router prefixes (``openai/gpt-4o``) are ignored; other vendors' models return None.
    """
    bare = model.strip().lower().rsplit("/", 1)[-1]
    for prefix, encoding in _ENCODING_BY_PREFIX:
        if bare.startswith(prefix):
            return encoding
    return None


EncodingLoader = Callable[[str], Any]

_encodings: dict[str, Any] = {}
_failed: set[str] = set()
_load_lock = threading.Lock()


def _bundled_bpe_bytes(name: str) -> bytes | None:
    """The decompressed BPE file shipped in ``bpe_openai/data``, if that package is present.

    The package is located, not imported: importing it loads a large native extension
    this process does not need.
    """
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "data" / f"{name}.tiktoken.gz"
        try:
            return gzip.decompress(path.read_bytes())
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
    return None


def _tiktoken_cache_dir() -> Path | None:
    """Where tiktoken looks for cached BPE files (mirrors ``tiktoken.load``), or None if off."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_tiktoken_cache(name: str) -> bool:
    """Put the bundled BPE bytes where tiktoken's loader finds them; True if it worked.

    tiktoken keys its cache by the sha1 of the download URL and verifies the content's
    sha256 on read, so a wrong file is rejected by tiktoken itself.
    """
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return False
    target = cache_dir / hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
    if target.exists():
        return True
    data = _bundled_bpe_bytes(name)
    if data is None:
        return False
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=cache_dir, prefix=target.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)
    except OSError as exc:
        log.debug("could not seed the tiktoken cache in %s: %s", cache_dir, exc)
        return False
    return True


def _get_encoding_bounded(name: str, timeout: float) -> Any:
    """``tiktoken.get_encoding`` on a daemon thread: an unreachable network must not hang."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            import tiktoken

            box["encoding"] = tiktoken.get_encoding(name)
        except Exception as exc:  # any loader failure means "no exact counts", never a crash
            box["error"] = exc

    thread = threading.Thread(target=work, name=f"tiktoken-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if "encoding" in box:
        return box["encoding"]
    raise RuntimeError(f"tiktoken could not load {name}: {box.get('error', 'timed out')}")


def load_encoding(name: str) -> Any:
    """Load a tiktoken encoding with no network if possible; None when impossible.

    Order: the bundled ``bpe-openai`` data (seeded into tiktoken's cache), then tiktoken's
    own loader (which may download, bounded by :data:`DOWNLOAD_TIMEOUT_SECONDS`).
    Loaded once per process; a failure is logged once and remembered.
    """
    if name in _encodings:
        return _encodings[name]
    with _load_lock:
        if name in _encodings:
            return _encodings[name]
        if name in _failed:
            return None
        seed_tiktoken_cache(name)
        try:
            encoding = _get_encoding_bounded(name, DOWNLOAD_TIMEOUT_SECONDS)
        except RuntimeError as exc:
            log.warning(
                "exact token counts unavailable, using the rough estimate: %s%s",
                str(exc).splitlines()[0][:300],
                "" if importlib.util.find_spec("bpe_openai") else OFFLINE_HINT,
            )
            _failed.add(name)
            return None
        _encodings[name] = encoding
        return encoding


class TokenCounter:
    """Counts the tokens of one message for a given model.

    ``method`` is ``"tiktoken"`` when counts are exact, ``"rough"`` otherwise. The encoding
    is loaded on the first :meth:`count` (call :meth:`preload` from a worker thread at
    start-up to keep that off the event loop).
    """

    def __init__(self, encoding_name: str | None, loader: EncodingLoader = load_encoding) -> None:
        self.encoding_name = encoding_name
        self._loader = loader
        self._encoding: Any = None
        self._resolved = encoding_name is None

    @classmethod
    def for_model(cls, model: str, *, loader: EncodingLoader = load_encoding) -> TokenCounter:
        """A counter for ``model``: exact for OpenAI families, rough for everything else."""
        return cls(encoding_name_for_model(model), loader)

    @property
    def method(self) -> Literal["tiktoken", "rough"]:
        """How :meth:`count` counts (loads the encoding if that has not happened yet)."""
        return "tiktoken" if self._ensure_encoding() is not None else "rough"

    def preload(self) -> None:
        """Load the encoding now (blocking; ~0.5 s the first time in a process)."""
        self._ensure_encoding()

    def _ensure_encoding(self) -> Any:
        if not self._resolved:
            try:
                self._encoding = self._loader(self.encoding_name or "")
            except Exception as exc:  # a tokenizer problem must never break a turn
                log.warning("token counter falls back to the rough estimate: %s", exc)
                self._encoding = None
            self._resolved = True
        return self._encoding

    def count(self, message: Message) -> int:
        """Tokens of ``message`` (role, content, tool calls, plus per-message framing)."""
        encoding = self._ensure_encoding()
        if encoding is None:
            return estimate_message_tokens_rough(message)
        try:
            return self._count_exact(encoding, message)
        except Exception as exc:  # e.g. an odd content shape; the estimate is good enough
            log.debug("exact count failed, using the rough estimate: %s", exc)
            return estimate_message_tokens_rough(message)

    @staticmethod
    def _count_exact(encoding: Any, message: Message) -> int:
        def tokens(text: str) -> int:
            return len(encoding.encode(text, disallowed_special=())) if text else 0

        total = MESSAGE_OVERHEAD_TOKENS + tokens(str(message.get("role") or ""))
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in _IMAGE_PART_TYPES:
                    total += IMAGE_TOKENS
                elif isinstance(part, Mapping):
                    text = part.get("text")
                    total += tokens(text) if isinstance(text, str) else 0
                else:
                    total += tokens(str(part))
        elif content is not None:
            total += tokens(content if isinstance(content, str) else str(content))
        if message.get("tool_calls"):
            total += tokens(json.dumps(message["tool_calls"], ensure_ascii=False, default=str))
        return total
