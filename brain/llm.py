"""The Anthropic client factory shared by synthesis, query and commitment extraction.

``anthropic_client()`` returns None when no key is configured, so callers answer
``unavailable`` or fall back to offline code (SPEC §4, §5.3). Tests give the real
client an ``httpx2.MockTransport`` through ``use_transport`` (the HTTP layer), so the
client code that runs in production runs in tests too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

# Reference prices in USD per million tokens (input, output) for cost estimates and
# the daily extraction cap; unknown models use the most expensive row.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-5": (3.0, 15.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-opus-5": (5.0, 25.0),
}

_transport: Any = None


def anthropic_client(*, max_retries: int = 2, timeout: float = 60.0) -> Any | None:
    """Return an ``anthropic.Anthropic`` client, or None without ``ANTHROPIC_API_KEY``."""
    if not settings.ANTHROPIC_API_KEY:
        return None
    import anthropic

    http_client = None
    if _transport is not None:
        import httpx2

        http_client = httpx2.Client(transport=_transport)
    return anthropic.Anthropic(
        api_key=settings.ANTHROPIC_API_KEY,
        max_retries=max_retries,
        timeout=timeout,
        http_client=http_client,
    )


def estimate_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """Estimated cost in USD of one call (prices per million tokens)."""
    price_in, price_out = PRICES_PER_MTOK.get(model, max(PRICES_PER_MTOK.values()))
    return round((input_tokens * price_in + output_tokens * price_out) / 1_000_000, 6)


@contextmanager
def use_transport(transport: Any) -> Iterator[None]:
    """Route every client made inside the block through ``transport`` (tests)."""
    global _transport
    previous, _transport = _transport, transport
    try:
        yield
    finally:
        _transport = previous
