"""The http_request tool: one HTTP call to a public address. Every resolved address is checked
before connecting, the connection goes to the address that was checked (no second lookup), and
each redirect is checked again from the start.

Every request carries the call's `Idempotency-Key` (stable for the run and the call) and, when
tracing is on, the `traceparent` of the call's span (replacing one the model gave). To a host
the operator lists as honouring the key (`idempotency_key_hosts`), a POST, PUT, PATCH or DELETE is
deduplicated by the remote: it is retried and re-sent on resume with the same key instead of
halting the run. Such a request follows a redirect that keeps its method and body only to a
host that honours the key too: a re-send would repeat the hop to one that does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import certifi
import httpx

from app.core.addresses import IPAddress, IPNetwork, literal, parse_networks
from app.core.resolution import AddressRefused, Unresolvable, checked_addresses
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool
from app.telemetry import tracing

METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Set by the tool: a caller's Host could steer a shared front end to an internal virtual host,
# and the framing headers must match what is actually sent.
_FRAMING = {"connection", "content-length", "transfer-encoding"}
TOOL_HEADERS = frozenset({"host", "idempotency-key", "accept-encoding", *_FRAMING})
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
# A token, a newline (which neither part may contain), then printable ASCII.
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\n[\t\x20-\x7e]*")


@dataclass(frozen=True)
class HttpToolPolicy:
    """What the http_request tool may reach and how much it may take. By default only public
    addresses; `allowed_networks` opens exact ranges (tests use "127.0.0.0/8")."""

    allow_private: bool = False
    allowed_networks: tuple[str, ...] = ()
    timeout_s: float = 10.0  # for the whole call: DNS, every redirect hop and the body
    max_response_bytes: int = 1_000_000
    max_redirects: int = 5
    allowed_schemes: tuple[str, ...] = ("http", "https")
    # Hosts (`name`, or `name:port` for one port only) that honour an Idempotency-Key.
    idempotency_key_hosts: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        if self.max_response_bytes < 1:
            raise ValueError("max_response_bytes must be at least 1")
        if self.max_redirects < 0:
            raise ValueError("max_redirects must not be negative")
        if not self.allowed_schemes or not set(self.allowed_schemes) <= {"http", "https"}:
            raise ValueError("allowed_schemes: only http and https are supported")
        networks = parse_networks(self.allowed_networks)
        object.__setattr__(self, "allowed_networks", tuple(self.allowed_networks))
        object.__setattr__(self, "networks", networks)
        if isinstance(self.idempotency_key_hosts, str):
            raise ValueError("idempotency_key_hosts must be a tuple of host names")
        hosts = tuple(h.strip().lower() for h in self.idempotency_key_hosts)
        if not all(hosts):
            raise ValueError("idempotency_key_hosts: a host name may not be empty")
        object.__setattr__(self, "idempotency_key_hosts", hosts)

    def honours_key(self, url: httpx.URL) -> bool:
        """Whether the operator listed `url`'s host (on any port, or on this one)."""
        host = url.host.lower()
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as written in a URL
        port = url.port or {"http": 80, "https": 443}.get(url.scheme)
        return bool({shown, f"{shown}:{port}"} & set(self.idempotency_key_hosts))


