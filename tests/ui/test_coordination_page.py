"""A coordination's page in a browser: it follows the coordination as its subtask waits on a
person's review and then, approved, the coordination settles; all without a reload."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.approvals.test_approvals_api import requested
from tests.coordination.test_coordination_api import subtask
from tests.ui.conftest import make_agent, scripted

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_coordination_page_follows_it_until_it_settles(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await make_agent(api, scripted("ann", {"text": "Reproduced."}))
    parent = await api.post("/v1/tasks", json={"title": "Fix the bug"})
    assert parent.status_code == 201, parent.text
    made = await api.post(
        f"/v1/tasks/{parent.json()['id']}/coordinate",
        json={"decomposition": {"subtasks": [subtask("Reproduce")]}},
    )
    assert made.status_code == 202, made.text
    coordination = made.json()

    await page.goto(f"{server}/ui/coordinations/{coordination['id']}")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.notReloaded = true")
    row = page.locator("#subtask-0")
    child = f"task_{coordination['id'].removeprefix('coord_')}_0"
    review = await requested(api, child)
    await expect(row.locator("td[data-label=Status]")).to_have_text("in review")
    await expect(row.locator("td[data-label=Agent]")).to_have_text("ann")
    await expect(page.locator("h1 .status")).to_have_text("running")

    approved = await api.post(f"/v1/approvals/{review['id']}/approve", json={})
    assert approved.status_code == 200, approved.text
    await expect(page.locator("h1 .status")).to_have_text("completed")
    await expect(row.locator("td[data-label=Status]")).to_have_text("completed")
    await expect(page.locator('li[data-phase="update_parent"]')).to_contain_text("ok")
    await expect(page.locator(".phases li")).to_have_count(7)
    assert await page.evaluate("window.notReloaded") is True
