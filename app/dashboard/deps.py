"""The dashboard's request dependencies: the process's services, a short database session,
and who is looking (`Viewer`): anyone when the service has no API keys, otherwise the
holder of a valid session cookie; without one a page leads to the login form."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.sessions import SESSION_COOKIE
from app.services import Services

# Sent by the pages' scripts when they fetch a fragment: a request that needs a login
# then gets a 401 (the script goes to the login form) rather than the form itself.
FRAGMENT_HEADER = "X-Loopwright-Fragment"


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_db(services: ServicesDep) -> AsyncIterator[AsyncSession]:
    async with services.sessionmaker() as session:
        yield session


DbDep = Annotated[AsyncSession, Depends(get_db)]


@dataclass(frozen=True)
class Viewer:
    """Who is looking at a page: `principal` as the API names it (`key-<n>`, or `local`
    on a service without keys), and the CSRF token their page's actions send."""

    principal: str
    csrf: str = ""

    @property
    def logged_in(self) -> bool:
        """Logged in with a key: a session (a service without keys has no login, nor
        logout)."""
        return bool(self.csrf)


class LoginRequired(Exception):
    """The page needs a login; `next_path` is where to come back to."""

    def __init__(self, next_path: str, *, fragment: bool) -> None:
        super().__init__(next_path)
        self.next_path = next_path
        self.fragment = fragment


def login_url(next_path: str) -> str:
    return f"/ui/login?next={quote(next_path, safe='/')}"


def safe_next(next_path: str | None) -> str:
    """Where to go after logging in: a dashboard path, never another site."""
    if not next_path or not next_path.startswith("/ui") or next_path.startswith("/ui/login"):
        return "/ui/runs"
    return "/ui/runs" if "//" in next_path or "\\" in next_path else next_path


def get_viewer(request: Request, services: ServicesDep) -> Viewer:
    sessions = services.sessions
    if not sessions.required:
        return Viewer("local")
    session = sessions.read(request.cookies.get(SESSION_COOKIE))
    if session is None:
        url = request.url
        raise LoginRequired(
            url.path + (f"?{url.query}" if url.query else ""),
            fragment=FRAGMENT_HEADER in request.headers,
        )
    return Viewer(session.principal, session.csrf)


ViewerDep = Annotated[Viewer, Depends(get_viewer)]
