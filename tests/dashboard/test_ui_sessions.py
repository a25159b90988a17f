"""The dashboard's login and session cookie over HTTP: the login form's own CSRF token,
the cookie's attributes, the API accepting the cookie (unsafe methods only with the
session's CSRF token), logout, and the service without keys, where the dashboard is open."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import assert_problem
from tests.support.server import make_settings, running_server

KEYS = ["k-first-0123456789", "k-second-0123456789"]
SECRET = "a-session-secret-of-at-least-32-characters"


@pytest.fixture
async def keyed(database_url: str, clean_db: AsyncEngine) -> AsyncIterator[str]:
    settings = make_settings(database_url, auth={"api_keys": KEYS, "session_secret": SECRET})
    async with running_server(settings) as url:
        yield url


def _field(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, f"no {name} field"
    return found[1]


async def _log_in(http: httpx.AsyncClient, key: str = KEYS[0], **headers: str) -> httpx.Response:
    form = await http.get("/ui/login", params={"next": "/ui/approvals"})
    assert form.status_code == 200
    token = _field(form.text, "token")
    return await http.post(
        "/ui/login",
        data={"token": token, "next": _field(form.text, "next"), "key": key},
        headers=headers,
    )


async def test_a_page_without_a_session_leads_to_the_login_form(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        page = await http.get("/ui/runs", params={"status": "failed"})
        assert page.status_code == 303
        assert page.headers["location"] == "/ui/login?next=/ui/runs%3Fstatus%3Dfailed"
        # A page's script fetching a fragment is told to log in, not sent the form.
        fragment = await http.get("/ui/runs/r/summary", headers={"X-Loopwright-Fragment": "1"})
        assert fragment.status_code == 401
        form = await http.get("/ui/login")
        assert form.status_code == 200 and 'type="password"' in form.text
        login_cookie = form.headers["set-cookie"]
        assert "lw_login=" in login_cookie and "HttpOnly" in login_cookie
        assert "SameSite=strict" in login_cookie and "Path=/ui/login" in login_cookie


async def test_logging_in_sets_a_session_cookie_that_the_api_accepts(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        done = await _log_in(http, KEYS[1])
        assert done.status_code == 303 and done.headers["location"] == "/ui/approvals"
        cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("lw_session="))
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/", "Max-Age=43200"):
            assert attribute in cookie, attribute
        assert "Secure" not in cookie  # plain http
        assert KEYS[1] not in cookie

        page = await http.get("/ui/approvals")
        assert page.status_code == 200
        token = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert token and "key-1" in page.text
        assert (await http.get("/v1/runs")).status_code == 200  # reads need no token
        async with http.stream("GET", "/v1/approvals/events") as stream:
            assert stream.status_code == 200  # the streams too (EventSource sends no header)

        agent = {
            "name": "a",
            "model": {"provider": "scripted", "name": "s", "script": [{"text": "hi"}]},
        }
        missing = await http.post("/v1/agents", json=agent)
        assert_problem(missing, 403, "csrf_failed")
        forged = await http.post("/v1/agents", json=agent, headers={"X-CSRF-Token": "forged"})
        assert_problem(forged, 403, "csrf_failed")
        made = await http.post("/v1/agents", json=agent, headers={"X-CSRF-Token": token[1]})
        assert made.status_code == 201, made.text
        # A bearer key needs no CSRF token: it is not sent by the browser on its own.
        other = agent | {"name": "b"}
        keyed_call = await http.post(
            "/v1/agents", json=other, headers={"Authorization": f"Bearer {KEYS[0]}"}
        )
        assert keyed_call.status_code == 201, keyed_call.text
        # The docs read the session too.
        assert (await http.get("/openapi.json")).status_code == 200


async def test_a_session_cookie_is_secure_over_https(keyed: str) -> None:
    # uvicorn takes the scheme from a proxy on loopback (`forwarded_allow_ips`).
    async with httpx.AsyncClient(base_url=keyed) as http:
        done = await _log_in(http, **{"X-Forwarded-Proto": "https"})
        cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("lw_session="))
        assert "Secure" in cookie


async def test_a_login_is_refused_without_its_form_token_or_with_a_wrong_key(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        no_token = await http.post("/ui/login", data={"key": KEYS[0]})
        assert no_token.status_code == 403 and "did not come from this site" in no_token.text
        forged = await http.post("/ui/login", data={"key": KEYS[0], "token": "guessed"})
        assert forged.status_code == 403
        # Each form sent sets its own token: the refusal's form is the one to use now.
        wrong = await http.post(
            "/ui/login", data={"key": "nope", "token": _field(forged.text, "token")}
        )
        assert wrong.status_code == 401 and "not one of this service" in wrong.text
        assert "lw_session" not in http.cookies


async def test_a_wrong_or_ended_session_is_refused(keyed: str, database_url: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        await _log_in(http)
        cookie = http.cookies["lw_session"]
    async with httpx.AsyncClient(base_url=keyed, cookies={"lw_session": cookie + "x"}) as http:
        refused = await http.get("/v1/runs")
        assert_problem(refused, 401, "unauthorized")
        assert "log in again" in refused.json()["detail"]
        assert (await http.get("/ui/runs")).status_code == 303
    # The same cookie, once its key has left the list, is no session.
    rotated = make_settings(
        database_url, auth={"api_keys": ["k-new-0123456789", KEYS[1]], "session_secret": SECRET}
    )
    async with (
        running_server(rotated) as url,
        httpx.AsyncClient(base_url=url, cookies={"lw_session": cookie}) as http,
    ):
        assert_problem(await http.get("/v1/runs"), 401, "unauthorized")


async def test_logout_ends_the_session_and_needs_its_token(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        await _log_in(http)
        page = await http.get("/ui/runs")
        csrf = _field(page.text, "csrf")
        refused = await http.post("/ui/logout", data={"csrf": "forged"})
        assert refused.status_code == 403
        assert (await http.get("/ui/runs")).status_code == 200
        done = await http.post("/ui/logout", data={"csrf": csrf})
        assert done.status_code == 303 and done.headers["location"] == "/ui/login"
        assert "lw_session" not in http.cookies
        assert (await http.get("/ui/runs")).status_code == 303
        # Logging out without a session just leads to the form.
        assert (await http.post("/ui/logout")).status_code == 303


async def test_a_logged_in_browser_goes_past_the_form(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        await _log_in(http)
        again = await http.get("/ui/login", params={"next": "/ui/runs?lane=x"})
        assert again.status_code == 303 and again.headers["location"] == "/ui/runs?lane=x"


@pytest.mark.parametrize(
    ("next_path", "goes_to"),
    [
        ("/ui/approvals", "/ui/approvals"),
        ("https://evil.example/ui", "/ui/runs"),
        ("//evil.example/ui", "/ui/runs"),
        ("/ui//evil.example", "/ui/runs"),
        ("/ui\\evil", "/ui/runs"),
        ("/v1/runs", "/ui/runs"),
        ("/ui/login", "/ui/runs"),
        ("", "/ui/runs"),
    ],
)
async def test_after_login_only_a_dashboard_page_is_a_destination(
    keyed: str, next_path: str, goes_to: str
) -> None:
    async with httpx.AsyncClient(base_url=keyed) as http:
        form = await http.get("/ui/login")
        done = await http.post(
            "/ui/login",
            data={"token": _field(form.text, "token"), "next": next_path, "key": KEYS[0]},
        )
        assert done.headers["location"] == goes_to


async def test_without_keys_the_dashboard_is_open(client: httpx.AsyncClient) -> None:
    home = await client.get("/")
    assert (home.status_code, home.headers["location"]) == (307, "/ui")
    to_overview = await client.get("/ui")
    assert (to_overview.status_code, to_overview.headers["location"]) == (303, "/ui/overview")
    board = await client.get("/ui/runs")
    assert board.status_code == 200 and "Log out" not in board.text
    assert (await client.get("/ui/login")).headers["location"] == "/ui/runs"
    posted = await client.post("/ui/login", data={"key": "anything"})
    assert (posted.status_code, posted.headers["location"]) == (303, "/ui/runs")
    assert (await client.post("/v1/runs/r/cancel")).status_code == 404  # no token needed
