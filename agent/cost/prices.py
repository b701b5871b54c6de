"""A price per model, and what one call cost (docs/cost.md).

A price is USD per million tokens, held as :class:`~decimal.Decimal` so that sums of
many small calls stay exact (no float drift between ``/usage`` and a bill). Where a
model's price comes from (:func:`price_for`, docs/cost.md#where-a-price-comes-from):

1. a ``price`` in the config, always;
2. a local endpoint (localhost, a private network, a single-label host name): free;
3. the built-in table (:mod:`agent.cost.table`), by name (a snapshot's date or
   ``-latest`` may follow it);
4. otherwise unknown (``None``): a hosted model nobody priced is never taken as free.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext
from typing import Literal
from urllib.parse import urlsplit

from agent.cost import table
from agent.providers.base import Usage

Vendor = Literal["openai", "anthropic"]
CacheTTL = Literal["5m", "1h"]
Amount = Decimal | int | float | str

MILLION = Decimal(1_000_000)
#: Enough digits for any token count times any price, exactly.
EXACT = Context(prec=50)
#: Host name endings that never leave the machine or the local network.
LOCAL_SUFFIXES = (".local", ".internal", ".lan", ".home.arpa", ".localhost", ".ts.net")
#: 100.64.0.0/10: carrier-grade NAT, and the addresses of a Tailscale network (a GPU box
#: at home reached over Tailscale is local in all but name).
SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")


def to_decimal(value: Amount) -> Decimal:
    """A number as written: a float through its shortest text (0.15 -> Decimal("0.15"),
    not 0.1499999...). Refuses NaN, infinities and negatives."""
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ValueError(f"a price is a number, got {value!r}") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"a price is a finite number of at least 0, got {value!r}")
    return number


@dataclass(frozen=True)
class Price:
    """USD per million tokens: uncached input, cache reads, output, and input written to
    the cache (Anthropic bills those above input: 1.25x for 5 minutes, 2x for an hour)."""

    input: Decimal
    cached_input: Decimal
    output: Decimal
    cache_write: Decimal
    cache_write_1h: Decimal

    @classmethod
    def per_million(
        cls,
        input: Amount,
        output: Amount,
        *,
        cached_input: Amount | None = None,
        cache_write: Amount | None = None,
        cache_write_1h: Amount | None = None,
        vendor: Vendor = "openai",
    ) -> Price:
        """A price from its input and output rates; the cache rates left out follow the
        vendor's rule (docs/cost.md#how-a-call-is-priced): OpenAI-style, cached input
        at half the input price and no write surcharge; Anthropic, reads at 0.1x,
        writes at 1.25x (5 minutes) and 2x (1 hour)."""
        base = to_decimal(input)
        anthropic = vendor == "anthropic"
        with localcontext(EXACT):
            default_cached = base * Decimal("0.1") if anthropic else base / 2
            default_write = base * Decimal("1.25") if anthropic else base
            default_write_1h = base * 2 if anthropic else base
        return cls(
            input=base,
            cached_input=_or(cached_input, default_cached),
            output=to_decimal(output),
            cache_write=_or(cache_write, default_write),
            cache_write_1h=_or(cache_write_1h, default_write_1h),
        )

    @property
    def free(self) -> bool:
        return not any(
            (self.input, self.cached_input, self.output, self.cache_write, self.cache_write_1h)
        )


def _or(value: Amount | None, default: Decimal) -> Decimal:
    return default if value is None else to_decimal(value)


FREE = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), Decimal(0))


def _row_price(row: table.Row) -> Price:
    input_, cached, output, write, write_1h = (Decimal(value) for value in row)
    return Price(input_, cached, output, write, write_1h)


BUILT_IN: dict[str, Price] = {
    name: _row_price(row) for name, row in (table.OPENAI | table.ANTHROPIC).items()
}


#: What may follow a table key in a model's name: a snapshot's date (``-2024-07-18``,
#: ``-20250929``) or ``-latest``. Anything else is another model (``gpt-5-pro`` is not
#: ``gpt-5``, ``gpt-4o-realtime-preview`` not ``gpt-4o``).
SNAPSHOT = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest)?")


def table_price(model: str) -> Price | None:
    """The built-in price of ``model``: a table key, exactly or with a snapshot's date or
    ``-latest`` after it (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``); any other name
    is unknown. A router's ``vendor/`` prefix (``openai/gpt-4o``) is ignored; case is
    ignored."""
    name = model.strip().lower().rpartition("/")[2]
    found = [
        key for key in BUILT_IN if name.startswith(key) and SNAPSHOT.fullmatch(name[len(key) :])
    ]
    best = max(found, key=len, default=None)
    return BUILT_IN[best] if best is not None else None


def is_local_endpoint(base_url: str | None) -> bool:
    """Whether requests to ``base_url`` stay on this machine or its network: loopback,
    private, link-local and 100.64/10 (Tailscale) addresses, ``localhost``, a
    single-label host (``ollama``, a compose service) and names under .local,
    .internal, .lan, .home.arpa and .ts.net. No base URL
    means the provider's own API: not local. No DNS lookup is made."""
    if not base_url:
        return False
    host = (urlsplit(base_url if "//" in base_url else f"//{base_url}").hostname or "").lower()
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(LOCAL_SUFFIXES)
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address in SHARED_ADDRESS_SPACE
    )


