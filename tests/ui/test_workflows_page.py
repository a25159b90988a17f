"""The workflows pages in a browser: a definition activated from its page, its execution's
graph following the nodes' statuses live as scripted agents work the tasks and a person
approves them; the editor marking an invalid definition's errors on its graph, showing
the API's refusal, and saving a valid one; a definition made from a template on the list
page."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.approvals.test_approvals_api import requested
from tests.ui.conftest import make_agent, scripted

pytestmark = pytest.mark.asyncio(loop_scope="session")


def release(**fields: Any) -> dict[str, Any]:
    """start -> who (writer) -> gate: env == 'prod' ? deploy : hold -> notify -> end"""
    return {
        "name": "Release",
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "who", "type": "agent_assignment", "config": {"agent_name": "writer"}},
            {
                "id": "gate",
                "type": "conditional",
                "config": {"condition_expression": "env == 'prod'"},
            },
            {"id": "deploy", "type": "task", "config": {"title": "Deploy"}},
            {"id": "hold", "type": "task", "config": {"title": "Hold"}},
            {"id": "notify", "type": "task", "config": {"title": "Notify"}},
            {"id": "e", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "who"},
            {"id": "e2", "source": "who", "target": "gate"},
            {"id": "e3", "source": "gate", "target": "deploy", "type": "conditional_true"},
            {"id": "e4", "source": "gate", "target": "hold", "type": "conditional_false"},
            {"id": "e5", "source": "deploy", "target": "notify"},
            {"id": "e6", "source": "hold", "target": "notify"},
            {"id": "e7", "source": "notify", "target": "e"},
        ],
        **fields,
    }


async def test_a_workflow_graph_renders_with_its_node_statuses(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await make_agent(api, scripted("writer", {"text": "Done."}))
    created = await api.post("/v1/workflows", json=release())
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]

    await page.goto(f"{server}/ui/workflows")
    await page.get_by_role("link", name="Release").click()
    await expect(page.locator(".wf-valid")).to_have_text("Valid: ready to activate.")
    await page.locator("#wf-context").fill('{"env": "prod"}')
    await page.get_by_role("button", name="Activate").click()
    await page.wait_for_url(f"{server}/ui/workflow-executions/*")
    await expect(page.locator(".stream-state")).to_have_text("Live.")

    nodes = page.locator("svg.wf-svg g.wf-node")
    await expect(nodes).to_have_count(7)
    ids = [n["id"] for n in release()["nodes"]]
    node = {n: page.locator(f'svg g.wf-node[data-node="{n}"]') for n in ids}
    await expect(node["hold"]).to_have_attribute("data-status", "skipped")
    await expect(node["gate"]).to_have_class("wf-node kind-conditional st-completed")
    await expect(page.locator("svg g.wf-edge")).to_have_count(7)
    await page.evaluate("window.notReloaded = true")

    execution = await api.get(f"/v1/workflow-executions/by-definition/{workflow_id}")
    [started] = execution.json()["items"]
    for task_node in ("deploy", "notify"):
        # The writer's run ends in review: the node is running until a person approves.
        review = await requested(api, started["node_tasks"][task_node])
        await expect(node[task_node]).to_have_attribute("data-status", "running")
        await expect(node[task_node].locator(".wf-status")).to_have_text("running")
        approved = await api.post(f"/v1/approvals/{review['id']}/approve", json={})
        assert approved.status_code == 200, approved.text
        await expect(node[task_node]).to_have_attribute("data-status", "completed")
        await expect(node[task_node]).to_contain_text("task · completed")
        row = page.locator(f'table.wf-nodes tr[data-node="{task_node}"]')
        await expect(row.locator("td[data-label=Status]")).to_have_text("completed")
        await expect(row.locator("td[data-label=Run] a")).to_have_attribute(
            "href", f"/ui/runs/{review['run_id']}"
        )

    await expect(page.locator("h1 .status")).to_have_text("completed")
    assert await page.evaluate("window.notReloaded") is True


async def test_the_editor_marks_errors_on_the_graph_and_saves_a_valid_definition(
    server: str, page: Page
) -> None:
    broken = release(name="Broken")
    broken["edges"][4]["target"] = "nowhere"  # deploy -> a node the definition lacks
    broken["edges"].append({"id": "loop", "source": "notify", "target": "who"})
    await page.goto(f"{server}/ui/workflows/new")
    editor = page.locator("#wf-definition")
    await editor.fill(json.dumps(broken, indent=2))
    await page.get_by_role("button", name="Check").click()

    await expect(page.locator('svg g.wf-edge[data-edge="e5"]')).to_have_class(
        "wf-edge edge-sequential invalid"
    )
    await expect(page.locator('svg g.wf-node[data-node="nowhere"]')).to_have_class(
        "wf-node kind-missing"
    )
    await expect(page.locator('svg g.wf-edge[data-edge="loop"]')).to_have_class(
        "wf-edge edge-sequential back invalid"
    )
    errors = page.locator(".wf-check .wf-errors")
    await expect(errors.locator('li[data-edge="e5"]')).to_contain_text("no node 'nowhere'")
    await expect(errors.locator('li[data-edge="e5"]')).to_contain_text("blocks saving")
    await expect(errors.locator('li[data-edge="loop"]')).to_contain_text("closes the cycle")
    await expect(page.locator('svg text.wf-error[data-edge="e5"]')).to_have_text(
        "⚠ no node 'nowhere'"
    )

    # Saving goes to the API, whose refusal is shown as it says it.
    await page.get_by_role("button", name="Save").click()
    refusal = page.locator(".wf-refusal")
    await expect(refusal).to_be_visible()
    await expect(refusal.locator(".problem")).to_have_text("The request is not valid.")
    await expect(refusal.locator("li")).to_contain_text(["edges[e5]: edge 'e5': no node"])

    await editor.fill(json.dumps(release(name="Fixed"), indent=2))
    await page.get_by_role("button", name="Check").click()
    await expect(page.locator(".wf-check .wf-valid")).to_have_text(
        "Valid: it can be saved and activated."
    )
    await page.get_by_role("button", name="Save").click()
    await page.wait_for_url(f"{server}/ui/workflows/wf_*")
    await expect(page.locator("h1")).to_contain_text("Fixed")
    await expect(page.locator("svg g.wf-node")).to_have_count(7)

    # Edited: saved over the version it was opened on.
    await page.get_by_role("link", name="Edit").click()
    await editor.fill(json.dumps(release(name="Fixed again"), indent=2))
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("h1")).to_contain_text("Fixed again")
    await expect(page.locator(".facts dd").nth(1)).to_have_text("2")  # the version


async def test_a_definition_is_made_from_a_template_on_the_list_page(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/workflows")
    await page.locator("#template-agile_kanban summary").click()
    form = page.locator("#template-agile_kanban form")
    await form.get_by_label("Project").fill("atlas")
    await form.locator("#agile_kanban-sprint_length").fill("10")
    await form.get_by_label("Name").fill("   ")  # the API's refusal is shown
    await form.get_by_role("button", name="Create from agile_kanban").click()
    await expect(form.locator(".problem")).to_contain_text("name")
    await form.get_by_label("Name").fill("Atlas sprints")
    await form.get_by_role("button", name="Create from agile_kanban").click()
    await page.wait_for_url(f"{server}/ui/workflows/wf_*")
    await expect(page.locator("h1")).to_contain_text("Atlas sprints")
    await expect(page.locator("dd.workflow-kind")).to_have_text("agile_kanban")
    sprints = (await api.get("/v1/sprints", params={"project": "atlas"})).json()["items"]
    assert [s["duration_days"] for s in sprints] == [10]