def make_http_request_tool(policy: HttpToolPolicy | None = None) -> Tool:
    """The http_request tool under `policy` (by default: public addresses only)."""
    policy = policy or HttpToolPolicy()
    tls = ssl.create_default_context(cafile=certifi.where())

    async def handler(ctx: ToolContext, arguments: dict[str, Any]) -> str:
        call = _parse_arguments(arguments)
        keyed = _deduplicated(policy, arguments)
        try:
            async with asyncio.timeout(policy.timeout_s):
                return await _fetch(policy, tls, ctx.idempotency_key, call, keyed=keyed)
        except TimeoutError as exc:
            raise ToolFailure(f"timed out after {policy.timeout_s:g}s", transient=True) from exc

    def deduplicated(arguments: dict[str, Any]) -> bool:
        return _deduplicated(policy, arguments)

    return define_tool(
        "http_request",
        "Make one HTTP request to a public internet address and get back its status, main "
        "headers and body as text (cut at a size limit). Private, loopback and cloud metadata "
        "addresses are refused; redirects are followed; 429 and 5xx answers are errors.",
        INPUT_SCHEMA,
        handler,
        idempotent=_is_safe_method,  # per call: a GET may be repeated, a POST may not
        destructive=lambda arguments: not _is_safe_method(arguments),  # a GET changes nothing
        deduplicated=deduplicated,  # a POST to a host that honours its key may be re-sent
        retries=True,
    )


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "An absolute http(s) URL."},
        "method": {"type": "string", "enum": list(METHODS), "default": "GET"},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Extra request headers (Host and Idempotency-Key are the tool's).",
        },
        "body": {"type": "string", "description": "Request body, sent as UTF-8."},
    },
    "required": ["url"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class _Call:
    method: str
    url: str | httpx.URL
    headers: dict[str, str]
    body: bytes | None


def _is_safe_method(arguments: dict[str, Any]) -> bool:
    return arguments.get("method", "GET") in SAFE_METHODS


def _deduplicated(policy: HttpToolPolicy, arguments: dict[str, Any]) -> bool:
    """A request that changes something, to a host that honours its Idempotency-Key."""
    url = arguments.get("url")
    if _is_safe_method(arguments) or not isinstance(url, str):
        return False
    try:
        return policy.honours_key(httpx.URL(url))
    except httpx.InvalidURL:
        return False


def _parse_arguments(arguments: dict[str, Any]) -> _Call:
    if unknown := set(arguments) - set(INPUT_SCHEMA["properties"]):
        raise ToolFailure(f"unknown arguments: {', '.join(sorted(unknown))}")
    url, method = arguments.get("url"), arguments.get("method", "GET")
    headers, body = arguments.get("headers") or {}, arguments.get("body")
    if not isinstance(url, str) or not url:
        raise ToolFailure("url must be a non-empty string")
    if method not in METHODS:
        raise ToolFailure(f"method must be one of {', '.join(METHODS)}")
    if not isinstance(headers, dict) or not all(map(_valid_header, headers, headers.values())):
        raise ToolFailure("headers must map header names to single-line ASCII strings")
    if body is not None and not isinstance(body, str):
        raise ToolFailure("body must be a string")
    kept = {k: v for k, v in headers.items() if k.lower() not in TOOL_HEADERS}
    return _Call(method, url, kept, None if body is None else body.encode())


def _valid_header(name: object, value: object) -> bool:
    return (
        isinstance(name, str)
        and isinstance(value, str)
        and bool(_HEADER.fullmatch(f"{name}\n{value}"))
    )


async def _fetch(
    policy: HttpToolPolicy, tls: ssl.SSLContext, key: str, call: _Call, *, keyed: bool
) -> str:
    """`keyed`: the call may be re-sent because its first host deduplicates it."""
    for _ in range(policy.max_redirects + 1):
        url = _checked_url(call.url, policy)
        if keyed and call.method not in SAFE_METHODS and not policy.honours_key(url):
            raise ToolFailure(
                f"refusing to send a {call.method} on to {url.host}: that host is not known "
                "to honour Idempotency-Key, and this request may be sent again"
            )
        addresses = await _resolve(url.raw_host.decode("ascii"), policy)
        # A client per hop, so a pooled connection never carries one name's TLS to another.
        client = httpx.AsyncClient(verify=tls, trust_env=False, timeout=policy.timeout_s)
        with _translated_errors(url.host):
            async with client:
                requests = [_request(client, call, url, a, key) for a in addresses]
                response = await _send_first(client, requests)
                try:
                    if (redirected := _redirect(call, url, response)) is not None:
                        call = redirected
                        continue
                    if response.status_code == 429 or response.status_code >= 500:
                        status = f"{response.status_code} {response.reason_phrase}"
                        raise ToolFailure(f"{url.host} answered {status}", transient=True)
                    content, truncated = await _read_capped(response, policy.max_response_bytes)
                finally:
                    await response.aclose()
        shown = ("content-type", "content-length", "location")
        result = {
            "status": response.status_code,
            "headers": {k: response.headers[k] for k in shown if k in response.headers},
            "body": content.decode("utf-8", errors="replace"),
            "truncated": truncated,
        }
        return json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    raise ToolFailure(f"too many redirects (more than {policy.max_redirects})")


def _request(
    client: httpx.AsyncClient, call: _Call, url: httpx.URL, address: IPAddress, key: str
) -> httpx.Request:
    """`call` sent to the checked `address`, with the URL's own name in Host and TLS."""
    host = url.raw_host.decode("ascii")
    headers = {**call.headers, "Host": url.netloc.decode("ascii"), "Idempotency-Key": key}
    # httpx inflates a whole compressed chunk before the cap is checked: ask for none.
    headers["Accept-Encoding"] = "identity"
    tracing.inject(headers)  # when tracing: this tool call's span is the callee's parent
    # An IP-literal URL has no name to present; the certificate is then checked against the IP.
    extensions = {} if literal(host) is not None else {"sni_hostname": host}
    target = url.copy_with(host=str(address))
    return client.build_request(
        call.method, target, headers=headers, content=call.body, extensions=extensions
    )


def _redirect(call: _Call, url: httpx.URL, response: httpx.Response) -> _Call | None:
    """The call a redirect asks for (checked again from the start by the caller), or None."""
    location = response.headers.get("location")
    if response.status_code not in REDIRECT_STATUSES or location is None:
        return None
    target, status, method, body = url.join(location), response.status_code, call.method, call.body
    # As browsers (and httpx) do: 303, and 301/302 after a POST, become a GET without a body.
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body = "GET", None
    headers = call.headers
    if (target.scheme, target.host, target.port) != (url.scheme, url.host, url.port):
        # The caller's credentials were meant for the first origin only.
        headers = {k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS}
    return _Call(method, target, headers, body)


def _checked_url(target: str | httpx.URL, policy: HttpToolPolicy) -> httpx.URL:
    try:
        url = httpx.URL(target)
    except httpx.InvalidURL:
        raise ToolFailure("invalid URL") from None
    if url.scheme not in policy.allowed_schemes:
        raise ToolFailure(f"refusing the URL: only {', '.join(policy.allowed_schemes)} allowed")
    if url.userinfo:
        raise ToolFailure("refusing the URL: it carries credentials")
    if not url.raw_host or (url.port is not None and not 0 < url.port < 65536):
        raise ToolFailure("invalid URL: no host or a bad port")
    return url


async def _resolve(host: str, policy: HttpToolPolicy) -> list[IPAddress]:
    try:
        return await checked_addresses(host, policy)
    except Unresolvable as exc:
        raise ToolFailure(str(exc), transient=exc.transient) from exc
    except AddressRefused as exc:
        raise ToolFailure(str(exc)) from exc


async def _send_first(client: httpx.AsyncClient, requests: list[httpx.Request]) -> httpx.Response:
    """The first checked address that accepts a connection answers."""
    for request in requests[:-1]:
        with contextlib.suppress(httpx.ConnectError):
            return await client.send(request, stream=True)
    return await client.send(requests[-1], stream=True)


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    content = bytearray()
    async for chunk in response.aiter_bytes():
        content += chunk
        if len(content) > limit:
            return bytes(content[:limit]), True
    return bytes(content), False


@contextlib.contextmanager
def _translated_errors(host: str) -> Iterator[None]:
    """httpx errors as ToolFailures the model can act on: no URLs, no tracebacks."""
    try:
        yield
    except httpx.InvalidURL as exc:
        raise ToolFailure(f"{host} sent an invalid redirect URL") from exc
    except httpx.TimeoutException as exc:
        raise ToolFailure(f"timed out talking to {host}", transient=True) from exc
    except httpx.ConnectError as exc:
        if tls_error := _ssl_error(exc):  # a certificate that failed will fail again
            raise ToolFailure(f"TLS with {host} failed: {tls_error.reason}") from exc
        raise ToolFailure(f"could not connect to {host}: {exc}"[:200], transient=True) from exc
    except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        raise ToolFailure(f"the connection to {host} broke off", transient=True) from exc
    except httpx.HTTPError as exc:
        raise ToolFailure(f"request to {host} failed ({type(exc).__name__})") from exc


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    cause: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore wraps ssl; bounded in case of a cycle
        if cause is None or isinstance(cause, ssl.SSLError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None
