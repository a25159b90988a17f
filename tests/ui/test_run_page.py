"""A run's page in a browser: the model's text arriving live, the transcript, what the run
waits for, and the actions (cancel, answer, reject a gated call, fork)."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.conftest import make_agent, readme_shot, scripted, start, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

STORY = (
    "Reading the three incident reports. The first two share a cause: the cache warmed "
    "before the config reload finished. The third is unrelated: a disk filled up."
)


async def test_text_streams_into_the_page_while_the_model_writes(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """Text previews reach only the pages connected while they are written, so the run
    first waits for a question, answered once the page follows its stream."""
    agent_id = await make_agent(
        api,
        scripted(
            "writer",
            {"tool_calls": [{"name": "ask_human", "input": {"question": "Ready?"}}]},
            {"text": STORY, "stream_interval_ms": 150},
            tools=["ask_human"],
        ),
    )
    run_id = await start(api, agent_id)
    await page.goto(f"{server}/ui/runs/{run_id}")
    await expect(page.locator(".waiting")).to_contain_text("Ready?")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    answered = await api.post(f"/v1/runs/{run_id}/human-response", json={"response": "yes"})
    assert answered.status_code == 200, answered.text

    bubble = page.locator("#live-text")
    written = page.locator("#transcript .msg-assistant .text")
    # Part of the text is on the page while the rest is still being written.
    await expect(bubble.locator(".text")).to_contain_text(STORY[:48])
    assert await written.count() == 0
    assert len(await bubble.locator(".text").inner_text()) < len(STORY)
    # Once the message is recorded it replaces the preview.
    await expect(written).to_have_text(STORY)
    await expect(bubble).to_be_hidden()
    await expect(page.locator("#summary .status")).to_have_text("completed")
    timeline = page.locator("#timeline")
    await expect(timeline).to_contain_text("agent_run.completed")
    await expect(timeline).to_contain_text("message.created")


async def test_cancel_from_the_run_page(server: str, api: httpx.AsyncClient, page: Page) -> None:
    agent_id = await make_agent(api, scripted("slow", {"text": "late", "latency_ms": 60_000}))
    run_id = await start(api, agent_id)
    await page.goto(f"{server}/ui/runs/{run_id}")
    await expect(page.locator("#summary .status")).to_have_text("running")

    await page.get_by_role("button", name="Cancel run").click()
    await expect(page.locator("#summary .status")).to_have_text("cancelled")
    await expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    await expect(page.get_by_role("button", name="Retry")).to_have_count(0)  # terminal
    assert (await wait_for(api, run_id))["status"] == "cancelled"


@pytest.mark.screenshots
async def test_a_question_is_answered_from_the_run_page_and_the_run_forked(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    agent_id = await make_agent(
        api,
        scripted(
            "planner",
            {"tool_calls": [{"name": "echo", "input": {"note": "three incidents, two alike"}}]},
            {"tool_calls": [{"name": "ask_human", "input": {"question": "Page the owner now?"}}]},
            {"text": "Paging the database team, as agreed."},
            tools=["echo", "ask_human"],
        ),
    )
    run_id = await start(api, agent_id, "Triage the open incidents.")
    await page.goto(f"{server}/ui/runs/{run_id}")
    waiting = page.locator(".waiting")
    await expect(waiting).to_contain_text("Page the owner now?")
    # The transcript: the input, the call with its arguments, its result, the question.
    call = page.locator("#transcript details.call").first
    await expect(call.locator(".tool")).to_have_text("echo")
    await call.locator("summary").click()
    await expect(call.locator("pre.args")).to_contain_text('"note": "three incidents, two alike"')
    await expect(page.locator("#transcript details.tool-result").first).to_contain_text("echo")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await readme_shot(page, "run-page")

    await page.get_by_label("Your answer").fill("Yes, page the database team.")
    await page.get_by_role("button", name="Send answer").click()
    await expect(page.locator("#summary .status")).to_have_text("completed")
    await expect(page.locator("#transcript")).to_contain_text("Paging the database team")
    await expect(page.locator("#transcript")).to_contain_text("Yes, page the database team.")
    await expect(page.locator(".waiting")).to_have_count(0)

    await page.locator("#fork summary").click()
    await page.get_by_label("Step", exact=True).fill("1")
    await page.get_by_label("New input (optional)").fill("Only the third one.")
    await page.get_by_role("button", name="Fork").click()
    await expect(page).not_to_have_url(re.compile(re.escape(run_id)))
    await expect(page.locator("#summary h1")).to_contain_text("run_")
    fork_id = page.url.rsplit("/", 1)[1]
    assert (await api.get(f"/v1/runs/{fork_id}")).json()["metadata"] is not None


async def test_a_gated_call_is_rejected_from_the_run_page(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    post = {"method": "POST", "url": f"{server}/healthz", "body": "{}"}
    agent_id = await make_agent(
        api,
        scripted(
            "poster",
            {"tool_calls": [{"name": "http_request", "input": post}]},
            {"text": "ok, not sent"},
            tools=["http_request"],
        ),
    )
    run_id = await start(api, agent_id)
    await page.goto(f"{server}/ui/runs/{run_id}")
    await expect(page.locator(".waiting h2")).to_have_text("Waits for an approval")
    await expect(page.locator(".waiting .summary-text")).to_contain_text("http_request")

    await page.get_by_label("Reason").fill("Not on a Friday.")
    await page.get_by_role("button", name="Reject").click()
    await expect(page.locator("#summary .status")).to_have_text("completed")
    await expect(page.locator("#transcript")).to_contain_text("ok, not sent")
    approvals = (await api.get("/v1/approvals", params={"run_id": run_id})).json()["items"]
    assert [(a["status"], a["reason"]) for a in approvals] == [("rejected", "Not on a Friday.")]


async def test_a_queued_run_s_page_fills_in_as_it_runs(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """A page opened before the run has a message: its transcript is filled from the
    stream once the run gets its lane."""
    slow = await make_agent(api, scripted("slow", {"text": "late", "latency_ms": 60_000}))
    quick = await make_agent(api, scripted("quick", {"text": "My turn at last."}))
    ahead, behind = [
        (await api.post("/v1/runs", json={"agent_id": a, "input": "go", "lane": "shared"})).json()
        for a in (slow, quick)
    ]
    await page.goto(f"{server}/ui/runs/{behind['id']}")
    await expect(page.locator("#summary .status")).to_have_text("queued")
    await expect(page.get_by_text("No messages yet.")).to_be_visible()

    assert (await api.post(f"/v1/runs/{ahead['id']}/cancel")).status_code == 200
    await expect(page.locator("#summary .status")).to_have_text("completed")
    await expect(page.locator("#transcript .msg-assistant .text")).to_have_text("My turn at last.")
    await expect(page.locator("#transcript .msg")).to_have_count(2)
    await expect(page.get_by_text("No messages yet.")).to_be_hidden()


async def test_a_plan_execute_run_shows_its_plan_step_by_step(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """The plan is on the page as it moves: the step in progress marked, each finished
    step with its result; the page follows the run's events without a reload."""
    plan = {
        "steps": [
            {"goal": "Collect the reports", "acceptance_criteria": ["all three read"]},
            {"goal": "Name the causes", "acceptance_criteria": ["one cause a report"]},
        ]
    }
    agent = scripted(
        "planner",
        {"tool_calls": [{"name": "submit_plan", "input": plan}]},
        {"text": "three reports collected"},
        {"tool_calls": [{"name": "ask_human", "input": {"question": "Group them?"}}]},
        {"text": "cache warm-up race; full disk"},
        tools=["ask_human"],
    )
    agent["execution_loop"] = "plan_execute"
    run_id = await start(api, await make_agent(api, agent))
    await page.goto(f"{server}/ui/runs/{run_id}")

    steps = page.locator("#summary .plan-step")
    await expect(page.locator(".waiting")).to_contain_text("Group them?")
    await expect(steps).to_have_count(2)
    await expect(steps.nth(0)).to_contain_text("completed")
    await expect(steps.nth(0).locator(".step-result")).to_have_text("three reports collected")
    await expect(steps.nth(1)).to_have_attribute("aria-current", "step")
    await expect(steps.nth(1)).to_contain_text("running")
    await expect(page.locator("#summary .facts")).to_contain_text("plan_execute")

    answered = await api.post(f"/v1/runs/{run_id}/human-response", json={"response": "yes"})
    assert answered.status_code == 200, answered.text
    await expect(steps.nth(1).locator(".step-result")).to_have_text("cache warm-up race; full disk")
    await expect(page.locator("#summary .status")).to_have_text("completed")
    await expect(page.locator("#summary [aria-current]")).to_have_count(0)
