"""With API keys: the dashboard asks for a login, its actions carry the session's CSRF
token (a request without it, or with a forged one, is refused), and logout ends the
session. The rules themselves are tested over HTTP in tests/dashboard/test_ui_sessions.py."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, Request, expect

from tests.support.server import running_server
from tests.ui.conftest import ui_settings

pytestmark = pytest.mark.asyncio(loop_scope="session")

KEYS = ["k-first-0123456789", "k-second-0123456789"]

POSTS = """async () => {
  const post = (headers) => fetch("/v1/runs/run_none/cancel", {method: "POST", headers})
    .then(async (r) => [r.status, (await r.json()).code]);
  const token = document.querySelector('meta[name="csrf-token"]').content;
  return [await post({}), await post({"X-CSRF-Token": "forged"}),
          await post({"X-CSRF-Token": token})];
}"""
GET_RUNS = "() => fetch('/v1/runs').then((r) => r.status)"


async def test_with_keys_the_dashboard_needs_a_login_and_its_session_a_csrf_token(
    page: Page, database_url: str, emptied: None
) -> None:
    urls: list[str] = []

    def seen(request: Request) -> None:
        urls.append(request.url)

    page.on("request", seen)
    settings = ui_settings(database_url, auth={"api_keys": KEYS})
    async with running_server(settings) as url:
        await page.goto(f"{url}/ui/runs?status=completed")
        await expect(page).to_have_url(re.compile(r"/ui/login\?next="))
        assert await page.evaluate(GET_RUNS) == 401

        await page.get_by_label("API key").fill("not-a-key")
        await page.get_by_role("button", name="Log in").click()
        await expect(page.locator(".problem")).to_have_text(
            "That is not one of this service's API keys."
        )
        await page.get_by_label("API key").fill(KEYS[1])
        await page.get_by_role("button", name="Log in").click()
        await expect(page).to_have_url(f"{url}/ui/runs?status=completed")
        await expect(page.locator(".logout .who")).to_have_text("key-1")
        await expect(page.locator(".stream-state")).to_have_text("Live.")  # the SSE, by cookie
        (cookie,) = [c for c in await page.context.cookies() if c["name"] == "lw_session"]
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/")

        assert await page.evaluate(POSTS) == [
            [403, "csrf_failed"],
            [403, "csrf_failed"],
            [404, "not_found"],  # past the checks: there is no such run
        ]

        await page.get_by_role("button", name="Log out").click()
        await expect(page).to_have_url(f"{url}/ui/login")
        assert await page.evaluate(GET_RUNS) == 401
        await page.goto(f"{url}/ui/approvals")
        await expect(page).to_have_url(re.compile(r"/ui/login\?next=/ui/approvals$"))
    assert urls and not [u for u in urls if any(key in u for key in KEYS)]
