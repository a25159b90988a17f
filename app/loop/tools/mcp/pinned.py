"""The HTTP transport of an MCP server's connection: each request's host resolved once and
every address checked against the address policy (`app/core/addresses.py`), then the request
sent to an address that was checked, with the host's own name in `Host` and TLS (a DNS
answer that changes between the check and the connection cannot redirect it)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl

import certifi
import httpx2

from app.core.addresses import AddressPolicy, IPAddress, literal, refusal_reason


class AddressRefused(httpx2.TransportError):
    """The host resolves to an address the policy refuses (the message says which)."""


class Unresolvable(httpx2.ConnectError):
    """The host does not resolve now (it may later)."""


class PinnedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, policy: AddressPolicy, *, resolve_timeout_s: float = 10.0) -> None:
        self._policy = policy
        self._resolve_timeout_s = resolve_timeout_s
        tls = ssl.create_default_context(cafile=certifi.where())
        self._inner = httpx2.AsyncHTTPTransport(verify=tls, trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host
        addresses = await self._checked(host)
        if literal(host) is None:  # a name: present it in TLS, though we dial an address
            request.extensions = {**request.extensions, "sni_hostname": host}
        original = request.url
        for address in addresses[:-1]:
            request.url = original.copy_with(host=str(address))
            with contextlib.suppress(httpx2.ConnectError):
                return await self._inner.handle_async_request(request)
        request.url = original.copy_with(host=str(addresses[-1]))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def _checked(self, host: str) -> list[IPAddress]:
        """Every address `host` resolves to, looked up once; all must pass, since the
        connection may go to any of them."""
        if (given := literal(host)) is not None:
            found = [given]
        else:
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self._resolve_timeout_s):
                    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except (OSError, TimeoutError) as exc:
                raise Unresolvable(f"could not resolve {host}") from exc
            numbers = (i[4][0] for i in infos if i[0] in (socket.AF_INET, socket.AF_INET6))
            found = list(dict.fromkeys(ipaddress.ip_address(a) for a in numbers))
            if not found:
                raise Unresolvable(f"could not resolve {host}")
        for address in found:
            if reason := refusal_reason(address, self._policy):
                raise AddressRefused(
                    f"refusing to connect to {address}: {reason} (MCP server URLs must reach "
                    "public addresses unless the operator allows them: "
                    "LOOPWRIGHT_MCP__ALLOWED_NETWORKS)"
                )
        return found
