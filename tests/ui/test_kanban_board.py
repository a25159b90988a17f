"""A project's Kanban board in a browser: a WIP limit set through a column's form, a card
moved by its button, a move into the full column refused with the API's reason on the
card, another client's task arriving live, the limit removed to let it in, and a limit another
client sets shown live."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.test_tasks_agents_pages import make_task

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_card_moves_until_its_column_is_full_and_the_refusal_shows_on_it(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    first = await make_task(api, title="Write the notes", project="apollo", assigned_to="ann")
    second = await make_task(api, title="Check the notes", project="apollo", assigned_to="bob")
    await page.goto(f"{server}/ui/projects/apollo/board")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
    ready = page.locator("[data-piece=ready]")
    working = page.locator("[data-piece=in_progress]")
    await expect(ready.locator(".count")).to_have_text("2")

    await working.get_by_text("Set a WIP limit").click()
    await working.get_by_label("Limit", exact=True).fill("1")
    await working.get_by_role("button", name="Set").click()
    await expect(working.locator("h2 .count")).to_have_text("0 / 1")
    await expect(working.locator(".wip")).to_have_text("Strict WIP limit 1")

    await ready.locator(f"#task-{first['id']} button[data-column=in_progress]").click()
    await expect(working.locator(f"#task-{first['id']}")).to_contain_text("Write the notes")
    await expect(working.locator("h2 .count")).to_have_text("1 / 1")
    await expect(working).to_have_class("task-column kanban-column is-full")
    await expect(ready.locator(".count")).to_have_text("1")

    card = ready.locator(f"#task-{second['id']}")
    await card.locator("button[data-column=in_progress]").click()
    await expect(card.locator(".problem")).to_have_text(
        "column 'in_progress' of project 'apollo' holds 1 tasks, its WIP limit is 1"
    )
    # Another client's task reaches the board live, and the refusal stays on its card.
    third = await make_task(api, title="Plan the next one", project="apollo")
    await expect(page.locator(f"[data-piece=backlog] #task-{third['id']}")).to_be_visible()
    await expect(card.locator(".problem")).to_be_visible()

    await working.get_by_text("Change the limit").click()
    await working.get_by_role("button", name="Remove").click()
    await expect(working.locator("h2 .count")).to_have_text("1")
    await ready.locator(f"#task-{second['id']} button[data-column=in_progress]").click()
    await expect(working.locator(f"#task-{second['id']}")).to_be_visible()
    await expect(working.locator("h2 .count")).to_have_text("2")
    # A limit another client sets shows live too.
    done_limit = {"limit": 4, "mode": "advisory"}
    set_elsewhere = await api.put("/v1/projects/apollo/wip-limits/done", json=done_limit)
    assert set_elsewhere.status_code == 200, set_elsewhere.text
    await expect(page.locator("[data-piece=done] .wip")).to_have_text("Advisory WIP limit 4")
    assert await page.evaluate("window.sameDocument") is True
