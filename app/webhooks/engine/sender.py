"""One attempt at a delivery: a signed POST of its payload to the webhook's URL, to an
address the policy allows, under one time-out; its outcome (status, latency, the start of
the answer, or why nothing came back) is a value, never an exception.

Redirects are not followed (a 3xx is a failed attempt: a receiver that moved is told by
the log, and a redirect could lead anywhere). Only a 2xx is a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any

import certifi
import httpx

from app.core.addresses import IPAddress, literal
from app.core.signatures import SIGNATURE_HEADER, signature_header
from app.webhooks.engine.policy import DeliveryPolicy
from app.webhooks.engine.targets import AddressRefused, InvalidUrl, Unresolvable, addresses, parse

USER_AGENT = "Loopwright-Webhooks/1"
DELIVERY_HEADER = "Loopwright-Delivery"
EVENT_HEADER = "Loopwright-Event"
ERROR_MAX_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: an HTTP status (and the start of the body), or an error."""

    latency_ms: int
    status_code: int | None = None
    excerpt: str | None = None
    error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class Message:
    """A delivery as it is sent: where, signed with what, and the body."""

    delivery_id: str
    event_type: str
    url: str
    secret: str
    payload: dict[str, Any]

    def body(self) -> bytes:
        return json.dumps(self.payload, ensure_ascii=False, separators=(",", ":")).encode()


class Sender:
    """Sends attempts under `policy`. One TLS context for the process; a client per attempt,
    so a pooled connection never carries one name's TLS to another address."""

    def __init__(self, policy: DeliveryPolicy) -> None:
        self._policy = policy
        self._tls = ssl.create_default_context(cafile=certifi.where())

    async def send(self, message: Message, timestamp: int) -> Outcome:
        """POST `message` signed at `timestamp` (unix seconds)."""
        started = time.perf_counter()

        def outcome(**fields: Any) -> Outcome:
            return Outcome(round((time.perf_counter() - started) * 1000), **fields)

        try:
            async with asyncio.timeout(self._policy.timeout_s):
                status, excerpt = await self._post(message, timestamp)
        except TimeoutError:
            return outcome(error=f"timed out after {self._policy.timeout_s:g}s")
        except (InvalidUrl, AddressRefused, Unresolvable) as exc:
            return outcome(error=str(exc)[:ERROR_MAX_CHARS])
        except httpx.HTTPError as exc:
            return outcome(error=_describe(exc)[:ERROR_MAX_CHARS])
        return outcome(status_code=status, excerpt=excerpt)

    async def _post(self, message: Message, timestamp: int) -> tuple[int, str]:
        url = parse(message.url)
        found = await addresses(url, self._policy, timeout_s=self._policy.timeout_s)
        body = message.body()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Host": url.netloc.decode("ascii"),
            "Accept-Encoding": "identity",  # the excerpt is read raw, up to its cap
            SIGNATURE_HEADER: signature_header(message.secret, timestamp, body),
            DELIVERY_HEADER: message.delivery_id,
            EVENT_HEADER: message.event_type,
        }
        # No timeout of httpx's own: the attempt's one time-out (`send`) covers every step.
        client = httpx.AsyncClient(verify=self._tls, trust_env=False, timeout=None)
        async with client:
            requests = [_request(client, url, a, headers, body) for a in found]
            response = await _send_first(client, requests)
            try:
                excerpt = await _excerpt(response, self._policy.excerpt_chars)
            finally:
                await response.aclose()
        return response.status_code, excerpt


def _request(
    client: httpx.AsyncClient,
    url: httpx.URL,
    address: IPAddress,
    headers: dict[str, str],
    body: bytes,
) -> httpx.Request:
    """The POST sent to the checked `address`, with the URL's own name in Host and TLS."""
    host = url.raw_host.decode("ascii")
    extensions = {} if literal(host) is not None else {"sni_hostname": host}
    target = url.copy_with(host=str(address))
    return client.build_request(
        "POST", target, headers=headers, content=body, extensions=extensions
    )


async def _send_first(client: httpx.AsyncClient, requests: list[httpx.Request]) -> httpx.Response:
    """The first checked address that accepts a connection answers."""
    for request in requests[:-1]:
        with contextlib.suppress(httpx.ConnectError):
            return await client.send(request, stream=True)
    return await client.send(requests[-1], stream=True)


async def _excerpt(response: httpx.Response, chars: int) -> str:
    """The start of the answer's body as text, at most `chars` characters."""
    limit = chars * 4  # UTF-8: at most four bytes a character
    content = bytearray()
    if limit:
        async for chunk in response.aiter_raw():
            content += chunk
            if len(content) >= limit:
                break
    return bytes(content[:limit]).decode("utf-8", errors="replace")[:chars]


def _describe(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect: {exc}"
    return f"the request failed ({type(exc).__name__}: {exc})"
