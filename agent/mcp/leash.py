"""Runs a stdio MCP server so that it cannot outlive the gateway (docs/design.md#mcp-children).

``python -m agent.mcp.leash GATEWAY_PID -- COMMAND [ARGS...]``. The MCP SDK starts this
in a new process group; it starts the server in the same group (stdin, stdout and
stderr passed through) and waits for it. When the gateway dies — even by SIGKILL, when
nothing of the gateway's own code runs — the kernel sends this process SIGTERM
(``PR_SET_PDEATHSIG`` on Linux; elsewhere a watch of the parent pid), and it kills the
whole group: the server and whatever the server started. The SDK's own shutdown (stdin
closed, then SIGTERM to the group) ends it the same way. The server's exit code is
passed on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
#: How often the parent pid is checked where the kernel cannot tell us.
WATCH_SECONDS = 0.5


def _kill_group(*_: object) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)  # the leash included: nothing is left behind


def _tie_to_parent(parent: int) -> None:
    """Be told by the kernel when ``parent`` dies; or watch for it where that is not
    available. Exits at once when ``parent`` is already gone."""
    told = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            told = libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    if os.getppid() != parent:  # died before the line above took effect
        _kill_group()
    if not told:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(WATCH_SECONDS)
            _kill_group()

        threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m agent.mcp.leash GATEWAY_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _kill_group)
    _tie_to_parent(int(argv[0]))
    try:
        server = subprocess.Popen(argv[2:])
    except OSError as exc:
        print(f"cannot start {argv[2]}: {exc.strerror}", file=sys.stderr)
        return 127
    code = server.wait()
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
