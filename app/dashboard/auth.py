"""Logging in to the dashboard with an API key, and out.

The login form posts the key (never in a URL); a valid one gets a session cookie
(`app/core/sessions.py`): HttpOnly, SameSite=Strict, Path=/, Secure over https, for
`auth.session_ttl_s`. The form itself is protected against login CSRF by a token of its
own: a nonce in a hidden field and, signed, in a SameSite=Strict cookie set with the form;
a post whose two do not match is refused. Logout is a POST with the session's CSRF token.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.core.sessions import LOGIN_COOKIE, SESSION_COOKIE
from app.dashboard.deps import ServicesDep, Viewer, safe_next
from app.dashboard.page import Page
from app.dashboard.templating import render
from app.services import Services

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router)  # the login form: no link in the bar
LOGIN_PATH = "/ui/login"
_LOGIN_FORM_S = 3_600  # a login form left open longer than this is refused: reload it


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _login_page(
    request: Request, services: Services, next_path: str, *, error: str = "", status: int = 200
) -> HTMLResponse:
    token, cookie = services.sessions.login_token()
    response = render(
        request,
        "login.html",
        Viewer("anonymous"),
        {"token": token, "next": next_path, "error": error},
        status_code=status,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        cookie,
        max_age=_LOGIN_FORM_S,
        path=LOGIN_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return response


@router.get("/login", response_model=None)
async def login_form(request: Request, services: ServicesDep, next: str | None = None) -> Response:
    sessions = services.sessions
    if not sessions.required or sessions.read(request.cookies.get(SESSION_COOKIE)):
        return RedirectResponse(safe_next(next), status_code=303)
    return _login_page(request, services, safe_next(next))


@router.post("/login", response_model=None)
async def login(request: Request, services: ServicesDep) -> Response:
    sessions = services.sessions
    form = await _form(request)
    next_path = safe_next(form.get("next"))
    if not sessions.required:
        return RedirectResponse(next_path, status_code=303)
    if not sessions.login_token_matches(form.get("token"), request.cookies.get(LOGIN_COOKIE)):
        error = "This form has expired or did not come from this site: try again."
        return _login_page(request, services, next_path, error=error, status=403)
    index = sessions.key_index(form.get("key", ""))
    if index is None:
        error = "That is not one of this service's API keys."
        return _login_page(request, services, next_path, error=error, status=401)
    cookie, _ = sessions.issue(index)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=sessions.ttl_s,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    response.delete_cookie(LOGIN_COOKIE, path=LOGIN_PATH)
    return response


@router.post("/logout", response_model=None)
async def logout(request: Request, services: ServicesDep) -> Response:
    """Ends this browser's session. The form sends the session's CSRF token: another site
    cannot log a person out."""
    session = services.sessions.read(request.cookies.get(SESSION_COOKIE))
    form = await _form(request)
    if session is not None and not session.csrf_matches(form.get("csrf")):
        return Response("The logout form did not come from this site.", status_code=403)
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
