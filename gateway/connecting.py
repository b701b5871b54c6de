"""Whether anything takes a connection at a URL's host and port, without a request: what
``nightowl doctor`` asks of the alerts webhook and the alerts ask of a local model server
before its first reply (docs/operations.md#alerts). Only the standard library: the
running gateway imports this.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from agent.urls import port_of


async def connect_problem(url: str, timeout: float) -> str | None:
    """Why nothing at ``url``'s host and port takes a connection, in a few words
    ("connection refused", "no answer within 5 s"); None when something does. Each
    address the name resolves to is tried in turn (``localhost`` is ``::1`` and
    127.0.0.1), and the last one's reason is said, not asyncio's list of them all."""
    try:
        parts = urlsplit(url)
        port = port_of(parts)
    except ValueError:  # not a number, or past 65535
        return "its port is not valid"
    host = parts.hostname
    if not host:
        return "it names no host"
    problem = "no address"
    try:
        async with asyncio.timeout(timeout):
            loop = asyncio.get_running_loop()
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            for *_, address in found:
                try:
                    _, writer = await asyncio.open_connection(str(address[0]), port)
                except OSError as error:
                    problem = os_reason(error)
                    continue
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return None
    except TimeoutError:  # before OSError: it is one
        return f"no answer within {timeout:g} s"
    except socket.gaierror as error:
        return f"{host} does not resolve ({error.strerror})"
    except UnicodeError:  # an empty label (hooks..example.org), a label past 63 characters
        return f"{host} is not a valid host name"
    return problem


def proxied(url: str) -> bool:
    """Whether requests to ``url`` go through a proxy the environment names
    (``HTTPS_PROXY``, ``ALL_PROXY``... and not ``NO_PROXY``), as httpx sends them: a
    connection straight to its host proves nothing then."""
    parts = urlsplit(url)
    proxies = getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not proxy_bypass(parts.hostname or "")


def os_reason(error: OSError) -> str:
    """Why a socket call failed, in a few words ("connection refused"): asyncio's message
    around it names addresses, and a resolver's error number is not the system's."""
    if isinstance(error, socket.gaierror):
        return str(error.strerror or error).lower()
    if error.errno:
        return os.strerror(error.errno).lower()
    return str(error)
