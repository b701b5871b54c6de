"""One TLS context for every HTTP client the model side opens (docs/design.md#memory-footprint)."""

from __future__ import annotations

import functools
import ssl

import httpx2


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx2's own default context (the CA bundle, or ``SSL_CERT_FILE``), built once: each
    client would otherwise parse the bundle again (~0.7 MB a client)."""
    return httpx2.create_ssl_context()
