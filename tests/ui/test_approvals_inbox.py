"""The approvals inbox in a browser: a gated call shows up as its run asks, and approving
it there lets the run go on."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.conftest import make_agent, scripted, start, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_an_approval_answered_in_the_inbox_lets_its_run_go_on(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/approvals")
    await expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
    post = {"method": "POST", "url": f"{server}/healthz", "body": "{}"}
    agent_id = await make_agent(
        api,
        scripted(
            "poster",
            {"tool_calls": [{"name": "http_request", "input": post}]},
            {"text": "Posted."},
            tools=["http_request"],
        ),
    )
    run_id = await start(api, agent_id)

    item = page.locator("article.approval")
    await expect(item).to_have_count(1)
    await expect(item.locator(".summary-text")).to_contain_text("POST")
    await expect(item.get_by_role("link", name=run_id)).to_be_visible()
    await item.get_by_label("Comment (optional)").fill("Fine by me.")
    await item.get_by_role("button", name="Approve").click()
    await expect(item).to_have_count(0)
    await expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()

    run = await wait_for(api, run_id)
    assert (run["status"], run["result"]) == ("completed", "Posted.")
    (approval,) = (await api.get("/v1/approvals", params={"run_id": run_id})).json()["items"]
    assert (approval["status"], approval["comment"]) == ("approved", "Fine by me.")


async def test_a_refused_decision_is_shown_with_the_problem(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """The API's refusal (a reason of blanks is none) is shown in the item, which stays."""
    post = {"method": "POST", "url": f"{server}/healthz", "body": "{}"}
    agent_id = await make_agent(
        api,
        scripted(
            "poster",
            {"tool_calls": [{"name": "http_request", "input": post}]},
            {"text": "ok"},
            tools=["http_request"],
        ),
    )
    run_id = await start(api, agent_id)
    approval_id = (await wait_for(api, run_id))["waiting_for"]["approval_id"]
    await page.goto(f"{server}/ui/approvals")
    item = page.locator(f"#approval-{approval_id}")
    await item.get_by_label("Reason").fill("   ")
    await item.get_by_role("button", name="Reject").click()
    await expect(item.locator(".problem")).to_contain_text("reason")
    await expect(item.get_by_role("button", name="Reject")).to_be_enabled()
    assert (await api.get(f"/v1/approvals/{approval_id}")).json()["status"] == "pending"
