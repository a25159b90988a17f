"""What stands in for a key when the service has none: it listens on loopback only, so
the callers to keep out are web pages in its user's browser.

- **Host**: a request must be addressed to a loopback name or an allowed host. A page on
  a DNS-rebinding domain reaches 127.0.0.1 under its own name, and is refused.
- **Origin**: a request that changes anything is refused when a browser says it comes
  from another origin's page (cross-site request forgery: no preflight guards a form post
  or a body-less `fetch`). Clients that are not browsers send no `Origin`.

Webhook deliveries (`/v1/hooks/…`) are exempt: their signature authenticates them, and
they often arrive through a tunnel under its public name. With API keys the guard is off:
a bearer key cannot be sent by another site's page, and the dashboard's session has its
CSRF token."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import is_loopback
from app.core.errors import AppError, CrossOriginRefused, HostRefused
from app.core.sessions import UNSAFE_METHODS
from app.http.problems import problem_response

SIGNED_PATHS = "/v1/hooks/"


def _hostname(authority: str) -> str:
    """`host[:port]` → host, brackets off an IPv6 literal, lower case."""
    return (urlsplit(f"//{authority}").hostname or "").lower()


class LocalGuard:
    def __init__(self, app: ASGIApp, *, allowed_hosts: list[str]) -> None:
        self.app = app
        self.allowed_hosts = {host.lower() for host in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(SIGNED_PATHS):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope["method"], Headers(scope=scope))
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await problem_response(refusal, scope["path"])(scope, receive, send)

    def refusal(self, method: str, headers: Headers) -> AppError | None:
        authority = headers.get("host", "")
        host = _hostname(authority)
        if not (is_loopback(host) or host in self.allowed_hosts):
            return HostRefused(f"Host {authority!r} is not a loopback name or an allowed host")
        origin = headers.get("origin")
        if method not in UNSAFE_METHODS or origin is None:
            return None
        if urlsplit(origin).netloc.lower() != authority.lower():
            return CrossOriginRefused(f"a page of {origin!r} may not change anything here")
        return None
