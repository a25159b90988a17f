"""The dashboard in a real browser: Debian's Chromium (`make browser` installs it), driven
by Playwright, against a real server (`running_server`) on the test session's database,
with scripted agents.

The browser is launched once per test session; each test gets a fresh context and page
and saves a screenshot of it under `build/screenshots/` when it ends. Every coroutine of
these tests runs in one event loop (the session's): the browser's, the server's and the
test's. `make screenshots` sets `LOOPWRIGHT_README_SCREENSHOTS` so the tests that take
the README's pictures also write them to `docs/screenshots/`."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from app.core.config import Settings
from tests.support.database import empty_tables
from tests.support.server import make_settings, running_server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("LOOPWRIGHT_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = ROOT / "build" / "screenshots"
README_SHOTS = os.environ.get("LOOPWRIGHT_README_SCREENSHOTS")
VIEWPORT = {"width": 1280, "height": 800}
WAIT_MS = 15_000  # for a page to show what the server did: only reached when broken

expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.fail(f"no browser at {CHROMIUM}: `make browser` installs Debian's chromium")
    return CHROMIUM


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(chromium), headless=True)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser, request: pytest.FixtureRequest) -> AsyncIterator[Page]:
    """A fresh page at 1280 x 800 in a zone that is not UTC, so local times show; its
    screenshot is saved when the test ends, passed or failed (name the server before the
    page among a test's arguments: the page is then closed while the server still runs)."""
    context = await browser.new_context(
        viewport=VIEWPORT,  # type: ignore[arg-type]
        locale="en-GB",
        timezone_id="Europe/Berlin",
    )
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))

    def console(message: ConsoleMessage) -> None:
        # The pages keep to their own policy; their scripts warn when an update failed.
        if "Content Security Policy" in message.text or message.type == "warning":
            errors.append(message.text)

    opened.on("console", console)
    try:
        yield opened
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.name)
        await opened.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
        await context.close()
    assert not errors, f"the page's scripts failed: {errors}"


async def readme_shot(page: Page, name: str) -> None:
    """A picture for the README (`make screenshots`): the viewport, not the whole page."""
    await page.screenshot(path=SCREENSHOTS / f"readme-{name}.png")
    if README_SHOTS:
        target = ROOT / README_SHOTS
        target.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=target / f"{name}.png")


@pytest_asyncio.fixture(loop_scope="session")
async def emptied(database_url: str) -> None:
    """Empty tables, in the session's loop (the shared `clean_db` runs in the test's own)."""
    await empty_tables(database_url)


def ui_settings(database_url: str, **groups: dict[str, object]) -> Settings:
    """Test settings, with a short grace at shutdown (slow scripted runs are abandoned) and
    `http_request` allowed to reach this machine (the approval tests post to the server)."""
    return make_settings(
        database_url,
        workers={"grace_s": 0.5},
        tools={"http_allow_private": True},
        **groups,
    )


@pytest_asyncio.fixture(loop_scope="session")
async def server(database_url: str, emptied: None) -> AsyncIterator[str]:
    async with running_server(ui_settings(database_url)) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session")
async def api(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=10) as client:
        yield client


def scripted(name: str, *turns: dict[str, Any], tools: list[str] | None = None) -> dict[str, Any]:
    agent: dict[str, Any] = {
        "name": name,
        "model": {"provider": "scripted", "name": "s", "script": list(turns)},
    }
    if tools is not None:
        agent["tools"] = tools
    return agent


async def make_agent(api: httpx.AsyncClient, body: dict[str, Any]) -> str:
    response = await api.post("/v1/agents", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def start(api: httpx.AsyncClient, agent_id: str, text: str = "go") -> str:
    response = await api.post("/v1/runs", json={"agent_id": agent_id, "input": text})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def wait_for(api: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run once it settles or waits on a person."""
    response = await api.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()
    return run
