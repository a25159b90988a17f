"""The lanes and the overview in a browser: a lane's holder and queue, in order, move on
as its runs finish, and the overview's counts and failures follow the runs, without a
reload."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect

from app.core.states import RunStatus
from tests.ui.conftest import make_agent, scripted, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

LANE = "team/alpha"


async def _start(api: httpx.AsyncClient, agent_id: str, lane: str) -> str:
    response = await api.post("/v1/runs", json={"agent_id": agent_id, "input": "go", "lane": lane})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _answer(api: httpx.AsyncClient, run_id: str) -> None:
    answered = await api.post(f"/v1/runs/{run_id}/human-response", json={"response": "yes"})
    assert answered.status_code == 200, answered.text


async def _expect_lane(page: Page, holder: str, queued: list[str]) -> None:
    card = page.locator("article.lane")
    await expect(card.locator("tr.holder")).to_have_attribute("data-run", holder)
    rows = card.locator("tr.queued")
    await expect(rows).to_have_count(len(queued))
    for place, run_id in enumerate(queued):
        await expect(rows.nth(place)).to_have_attribute("data-run", run_id)
    await expect(card.locator(".counts .queued")).to_have_text(f"{len(queued)} queued")


async def test_a_lane_moves_on_as_its_runs_finish(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """Each run asks a person, so it holds the lane until answered: the list, then the
    lane's own page, show the next run taking the lane and the queue shortening."""
    asker = await make_agent(
        api,
        scripted(
            "asker",
            {"tool_calls": [{"name": "ask_human", "input": {"question": "Ship it?"}}]},
            {"text": "Shipped."},
            tools=["ask_human"],
        ),
    )
    runs = [await _start(api, asker, LANE) for _ in range(3)]
    assert (await wait_for(api, runs[0]))["status"] == "waiting_on_human"

    await page.goto(f"{server}/ui/lanes")
    await page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
    await expect(page.locator("article.lane h2")).to_have_text(LANE)
    await _expect_lane(page, runs[0], runs[1:])
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await _answer(api, runs[0])
    await _expect_lane(page, runs[1], runs[2:])
    assert await page.evaluate("window.sameDocument") is True

    await page.locator("article.lane h2 a").click()
    await expect(page).to_have_url(f"{server}/ui/lanes/team/alpha")
    await page.evaluate("window.sameDocument = true")
    await _expect_lane(page, runs[1], runs[2:])
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    assert (await wait_for(api, runs[1]))["status"] == "waiting_on_human"
    await _answer(api, runs[1])
    await _expect_lane(page, runs[2], [])
    assert (await wait_for(api, runs[2]))["status"] == "waiting_on_human"
    await _answer(api, runs[2])
    await expect(page.get_by_text("No run holds or waits on this lane now.")).to_be_visible()
    await expect(page.locator("article.lane")).to_have_count(0)
    assert await page.evaluate("window.sameDocument") is True


async def test_the_overview_follows_runs_as_they_complete_and_fail(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    # Slow enough to be seen running: the overview fetches its figures every 1.5 s at most.
    writer = await make_agent(api, scripted("writer", {"text": "Done.", "latency_ms": 4_000}))
    broken = await make_agent(
        api, {"name": "claude", "model": {"provider": "anthropic", "name": "claude-x"}}
    )
    await page.goto(f"{server}/ui")
    await expect(page).to_have_url(f"{server}/ui/overview")
    await page.evaluate("window.sameDocument = true")
    counts = page.locator("tr[data-status] .count")
    await expect(page.locator("tr[data-status=completed] .count")).to_have_text("0")
    await expect(page.get_by_text("No run has failed.")).to_be_visible()
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await expect(counts).to_have_count(len(RunStatus))

    done = await _start(api, writer, "writing")
    await expect(page.locator("tr[data-status=running] .count")).to_have_text("1")
    await expect(page.locator("dd[data-figure=workers]")).to_have_text("1")
    await wait_for(api, done)
    await expect(page.locator("tr[data-status=completed] .count")).to_have_text("1")
    await expect(page.locator("tr[data-status=running] .count")).to_have_text("0")

    failed = await _start(api, broken, "claude")
    await wait_for(api, failed)
    await expect(page.locator("tr[data-status=failed] .count")).to_have_text("1")
    row = page.locator(f"table.failures tr[data-run={failed}]")
    await expect(row.locator("td[data-label='Stop reason']")).not_to_be_empty()
    assert await page.evaluate("window.sameDocument") is True
    await row.locator("a").click()
    await expect(page).to_have_url(f"{server}/ui/runs/{failed}")


async def test_the_lanes_and_the_overview_read_on_a_phone(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """At 390 px nothing runs off the side, however long a lane's name."""
    asker = await make_agent(
        api,
        scripted(
            "asker",
            {"tool_calls": [{"name": "ask_human", "input": {"question": "Now?"}}]},
            tools=["ask_human"],
        ),
    )
    lane = "nightly/" + "x" * 200
    held = await _start(api, asker, lane)
    await wait_for(api, held)
    await _start(api, asker, lane)
    await page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/ui/lanes", f"/ui/lanes/{lane}", "/ui/overview"):
        await page.goto(f"{server}{path}")
        await expect(page.locator("main h1")).to_be_visible()
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide"
