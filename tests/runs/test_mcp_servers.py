"""Agents' MCP servers through the real service: the agent API's rules and warnings, and runs
whose scripted model calls a real MCP server's tools (over stdio, over streamable HTTP with
a header whose secret the worker holds), with the approval asked over the API, the events
on the run's stream, and no server process left once the run is over."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import assert_problem
from tests.support.event_schemas import stored_events_documented
from tests.support.mcp_servers import PYTHON, alive, calls, http_server, started, stdio_server
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader

SCRIPTED = {"provider": "scripted", "name": "s", "script": [{"text": "done"}]}


def agent_body(servers: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"name": "mcp", "mcp_servers": servers, "model": SCRIPTED, **fields}


async def test_an_agents_servers_are_stored_as_sent_and_checked(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    servers = [
        stdio_server("files", tmp_path / "log", env={"TOKEN": "${DOCS_TOKEN}"}),
        {
            "name": "search",
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
            "tools": ["find"],
        },
    ]
    created = await client.post(
        "/v1/agents", json=agent_body(servers, auto_approve=["files__append_line"])
    )
    assert created.status_code == 201, created.text
    agent = created.json()
    # What is stored is what a read shows: references, not secrets.
    assert agent["mcp_servers"][0]["env"] == {
        "MCP_TEST_LOG": str(tmp_path / "log"),
        "TOKEN": "${DOCS_TOKEN}",
    }
    assert agent["mcp_servers"][1] | {"timeout_s": 60.0} == servers[1] | {"timeout_s": 60.0}
    # The service as configured here lets agents run no command nor reference a secret.
    warnings = "\n".join(agent["warnings"])
    assert "MCP server 'files': the command" in warnings
    assert "LOOPWRIGHT_MCP__STDIO_COMMANDS" in warnings
    assert "${DOCS_TOKEN} is not a variable" in warnings
    assert "${SEARCH_TOKEN} is not a variable" in warnings
    fetched = (await client.get(f"/v1/agents/{agent['id']}")).json()
    assert fetched["mcp_servers"] == agent["mcp_servers"]

    # auto_approve names the servers' tools as patched; `tools` need not name them.
    patched = await client.patch(
        f"/v1/agents/{agent['id']}", json={"auto_approve": ["search__find", "echo"]}
    )
    assert patched.status_code == 200, patched.text
    unknown = await client.patch(
        f"/v1/agents/{agent['id']}", json={"auto_approve": ["notes__write"]}
    )
    problem = assert_problem(unknown, 422, "validation_error")
    [error] = problem["errors"]
    assert error["field"] == "body.auto_approve[0]"
    assert "`<server>__<tool>` of its MCP servers (files, search)" in error["message"]
    listed = await client.patch(f"/v1/agents/{agent['id']}", json={"tools": ["files__echo"]})
    [error] = assert_problem(listed, 422, "validation_error")["errors"]
    assert error["field"] == "body.tools[0]"
    assert "a tool of the agent's MCP server 'files'" in error["message"]


@pytest.mark.parametrize(
    ("servers", "field"),
    [
        (
            [
                {"name": "a", "transport": "http", "url": "https://x.example/mcp"},
                {"name": "a", "transport": "stdio", "command": "x"},
            ],
            "mcp_servers",
        ),
        (
            [{"name": "files__x", "transport": "stdio", "command": "x"}],
            "mcp_servers.0.stdio.name",
        ),
        (
            [{"name": "a", "transport": "http", "url": "ftp://x.example/"}],
            "mcp_servers.0.http.url",
        ),
        ([{"name": "a", "transport": "sse", "url": "https://x.example/"}], "mcp_servers.0"),
        (
            [{"name": "a", "transport": "stdio", "command": "x", "env": {"1BAD": "v"}}],
            "mcp_servers.0.stdio.env",
        ),
    ],
)
async def test_a_bad_server_is_a_422_naming_it(
    client: httpx.AsyncClient, servers: list[dict[str, Any]], field: str
) -> None:
    response = await client.post("/v1/agents", json=agent_body(servers))
    problem = assert_problem(response, 422, "validation_error")
    assert any(e["field"].startswith(field) for e in problem["errors"]), problem["errors"]


async def _events_until(
    http: httpx.AsyncClient, run_id: str, last: str
) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    async with asyncio.timeout(30), http.stream("GET", f"/v1/runs/{run_id}/events") as stream:
        reader = SseReader(stream)
        while not seen or seen[-1][0] != last:
            message = await reader.next_message()
            if message.is_comment_only:  # a keep-alive, while a tool call takes its time
                continue
            seen.append((message.event or "message", message.data))
    return seen


async def test_a_run_calls_a_stdio_servers_tools_and_leaves_no_process(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    script = [
        {"tool_calls": [{"name": "files__echo", "input": {"text": "hello"}}]},
        {"tool_calls": [{"name": "files__append_line", "input": {"line": "hello"}}]},
        {"text": "Echoed and appended."},
    ]
    settings = make_settings(database_url, mcp={"stdio_commands": [PYTHON]})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        body = agent_body([stdio_server("files", log)], model={**SCRIPTED, "script": script})
        agent = (await http.post("/v1/agents", json=body)).json()
        assert agent["warnings"] == []
        run = (await http.post("/v1/runs", json={"agent_id": agent["id"], "input": "go"})).json()
        waiting = await http.get(f"/v1/runs/{run['id']}/wait", params={"timeout_s": 20})
        assert waiting.json()["status"] == "waiting_on_human"
        approval_id = waiting.json()["waiting_for"]["approval_id"]
        approval = (await http.get(f"/v1/approvals/{approval_id}")).json()
        assert (approval["tool"], approval["arguments"]) == (
            "files__append_line",
            {"line": "hello"},
        )
        assert calls(log, "append_line") == []
        approved = await http.post(f"/v1/approvals/{approval_id}/approve", json={})
        assert approved.status_code == 200, approved.text
        events = await _events_until(http, run["id"], "agent_run.completed")
        final = (await http.get(f"/v1/runs/{run['id']}")).json()

    assert (final["status"], final["result"]) == ("completed", "Echoed and appended.")
    assert [c["arguments"] for c in calls(log, "echo")] == [{"text": "hello"}]
    assert [c["arguments"] for c in calls(log, "append_line")] == [{"line": "hello"}]
    [listed] = [data for name, data in events if name == "agent.mcp.tools_listed"]
    assert (listed["server"], listed["transport"]) == ("files", "stdio")
    assert "files__append_line" in listed["tools"]
    pids = started(log)
    assert len(pids) == 2  # one per execution: before the approval, and after
    assert not any(map(alive, pids))
    assert "agent.mcp.tools_listed" in await stored_events_documented(clean_db)


async def test_a_run_calls_an_http_server_with_its_secret_header(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("SEARCH_TOKEN", "s3cret")
    script = [
        {"tool_calls": [{"name": "search__echo", "input": {"text": "over http"}}]},
        {"text": "Found."},
    ]
    settings = make_settings(
        database_url,
        mcp={"allowed_networks": ["127.0.0.0/8"], "secret_env": ["SEARCH_TOKEN"]},
    )
    async with (
        http_server("s3cret", log) as mcp_url,
        running_server(settings) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        server = {
            "name": "search",
            "transport": "http",
            "url": mcp_url,
            "headers": {"X-Test-Token": "${SEARCH_TOKEN}"},
        }
        body = agent_body([server], model={**SCRIPTED, "script": script})
        agent = (await http.post("/v1/agents", json=body)).json()
        assert agent["warnings"] == []
        run = (await http.post("/v1/runs", json={"agent_id": agent["id"], "input": "go"})).json()
        final = (await http.get(f"/v1/runs/{run['id']}/wait", params={"timeout_s": 20})).json()
        messages = (await http.get(f"/v1/conversations/{final['conversation_id']}/messages")).json()

    assert (final["status"], final["result"]) == ("completed", "Found."), final
    assert [c["arguments"] for c in calls(log, "echo")] == [{"text": "over http"}]
    results = [
        block["content"]
        for message in messages
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert results == ["echo: over http"]
