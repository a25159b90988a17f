"""The tasks board, a task's page and the agent form in a browser: a task moves between
the board's columns as it is moved on its page (its audit trail growing), a refused move
shows the API's reason, and agents are created and edited through the form, with the
API's field errors shown next to their fields."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.conftest import SCREENSHOTS, make_agent, scripted

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def make_task(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await api.post("/v1/tasks", json=body)
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


async def test_a_task_moved_on_its_page_moves_on_the_board_without_a_reload(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/tasks")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
    task = await make_task(api, title="Write the release notes", project="apollo")
    created = page.locator(".task-column[data-status=created]")
    card = created.locator(f"#task-{task['id']}")
    await expect(card).to_contain_text("Write the release notes")
    await expect(card).to_contain_text("apollo")
    await expect(created.locator(".count")).to_have_text("1")

    task_page = await page.context.new_page()
    await task_page.goto(f"{server}/ui/tasks/{task['id']}")
    await expect(task_page.locator(".stream-state")).to_have_text("Live.")
    # `assigned` needs an assignee: the API's refusal is shown under the buttons.
    await task_page.get_by_role("button", name="Assigned").click()
    problem = task_page.locator(".transitions .problem")
    await expect(problem).to_contain_text("needs an assignee")

    await task_page.get_by_label("Reason (optional)").fill("Sarah wrote the last ones")
    await task_page.get_by_label("Assign to").fill("sarah")
    await task_page.get_by_role("button", name="Assigned").click()
    await expect(task_page.locator("#task-detail h1 .status")).to_have_text("assigned")
    step = task_page.locator("#trail tr").last
    await expect(step).to_contain_text("created → assigned")
    await expect(step).to_contain_text("Sarah wrote the last ones")
    await expect(task_page.locator(".transitions .problem")).to_be_hidden()

    moved = page.locator(f".task-column[data-status=assigned] #task-{task['id']}")
    await expect(moved).to_contain_text("sarah")
    await expect(created.locator(f"#task-{task['id']}")).to_have_count(0)
    await expect(created).to_have_class("task-column is-empty")
    await expect(created.locator(".count")).to_have_text("0")

    await task_page.get_by_role("button", name="In progress").click()
    await expect(task_page.locator("#trail tr").last).to_contain_text("assigned → in progress")
    await expect(
        page.locator(f".task-column[data-status=in_progress] #task-{task['id']}")
    ).to_be_visible()
    assert await page.evaluate("window.sameDocument") is True

    # Another client's move reaches the page live; had the page not heard of it yet (its
    # version is put back here), the API refuses the move as made on a stale version.
    answer = await api.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_review"})
    assert answer.status_code == 200, answer.text
    await expect(task_page.locator("#task-detail h1 .status")).to_have_text("in review")
    await task_page.evaluate("document.querySelector('.transitions').dataset.version = '1'")
    await task_page.get_by_role("button", name="Completed").click()
    await expect(task_page.locator(".transitions .problem")).to_contain_text("version")
    # Its picture beside the board's, which the `page` fixture saves.
    await task_page.screenshot(path=SCREENSHOTS / "task-page.png", full_page=True)
    await task_page.close()


async def test_an_agent_created_through_the_form_has_the_model_it_was_given(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/agents/new")
    await expect(page.get_by_label("Script: the model's turns, as JSON")).to_be_hidden()
    await page.get_by_label("Name", exact=True).fill("   ")  # blank once stripped: a 422
    await page.get_by_label("System prompt").fill("You write release notes.")
    await page.get_by_label("echo may be called").check()
    await page.get_by_label("Model name").fill("claude-sonnet-4-5")
    await page.get_by_label("Max output tokens").fill("2048")
    await page.get_by_label("Fallback model (optional)").fill("claude-haiku-4-5")
    await page.get_by_label("Max iterations").fill("7")
    await page.get_by_label("Max cost of a run (USD)").fill("2.5")
    await page.get_by_role("button", name="Create agent").click()
    error = page.locator("#err-name")
    await expect(error).to_be_visible()
    await expect(error).not_to_be_empty()
    await expect(page.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")

    await page.get_by_label("Name", exact=True).fill("notes-writer")
    await page.get_by_role("button", name="Create agent").click()
    await expect(page.locator("main h1")).to_have_text("notes-writer")
    agent_id = page.url.rsplit("/", 1)[1]
    agent = (await api.get(f"/v1/agents/{agent_id}")).json()
    # The fallback's provider is the model's unless another is chosen.
    fallback = {"provider": "anthropic", "name": "claude-haiku-4-5"}
    assert agent["model"] == {
        "provider": "anthropic",
        "name": "claude-sonnet-4-5",
        "fallback_name": None,
        "fallback": {**fallback, "base_url": None, "api_key_env": None},
        "context_window": 200_000,
        "max_output_tokens": 2048,
        "base_url": None,
        "api_key_env": None,
        "script": None,
    }
    assert agent["system_prompt"] == "You write release notes." and agent["tools"] == ["echo"]
    assert agent["limits"]["max_iterations"] == 7 and agent["limits"]["max_cost_usd"] == 2.5


async def test_an_openai_compatible_agent_falling_back_to_anthropic_is_made_in_the_form(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    await page.goto(f"{server}/ui/agents/new")
    key_variable = page.get_by_label("Variable holding its API key (optional)")
    await expect(key_variable).to_be_hidden()
    await page.get_by_label("Provider").select_option("openai")
    await expect(page.get_by_label("Base URL (optional)")).to_be_hidden()
    await page.get_by_label("Name", exact=True).fill("local-llama")
    await page.get_by_label("Model name").fill("llama3.1:8b")
    await page.get_by_label("Server's base URL").fill("http://localhost:11434/v1")
    await key_variable.fill("database_url")  # not a key's variable: the API says why
    await page.get_by_label("Fallback model (optional)").fill("claude-haiku-4-5")
    await page.get_by_label("Served by").select_option("anthropic")
    await page.get_by_role("button", name="Create agent").click()
    await expect(page.locator("#err-model-api_key_env")).to_contain_text("pattern")

    await key_variable.fill("OLLAMA_API_KEY")
    await page.get_by_role("button", name="Create agent").click()
    await expect(page.locator("main h1")).to_have_text("local-llama")
    agent_id = page.url.rsplit("/", 1)[1]
    model = (await api.get(f"/v1/agents/{agent_id}")).json()["model"]
    assert (model["provider"], model["name"]) == ("openai", "llama3.1:8b")
    assert (model["base_url"], model["api_key_env"]) == (
        "http://localhost:11434/v1",
        "OLLAMA_API_KEY",
    )
    assert model["fallback"] == {
        "provider": "anthropic",
        "name": "claude-haiku-4-5",
        "base_url": None,
        "api_key_env": None,
    }


async def test_a_scripted_agents_script_is_edited_through_the_form(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    agent_id = await make_agent(api, {**scripted("echoer", {"text": "first"}), "skills": ["notes"]})
    await page.goto(f"{server}/ui/agents/{agent_id}")
    script = page.get_by_label("Script: the model's turns, as JSON")
    await expect(script).to_have_value('[\n  {\n    "text": "first"\n  }\n]')
    await expect(page.get_by_label("Variable holding its API key (optional)")).to_be_hidden()
    await expect(page.get_by_label("Fallback model (optional)")).to_have_value("")

    await script.fill('[{"text": "second"')  # not JSON: said before anything is sent
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#err-model-script")).to_contain_text("is not valid JSON")
    await script.fill('[{"text": "second", "tool_calls": [{"name": "echo"}]}]')
    await page.get_by_role("button", name="Save changes").click()  # the API refuses the turn
    await expect(page.locator("#err-model-script")).to_contain_text("0: a turn has either")

    await script.fill('[{"text": "second"}, {"text": "third"}]')
    await page.get_by_label("Soft time limit (s)").fill("30.5")
    await page.get_by_label("Skills (comma-separated)").fill("")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("main .meta")).to_contain_text("version 2")
    agent = (await api.get(f"/v1/agents/{agent_id}")).json()
    assert [turn["text"] for turn in agent["model"]["script"]] == ["second", "third"]
    assert agent["limits"]["soft_time_limit_s"] == 30.5 and agent["name"] == "echoer"
    assert agent["skills"] == [] and agent["tools"] == []

    # Switching the provider shows the other's fields; the schema's rule is shown by them.
    await page.get_by_label("Provider").select_option("anthropic")
    await expect(script).to_be_hidden()
    await page.get_by_label("Soft time limit (s)").fill("5000")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#err-limits")).to_contain_text("soft_time_limit_s must be below")


async def test_the_tasks_and_agents_pages_read_on_a_phone(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    """At 390 px the board's columns stack and the forms' tables become cards; nothing
    runs off the side."""
    agent_id = await make_agent(
        api, scripted("a-rather-long-agent-name-for-a-phone", {"text": "ok"})
    )
    task = await make_task(
        api, title="A task whose title is long enough to wrap", assigned_to="sarah"
    )
    await page.set_viewport_size({"width": 390, "height": 844})
    for path in (
        "/ui/tasks",
        "/ui/tasks?status=assigned",
        f"/ui/tasks/{task['id']}",
        "/ui/agents",
        "/ui/agents/new",
        f"/ui/agents/{agent_id}",
    ):
        await page.goto(f"{server}{path}")
        await expect(page.locator("main h1")).to_be_visible()
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width} px wide"
