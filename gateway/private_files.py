"""Writing a file that holds secrets or data: whole, and private from its first byte
(docs/design.md#private-files).

``mkstemp`` creates the temporary file 0600, so the content is never readable by others,
not even for a moment; a rename (or, to create without replacing, a hard link) puts it in
place whole, after an fsync, so a crash leaves the old file or the new one, never half.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def private_file(path: Path, *, replace: bool = True, make_dir: bool = True) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path``, mode 0600, whole, when the block ends without
    an error (else nothing is left). ``replace=False`` creates it only if it does not
    exist (FileExistsError when it did). ``make_dir``: create a missing parent, 0700."""
    if make_dir:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)  # gone already after a rename


def write_private(path: Path, text: str, *, replace: bool = True, make_dir: bool = True) -> bool:
    """Write ``path`` holding ``text`` (:func:`private_file`); False when ``replace=False``
    and it existed."""
    try:
        with private_file(path, replace=replace, make_dir=make_dir) as file:
            file.write(text.encode("utf-8"))
    except FileExistsError:
        return False
    return True


def owned_as(paths: list[Path], directory: Path) -> None:
    """``paths`` given to ``directory``'s owner when root made them there (``sudo
    nightowl backup``): the gateway, running as that owner, must read them, and its own
    next backup write beside them."""
    owner = directory.stat()
    if os.geteuid() != 0 or owner.st_uid == 0:
        return
    for path in paths:
        os.chown(path, owner.st_uid, owner.st_gid)
