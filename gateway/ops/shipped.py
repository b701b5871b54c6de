"""Files nightowl ships beside its code (``config.yaml.example``, the systemd unit): at
the root of a source checkout, or where ``pip install`` put pyproject.toml's data files,
``<data>/share/nightowl`` — the venv, the interpreter's prefix or, on Debian's Python,
``/usr/local`` (sysconfig's ``data`` path), or the user base for ``pip install --user``."""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]


def shipped(*parts: str) -> Path | None:
    """The shipped file at ``parts`` (relative to the checkout's root), if found."""
    installed = [
        Path(base) / "share" / "nightowl"
        for base in (sysconfig.get_path("data"), sys.prefix, site.getuserbase())
    ]
    candidates = [SOURCE_ROOT.joinpath(*parts), *(place.joinpath(*parts) for place in installed)]
    return next((path for path in candidates if path.is_file()), None)
