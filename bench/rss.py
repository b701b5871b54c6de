"""Peak RSS of this process, as the benchmarks report it.

``resource.getrusage(...).ru_maxrss`` is wrong for a child the benchmarks spawn: Linux
carries the high-water mark across ``exec`` (the forked copy of the parent, resident for
an instant, counts), so a child started by a big parent reports at least the parent's
RSS. ``VmHWM`` in ``/proc/self/status`` is the high-water mark of this program's own
memory since it started.
"""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (``VmHWM``; ``ru_maxrss`` where there
    is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