def price_for(model: str, base_url: str | None, configured: Price | None = None) -> Price | None:
    """The price of ``model`` served at ``base_url``, or None when it is unknown (see the
    module docstring for the order). The table is by model name wherever the model is
    served: a router such as OpenRouter passes the vendor's price on."""
    if configured is not None:
        return configured
    if is_local_endpoint(base_url):
        return FREE
    return table_price(model)


def cost_of(usage: Usage | None, price: Price | None, cache_ttl: CacheTTL = "5m") -> Decimal | None:
    """What a call cost in USD, exactly; None when the price or the usage is unknown.

    ``usage`` is normalised by the providers (agent/providers/base.py): ``prompt_tokens``
    is the whole input, cache reads and writes included, for OpenAI (whose
    ``prompt_tokens`` already includes ``cached_tokens``) and Anthropic (whose
    ``input_tokens`` excludes both, and is added back) alike. So the uncached input is
    the prompt minus reads minus writes (docs/cost.md#how-a-call-is-priced). Cache
    writes are billed at the rate for ``cache_ttl``, the TTL the request asked for.
    """
    if price is None:
        return None
    if price.free:  # a local server that reports no usage still cost nothing
        return Decimal(0)
    if usage is None:
        return None
    reads, writes = usage.cache_read_tokens, usage.cache_write_tokens
    uncached = max(usage.prompt_tokens - reads - writes, 0)
    write_rate = price.cache_write_1h if cache_ttl == "1h" else price.cache_write
    with localcontext(EXACT):
        total = (
            uncached * price.input
            + reads * price.cached_input
            + writes * write_rate
            + usage.completion_tokens * price.output
        )
        return total / MILLION


def transcription_price(
    model: str, base_url: str | None, configured: Amount | None
) -> Decimal | None:
    """USD per minute of audio: configured; free at a local endpoint; the table for
    OpenAI's models; else unknown (docs/cost.md#transcription)."""
    if configured is not None:
        return to_decimal(configured)
    if is_local_endpoint(base_url):
        return Decimal(0)
    listed = table.TRANSCRIPTION.get(model.strip().lower())
    return Decimal(listed) if listed is not None else None


def transcription_cost(seconds: float, per_minute: Decimal | None) -> Decimal | None:
    """What transcribing ``seconds`` of audio cost: the per-minute price for the
    duration rounded to the nearest second, as OpenAI bills (docs/cost.md#transcription)."""
    if per_minute is None:
        return None
    whole = int(Decimal(repr(float(max(seconds, 0)))).quantize(Decimal(1), ROUND_HALF_UP))
    with localcontext(EXACT):
        return whole * per_minute / 60
