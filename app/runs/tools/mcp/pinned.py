"""The HTTP transport of an MCP server's connection: each request's host resolved once and
every address checked against the address policy (`app/core/addresses.py`), then the request
sent to an address that was checked, with the host's own name in `Host` and TLS (a DNS
answer that changes between the check and the connection cannot redirect it)."""

from __future__ import annotations

import contextlib
import ssl

import certifi
import httpx2

from app.core import resolution
from app.core.addresses import AddressPolicy, IPAddress, literal
from app.core.resolution import checked_addresses


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
        try:
            return await checked_addresses(host, self._policy, timeout_s=self._resolve_timeout_s)
        except resolution.Unresolvable as exc:
            raise Unresolvable(str(exc)) from exc
        except resolution.AddressRefused as exc:
            raise AddressRefused(
                f"{exc} (MCP server URLs must reach public addresses unless the operator "
                "allows them: LOOPWRIGHT_MCP__ALLOWED_NETWORKS)"
            ) from exc
