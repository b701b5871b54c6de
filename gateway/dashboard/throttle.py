"""Failed dashboard logins, counted per client (docs/design.md#dashboard): after
:data:`FAILED_LOGINS_PER_MINUTE` wrong tokens in a minute a client gets 429 until the
minute has passed — that client alone, so a stranger's guesses never lock out the operator.

A client is the address the connection came from (``request.remote``); an IPv6 one counts
by its /64, which one host commonly holds whole. A request a reverse proxy forwarded (it
carries ``X-Forwarded-For``, ``Forwarded`` or ``X-Real-IP``) counts apart from direct ones
from the same address, so strangers coming through a proxy on this machine do not lock
out an ``ssh -L`` tunnel, which arrives from 127.0.0.1 too. Only the headers' presence
counts, never what they say: anyone can write them. Memory is bounded: the
:data:`MAX_CLIENTS` clients that failed most recently are remembered.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: Failed logins allowed per minute from one client, then 429 until it passes.
FAILED_LOGINS_PER_MINUTE = 10
WINDOW_SECONDS = 60.0
#: How many clients' recent failures are remembered; past it the stalest are forgotten.
MAX_CLIENTS = 4096


def client_of(remote: str | None, forwarded: bool) -> str:
    """The name failures are counted under for a peer ``remote``."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        name = remote or "unknown"
    else:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
            name = str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
        else:
            v4 = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else address
            name = str(v4)
    return f"{name} via a proxy" if forwarded else name


class LoginThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # Each client's failures in the last minute; the stalest client first.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def throttled(self, client: str) -> bool:
        return len(self._recent(client)) >= FAILED_LOGINS_PER_MINUTE

    def failed(self, client: str) -> None:
        failures = self._recent(client)
        failures.append(self.clock())
        self._failures[client] = failures
        self._failures.move_to_end(client)
        while len(self._failures) > MAX_CLIENTS:
            self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """The token was right: the client's earlier typos no longer count."""
        self._failures.pop(client, None)

    def _recent(self, client: str) -> deque[float]:
        failures = self._failures.get(client)
        if failures is None:
            return deque(maxlen=FAILED_LOGINS_PER_MINUTE)
        cutoff = self.clock() - WINDOW_SECONDS
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            del self._failures[client]
        return failures
