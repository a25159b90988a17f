"""Where a webhook's URL leads: its host resolved once, every address checked against the
address policy (`app/core/addresses.py`), at subscribe time and again at each attempt
(DNS may have changed), so that a delivery connects only to an address that was checked."""

from __future__ import annotations

import httpx

from app.core.addresses import AddressPolicy, IPAddress
from app.core.resolution import AddressRefused, Unresolvable, checked_addresses

__all__ = ["AddressRefused", "InvalidUrl", "Unresolvable", "addresses", "parse"]


class InvalidUrl(Exception):
    """The URL cannot be sent to: httpx cannot read it, or it has no http(s) host."""


def parse(url: str) -> httpx.URL:
    """The URL as httpx reads it."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidUrl(f"invalid URL: {exc}") from None
    if not parsed.raw_host or parsed.scheme not in ("http", "https"):
        raise InvalidUrl("invalid URL: an http(s) URL with a host is needed")
    return parsed


async def addresses(url: httpx.URL, policy: AddressPolicy, *, timeout_s: float) -> list[IPAddress]:
    """Every address the URL's host resolves to, each checked (see `checked_addresses`)."""
    return await checked_addresses(url.raw_host.decode("ascii"), policy, timeout_s=timeout_s)
