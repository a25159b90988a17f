"""An agent's MCP servers edited through the dashboard's agent form: a JSON text as the API
takes it, the API's refusal shown by it, and the auto-approved tools of the servers kept
(no checkbox has them: their tools are known to runs only)."""

from __future__ import annotations

import json

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.ui.conftest import make_agent, scripted

pytestmark = pytest.mark.asyncio(loop_scope="session")

FILES = {"name": "files", "transport": "stdio", "command": "npx", "args": ["-y", "mcp-files"]}
SEARCH = {"name": "search", "transport": "http", "url": "https://mcp.example.com/mcp"}


async def test_an_agents_mcp_servers_are_edited_through_the_form(
    server: str, api: httpx.AsyncClient, page: Page
) -> None:
    body = scripted("librarian", {"text": "ok"})
    body |= {"mcp_servers": [FILES], "auto_approve": ["files__write_file"]}
    agent_id = await make_agent(api, body)
    await page.goto(f"{server}/ui/agents/{agent_id}")
    servers = page.get_by_label("Servers, as JSON")
    await expect(servers).to_have_value(json.dumps([FILES], indent=2))
    unasked = page.get_by_label("Their tools that run unasked", exact=False)
    await expect(unasked).to_have_value("files__write_file")
    # The agent's warnings say why its runs would fail on this service as it is set up.
    await expect(page.locator(".agent-warnings")).to_contain_text("LOOPWRIGHT_MCP__STDIO_COMMANDS")

    await servers.fill(json.dumps([FILES, FILES]))  # one name twice: the API refuses it
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#err-mcp_servers")).to_contain_text("names must be unique")

    await servers.fill(json.dumps([FILES, SEARCH]))
    await unasked.fill("files__write_file, search__find")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("main .meta")).to_contain_text("version 2")
    agent = (await api.get(f"/v1/agents/{agent_id}")).json()
    assert [s["name"] for s in agent["mcp_servers"]] == ["files", "search"]
    assert agent["auto_approve"] == ["files__write_file", "search__find"]

    await servers.fill("")  # emptied: no servers (and their tools can no longer be named)
    await unasked.fill("")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("main .meta")).to_contain_text("version 3")
    agent = (await api.get(f"/v1/agents/{agent_id}")).json()
    assert (agent["mcp_servers"], agent["auto_approve"]) == ([], [])
