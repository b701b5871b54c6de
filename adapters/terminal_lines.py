"""Lines typed or pasted into a terminal, of any length.

In its usual (canonical) mode the terminal driver edits the line itself and keeps at most
4,095 characters of it: a longer paste is cut without a word. :class:`TerminalLines`
switches that off (no ``ICANON``, no echo; signals such as Ctrl-C stay with the driver),
reads what arrives and does the little editing a plain terminal offers itself with
:class:`LineEditor`: erase a character (Backspace), a word (Ctrl-W) or the line (Ctrl-U),
end the input (Ctrl-D on an empty line). The terminal's settings come back on
:meth:`TerminalLines.restore`, at the end of input, and at exit.

A paste is one message, however many lines it holds: the terminal is asked for
bracketed paste (``ESC[?2004h``, which xterm, VTE, iTerm2, kitty, tmux and Windows
Terminal honour), so it wraps what is pasted in ``ESC[200~`` … ``ESC[201~``; the line
breaks inside stay in the line, and Enter sends it all (docs/operations.md#console).
A terminal without it sends a paste as typed lines, one message each.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import re
import select
import termios
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: termios attribute indexes (see termios.tcgetattr).
_IFLAG, _LFLAG, _CC = 0, 3, 6
_READ_SIZE = 65536
# An escape sequence a key sends (arrows, Home, F-keys): ignored, as canonical mode would.
_KEY_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|O.|[^\[O])", re.DOTALL)
_INCOMPLETE_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|O)?\Z")
#: Where a bracketed paste starts and ends.
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
_PASTE_MARKS = re.compile("(" + re.escape(PASTE_START) + "|" + re.escape(PASTE_END) + ")")
#: A paste still open after this long without input has lost its end marker.
PASTE_QUIET = 0.5
#: Asks the terminal to bracket pastes, and to stop.
BRACKETED_PASTE_ON, BRACKETED_PASTE_OFF = b"\x1b[?2004h", b"\x1b[?2004l"


@dataclass
class Fed:
    """What one chunk of input produced: text to echo, finished lines, end of input."""

    echo: str = ""
    lines: list[str] = field(default_factory=list)
    end: bool = False


class LineEditor:
    """The editing canonical mode offers, without its line limit. Pure: no I/O."""

    def __init__(self, erase: str = "\x7f", kill: str = "\x15", word_erase: str = "\x17",
                 end: str = "\x04") -> None:  # fmt: skip
        self.erase, self.kill, self.word_erase, self.end = erase, kill, word_erase, end
        self._line: list[str] = []
        self._pending = ""  # the start of a key's escape sequence, split across reads
        self._pasting = False  # inside a bracketed paste: its line breaks stay in the line

    @property
    def pasting(self) -> bool:
        return self._pasting

    def end_paste(self) -> None:
        """A paste whose end marker never came (a terminal that lost it) ends here."""
        self._pasting = False

    def feed(self, text: str) -> Fed:
        fed = Fed()
        text = self._pending + text
        self._pending = ""
        incomplete = _INCOMPLETE_SEQUENCE.search(text)
        if incomplete:
            text, self._pending = text[: incomplete.start()], text[incomplete.start() :]
        echo: list[str] = []
        for part in _PASTE_MARKS.split(text):
            if part in (PASTE_START, PASTE_END):
                self._pasting = part == PASTE_START
            elif self._pasting:
                echo.append(self._paste(_KEY_SEQUENCE.sub("", part)))
            elif self._type(_KEY_SEQUENCE.sub("", part), fed, echo):
                break
        fed.echo = "".join(echo)
        return fed

    def _paste(self, text: str) -> str:
        """Pasted text joins the line as it is: a line break is a line break in the
        message, and no control character edits or ends anything."""
        kept = [
            "\n" if char in "\r\n" else char
            for char in text.replace("\r\n", "\n")
            if char in "\r\n" or _kept(char)
        ]
        self._line += kept
        return "".join(kept)

    def _type(self, text: str, fed: Fed, echo: list[str]) -> bool:
        """Typed keys: editing, lines ended by Enter; True at the end of input."""
        for char in text:
            if char in "\r\n":
                fed.lines.append("".join(self._line))
                self._line.clear()
                echo.append("\n")
            elif char in (self.erase, "\x08"):
                if self._line:
                    echo.append(_rub_out(self._line.pop()))
            elif char == self.word_erase:
                echo.append(self._erase_word())
            elif char == self.kill:
                echo.append("".join(_rub_out(c) for c in reversed(self._line)))
                self._line.clear()
            elif char == self.end:
                if not self._line:
                    fed.end = True
                    return True
            elif _kept(char):
                self._line.append(char)
                echo.append(char)
        return False

    def _erase_word(self) -> str:
        erased: list[str] = []
        while self._line and self._line[-1].isspace():
            erased.append(_rub_out(self._line.pop()))
        while self._line and not self._line[-1].isspace():
            erased.append(_rub_out(self._line.pop()))
        return "".join(erased)


#: Format characters text needs: the joiners of emoji sequences and of Persian words.
_JOINERS = frozenset("\u200c\u200d")


def _kept(char: str) -> bool:
    """Whether ``char`` is text: a tab, a joiner, anything but a control or format one."""
    return char == "\t" or char in _JOINERS or unicodedata.category(char)[0] != "C"


def _rub_out(char: str) -> str:
    width = 2 if unicodedata.east_asian_width(char) in "WF" else 1
    if unicodedata.combining(char):
        width = 0
    return "\b \b" * width


class TerminalLines:
    """Reads lines from the terminal at ``fd`` on a daemon thread, without the line limit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved = termios.tcgetattr(fd)
        self._restored = threading.Event()
        cc = self._saved[_CC]
        self._editor = LineEditor(
            erase=_control(cc[termios.VERASE], "\x7f"),
            kill=_control(cc[termios.VKILL], "\x15"),
            word_erase=_control(cc[termios.VWERASE], "\x17"),
            end=_control(cc[termios.VEOF], "\x04"),
        )
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        atexit.register(self.restore)
        # Now, not on the reader thread: a paste that arrives right after the prompt is
        # printed must already meet a terminal without the line limit, and bracketed.
        self._brackets = os.environ.get("TERM", "") != "dumb"  # Emacs' M-x shell: no escapes
        self._raw_mode()

    @classmethod
    def open(cls, stream: Any) -> TerminalLines | None:
        """Lines from ``stream``'s terminal; None when it is not one (a pipe, a file)."""
        try:
            return cls(stream.fileno())
        except (termios.error, OSError, ValueError, AttributeError):
            return None

    def read(self, on_line: Callable[[str], None]) -> None:
        """Call ``on_line`` for every line until the input ends (blocks: run on a thread)."""
        try:
            while not self._restored.is_set():
                self._raw_mode()  # again each time: a shell resuming us (fg) restores its own
                if self._editor.pasting and not select.select([self.fd], [], [], PASTE_QUIET)[0]:
                    self._editor.end_paste()  # its end marker never came: typing edits again
                    continue
                data = os.read(self.fd, _READ_SIZE)
                if not data:
                    return  # the terminal hung up
                fed = self._editor.feed(self._decoder.decode(data))
                if fed.echo:
                    with contextlib.suppress(OSError):
                        os.write(self.fd, fed.echo.encode("utf-8", "replace"))
                for line in fed.lines:
                    on_line(line + "\n")
                if fed.end:
                    return
        finally:
            self.restore()

    def restore(self) -> None:
        """Give the terminal its settings back (idempotent, any thread)."""
        if self._restored.is_set():
            return
        self._restored.set()
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
        if self._brackets:
            with contextlib.suppress(OSError):
                os.write(self.fd, BRACKETED_PASTE_OFF)

    def _raw_mode(self) -> None:
        attrs = termios.tcgetattr(self.fd)
        if not attrs[_LFLAG] & (termios.ICANON | termios.ECHO):
            return
        attrs[_LFLAG] &= ~(termios.ICANON | termios.ECHO | termios.ECHONL | termios.IEXTEN)
        attrs[_IFLAG] |= termios.ICRNL  # Enter ends a line whatever the terminal sends
        attrs[_CC] = list(attrs[_CC])
        attrs[_CC][termios.VMIN] = 1
        attrs[_CC][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        if self._brackets:  # asked again too: a shell turns it off for its own line (fg)
            with contextlib.suppress(OSError):
                os.write(self.fd, BRACKETED_PASTE_ON)


def _control(value: bytes | int, default: str) -> str:
    char = chr(value) if isinstance(value, int) else value.decode("latin-1")
    return char if char and char != "\x00" else default
