"""A bounded memory of keys seen lately (message ids the adapter passed on or delivered),
so a message that arrives twice — live and from a catch-up, or replayed on resume — is
passed on once."""

from __future__ import annotations

from collections import OrderedDict


class RecentKeys:
    """A bounded set of recently seen keys, oldest forgotten first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._keys: OrderedDict[object, None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def add(self, key: object) -> bool:
        """Remember ``key``; False when it was already known."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return True
