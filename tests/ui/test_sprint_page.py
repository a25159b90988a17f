"""A sprint's page in a browser: its burn-up drawn as SVG, the lifecycle advanced by its
button (the status changes without a reload), a task of its backlog completed by another
client reaching the backlog and the burn-up live, and a stale page's move refused with
the API's reason next to the button."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.test_tasks_agents_pages import make_task

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_sprint_advances_by_its_button_and_its_burn_up_follows_its_tasks(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    today = datetime.now(UTC).date()
    body = {
        "project": "apollo",
        "name": "Sprint 3",
        "goal": "Ship the notes",
        "start_date": str(today - timedelta(days=1)),
        "end_date": str(today + timedelta(days=5)),
    }
    created = await api.post("/v1/sprints", json=body)
    assert created.status_code == 201, created.text
    sprint = created.json()
    write = await make_task(api, title="Write the notes", project="apollo", assigned_to="ann")
    check = await make_task(api, title="Check the notes", project="apollo", assigned_to="bob")
    tasks = [
        {"task_id": write["id"], "story_points": 3},
        {"task_id": check["id"], "story_points": 5},
    ]
    added = await api.post(f"/v1/sprints/{sprint['id']}/tasks", json={"tasks": tasks})
    assert added.status_code == 200, added.text

    await page.goto(f"{server}/ui/sprints/{sprint['id']}")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
    heading = page.locator("h1 .status")
    await expect(heading).to_have_text("planning")
    chart = page.locator("svg.burn-up-chart")
    await expect(chart).to_be_visible()
    await expect(chart.locator("g.chart-day")).to_have_count(2)  # yesterday and today
    await expect(chart.locator("polyline.line-scope")).to_have_count(1)

    await page.get_by_role("button", name="Move to active").click()
    await expect(heading).to_have_text("active")
    await expect(page.locator('.lifecycle li[aria-current="step"]')).to_have_text("active")
    await expect(page.get_by_role("button", name="Move to in review")).to_be_visible()

    # Another client completes a task: the backlog and the burn-up follow.
    for target in ("in_progress", "in_review", "completed"):
        moved = await api.post(f"/v1/tasks/{write['id']}/transitions", json={"to": target})
        assert moved.status_code == 200, moved.text
    row = page.locator(f"#backlog-{write['id']}")
    await expect(row.locator(".status")).to_have_text("completed")
    await expect(page.locator(".completed")).to_have_text("3 points")
    await expect(chart.locator(f'g.chart-day[data-date="{today}"] title')).to_have_text(
        f"{today}: 3 of 8 points completed"
    )

    # Another client moves the sprint on: the page follows, and a move from a page that
    # had not caught up yet would have been refused by its version.
    moved = await api.post(f"/v1/sprints/{sprint['id']}/transitions", json={"to": "in_review"})
    assert moved.status_code == 200, moved.text
    await expect(heading).to_have_text("in review")
    await page.get_by_role("button", name="Move to retrospective").click()
    await expect(heading).to_have_text("retrospective")
    assert await page.evaluate("window.sameDocument") is True


async def test_a_refused_move_shows_the_apis_reason(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    body = {"project": "hermes", "start_date": "2027-01-04", "end_date": "2027-01-15"}
    first = await api.post("/v1/sprints", json={**body, "name": "Running"})
    second = await api.post("/v1/sprints", json={**body, "name": "Next"})
    assert first.status_code == second.status_code == 201
    await page.goto(f"{server}/ui/sprints/{second.json()['id']}")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await expect(page.locator("svg.burn-up-chart g.chart-day")).to_have_count(0)  # not begun
    started = await api.post(f"/v1/sprints/{first.json()['id']}/transitions", json={"to": "active"})
    assert started.status_code == 200, started.text
    await page.get_by_role("button", name="Move to active").click()
    await expect(page.locator(".sprint-next .problem")).to_contain_text(
        "project 'hermes' has an active sprint"
    )
    await expect(page.locator("h1 .status")).to_have_text("planning")
