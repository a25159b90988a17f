"""A run whose agent uses the `anthropic` provider, end to end over real HTTP: the service
calls a local server speaking the Messages API wire format, streams the text deltas to
the run's SSE subscribers, runs the tool the model asked for, and completes."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.anthropic_wire import Reply, ToolUse, anthropic_wire
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader


async def test_an_anthropic_agent_runs_through_the_messages_api(
    database_url: str, clean_db: AsyncEngine
) -> None:
    async with anthropic_wire() as wire:
        wire.plan(
            Reply.tools(
                ToolUse("echo", {"city": "Oslo"}, id="toolu_wire_a"),
                cache_write_tokens=50,
                cache_read_tokens=100,
            ),
            Reply.text("It is sunny in Oslo, says the echo."),
        )
        settings = make_settings(
            database_url,
            llm={"anthropic": {"api_key": "sk-test", "base_url": wire.url}},
            costs={"prices": {"anthropic/claude-wire-test": {"input": 3, "output": 15}}},
        )
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            agent = await http.post(
                "/v1/agents",
                json={
                    "name": "claude",
                    "system_prompt": "Be brief.",
                    "tools": ["echo"],
                    "model": {"provider": "anthropic", "name": "claude-wire-test"},
                },
            )
            assert agent.status_code == 201, agent.text
            run = (
                await http.post(
                    "/v1/runs", json={"agent_id": agent.json()["id"], "input": "Weather?"}
                )
            ).json()
            events: list[Any] = []
            async with (
                asyncio.timeout(20),
                http.stream("GET", f"/v1/runs/{run['id']}/events") as stream,
            ):
                reader = SseReader(stream)
                while not events or events[-1].event != "agent_run.completed":
                    events.append(await reader.next_message())
            final = (await http.get(f"/v1/runs/{run['id']}")).json()

    assert final["status"] == "completed"
    assert final["result"] == "It is sunny in Oslo, says the echo."
    # Cache writes at 1.25 times the input's price, reads at a tenth: (12 x 3 + 7 x 15 +
    # 50 x 3.75 + 100 x 0.30) + (12 x 3 + 7 x 15) = 499.5 USD a million tokens.
    assert final["usage"] == {
        "input_tokens": 24,
        "output_tokens": 14,
        "cache_write_tokens": 50,
        "cache_read_tokens": 100,
        "cost_usd": 0.0004995,
        "unpriced_calls": 0,
    }
    first, second = wire.requests
    assert first.body["model"] == "claude-wire-test" and first.body["stream"] is True
    assert first.body["system"] == "Be brief."
    # The agent's tool, then the journal tools every agent has.
    assert [t["name"] for t in first.body["tools"]] == [
        "echo",
        "get_run_journal",
        "update_run_journal",
        "append_run_journal_entry",
    ]
    assert second.body["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_wire_a",
                "content": '{"city": "Oslo"}',
                "is_error": False,
            }
        ],
    }
    deltas = "".join(m.data["text"] for m in events if m.event == "message.delta")
    assert deltas == "It is sunny in Oslo, says the echo."


async def test_an_agent_whose_provider_has_no_key_fails_at_once_saying_how_to_fix_it(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, llm={"anthropic": {"api_key": None}})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        agent = await http.post(
            "/v1/agents",
            json={"name": "keyless", "model": {"provider": "anthropic", "name": "claude-x"}},
        )
        assert agent.status_code == 201, agent.text
        run = await http.post("/v1/runs", json={"agent_id": agent.json()["id"], "input": "hi"})
        final = (
            await http.get(f"/v1/runs/{run.json()['id']}/wait", params={"timeout_s": 20})
        ).json()

    # Not retried with backoff for a quarter of an hour: failed, with the fix in the error.
    assert (final["status"], final["stop_reason"]) == ("failed", "provider_unavailable")
    assert final["attempt"] == 1 and final["not_before"] is None
    message = final["error"]["message"]
    assert "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY" in message
    assert message.endswith("then retry the run")
