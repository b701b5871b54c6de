"""What the benchmarks share: a platform that only signals replies, and percentiles."""

from __future__ import annotations

import asyncio
import compileall
import os
from pathlib import Path

from adapters.base import Adapter, InboundSink, OutboundMessage
from adapters.console import ConsoleAdapter


class SignalAdapter(Adapter):
    """A platform with no I/O: ``replied`` is set when the gateway sends anything."""

    def __init__(self) -> None:
        self.platform = "console"
        self.traits = ConsoleAdapter.traits  # the operator's own chat, as the console's
        self.replied = asyncio.Event()

    async def start(self, sink: InboundSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        pass

    async def send(self, message: OutboundMessage) -> list[str]:
        self.replied.set()
        return []


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99 for p99) of an already sorted list."""
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds_of(command: str) -> float:
    """CPU time of every process named ``command`` now running (e.g. "postgres")."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == command:
                total += cpu_seconds(int(entry.name))
        except OSError:
            continue  # it ended meanwhile
    return total


def bytecode_as_installed() -> None:
    """Compile nightowl's modules to bytecode in the tree's ``__pycache__`` (ignored by
    git), so the processes a benchmark starts load them as an installed nightowl does
    (``pip install .`` compiles every module) instead of compiling each from source at
    import, as an editable install under ``PYTHONDONTWRITEBYTECODE`` does (about a
    megabyte more RSS, and slower start). The libraries beside it come as bytecode too."""
    root = Path(__file__).resolve().parents[1]
    for package in ("gateway", "agent", "adapters"):
        compileall.compile_dir(root / package, quiet=1)
    compileall.compile_file(root / "nightowl_errors.py", quiet=1)
