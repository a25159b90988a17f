"""A host resolved once and every address it resolves to checked against the address
policy (`app/core/addresses.py`): the one lookup behind outbound HTTP (the `http_request`
tool, webhook deliveries, MCP servers over HTTP). The caller connects only to an address
returned here, so a DNS answer that changes between the check and the connection cannot
redirect it."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from app.core.addresses import AddressPolicy, IPAddress, literal, refusal_reason


class Unresolvable(Exception):
    """The host does not resolve now. `transient`: the resolver said to try later (or did
    not answer in time); otherwise the name does not exist."""

    def __init__(self, host: str, *, transient: bool) -> None:
        super().__init__(f"could not resolve {host}")
        self.transient = transient


class AddressRefused(Exception):
    """The host resolves to an address the policy refuses (the message says which)."""

    def __init__(self, address: IPAddress, reason: str) -> None:
        super().__init__(f"refusing to connect to {address}: {reason}")


async def checked_addresses(
    host: str, policy: AddressPolicy, *, timeout_s: float | None = None
) -> list[IPAddress]:
    """Every address `host` (a name or an IP literal) resolves to, looked up once, in the
    resolver's order without repeats; all must pass, since the connection may go to any."""
    found = await _resolve(host, timeout_s) if (given := literal(host)) is None else [given]
    for address in found:
        if reason := refusal_reason(address, policy):
            raise AddressRefused(address, reason)
    return found


async def _resolve(host: str, timeout_s: float | None) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s):
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except TimeoutError as exc:
        raise Unresolvable(host, transient=True) from exc
    except socket.gaierror as exc:
        # EAI_AGAIN is the resolver saying "try later"; a name that does not exist is final.
        raise Unresolvable(host, transient=exc.errno == socket.EAI_AGAIN) from exc
    except OSError as exc:
        raise Unresolvable(host, transient=True) from exc
    numbers = (i[4][0] for i in infos if i[0] in (socket.AF_INET, socket.AF_INET6))
    found = list(dict.fromkeys(ipaddress.ip_address(a) for a in numbers))
    if not found:
        raise Unresolvable(host, transient=False)
    return found
