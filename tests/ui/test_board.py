"""The runs board in a browser: runs appear and change status as they happen, without a
reload."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.conftest import make_agent, readme_shot, scripted, start, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_run_started_over_the_api_appears_and_completes_without_a_reload(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/runs")
    await expect(page.get_by_text("No runs yet.")).to_be_visible()
    await page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
    agent_id = await make_agent(api, scripted("writer", {"text": "All done.", "latency_ms": 1_500}))

    run_id = await start(api, agent_id)
    row = page.locator(f"#run-{run_id}")
    await expect(row.locator("td[data-label=Status]")).to_have_text("running")
    await expect(row.locator("td[data-label=Agent]")).to_have_text("writer")
    await expect(row.locator("td[data-label=Status]")).to_have_text("completed")
    await expect(row.locator("td[data-label='Stop reason']")).to_have_text("end_turn")
    await expect(row.locator("td[data-label=Cost]")).to_have_text("—")
    await expect(page.get_by_text("No runs yet.")).to_be_hidden()
    assert await page.evaluate("window.sameDocument") is True
    # Times are in the reader's zone (the context's is Berlin), the ISO instant kept.
    created = row.locator("td[data-label=Created] time")
    assert (await created.get_attribute("datetime") or "").endswith("+00:00")
    assert "UTC" not in await created.inner_text()


@pytest.mark.screenshots
async def test_the_board_keeps_to_its_filters_as_runs_change(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """A board filtered on `waiting_on_human` takes a run in when it starts waiting, and
    lets it go once it is answered; the README's picture of the board is taken here."""
    asker = await make_agent(
        api,
        scripted(
            "asker",
            {"tool_calls": [{"name": "ask_human", "input": {"question": "Which colour?"}}]},
            {"text": "Blue it is."},
            tools=["ask_human"],
        ),
    )
    quick = await make_agent(api, scripted("summariser", {"text": "Summary: three items."}))
    slow = await make_agent(api, scripted("researcher", {"text": "late", "latency_ms": 60_000}))
    broken = await make_agent(
        api, {"name": "claude", "model": {"provider": "anthropic", "name": "claude-x"}}
    )
    for agent_id in (quick, broken):
        await wait_for(api, await start(api, agent_id))

    await page.goto(f"{server}/ui/runs?status=waiting_on_human")
    await expect(page.get_by_text("No runs match these filters yet.")).to_be_visible()
    waiting = await start(api, asker)
    row = page.locator(f"#run-{waiting}")
    await expect(row.locator("td[data-label=Status]")).to_have_text("waiting on human")
    answered = await api.post(f"/v1/runs/{waiting}/human-response", json={"response": "blue"})
    assert answered.status_code == 200, answered.text
    await expect(row).to_have_count(0)

    running = await start(api, slow)
    await start(api, asker)
    await page.goto(f"{server}/ui/runs")
    await expect(page.locator(f"#run-{running} td[data-label=Status]")).to_have_text("running")
    await expect(page.locator("tbody#runs tr")).to_have_count(5)
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await readme_shot(page, "runs-board")


async def test_the_board_and_a_run_read_on_a_phone(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """At 390 px the tables become cards of labelled fields; nothing runs off the side."""
    agent_id = await make_agent(api, scripted("writer", {"text": "A short answer."}))
    run_id = await start(api, agent_id)
    await wait_for(api, run_id)
    await page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/ui/runs", f"/ui/runs/{run_id}", f"/ui/runs/{run_id}/history"):
        await page.goto(f"{server}{path}")
        await expect(page.locator("main h1")).to_be_visible()
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide"
    await page.goto(f"{server}/ui/runs")
    status = page.locator(f"#run-{run_id} td[data-label=Status]")
    assert await status.evaluate("td => getComputedStyle(td).display") == "flex"
