"""Where a webhook's URL leads: its host resolved once, every address checked against the
address policy (`app/core/addresses.py`), at subscribe time and again at each attempt
(DNS may have changed), so that a delivery connects only to an address that was checked."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpx

from app.core.addresses import AddressPolicy, IPAddress, literal, refusal_reason


class TargetRefused(Exception):
    """The URL's host resolves to an address the policy refuses (the message says which)."""


class Unresolvable(Exception):
    """The URL's host does not resolve now."""


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
    """Every address the URL's host resolves to, looked up once; all must pass, since the
    connection may go to any of them."""
    host = url.raw_host.decode("ascii")
    if (given := literal(host)) is not None:
        found = [given]
    else:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError) as exc:
            raise Unresolvable(f"could not resolve {host}") from exc
        numbers = (i[4][0] for i in infos if i[0] in (socket.AF_INET, socket.AF_INET6))
        found = list(dict.fromkeys(ipaddress.ip_address(a) for a in numbers))
        if not found:
            raise Unresolvable(f"could not resolve {host}")
    for address in found:
        if reason := refusal_reason(address, policy):
            raise TargetRefused(f"refusing to connect to {address}: {reason}")
    return found
