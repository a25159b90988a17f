"""Runs whose agents use the `openai` provider, end to end over real HTTP: the service calls
a local server speaking Chat Completions (as vLLM, Ollama, llama.cpp, LM Studio do), runs
the tool the model asked for, retries what the policy retries, forces `ask_human` as a
`tool_choice`; and an Anthropic model (a local server speaking the Messages API) that is
overloaded falls back to a local OpenAI-compatible one, each call priced as its own
provider's model (the local one has no price)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.runs.test_runs_api import settle, start
from tests.support import anthropic_wire as messages_api
from tests.support.anthropic_wire import anthropic_wire
from tests.support.chat_completions_wire import HttpError, Reply, ToolCall, chat_completions_wire
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader

LOCAL = "llama-wire-test"
CLAUDE = "claude-wire-test"
TOOLS = ["echo", "get_run_journal", "update_run_journal", "append_run_journal_entry"]


async def create_agent(http: httpx.AsyncClient, model: dict[str, Any], **fields: Any) -> str:
    body = {"name": "local", "system_prompt": "Be brief.", "tools": ["echo"], "model": model}
    response = await http.post("/v1/agents", json={**body, **fields})
    assert response.status_code == 201, response.text
    assert response.json()["warnings"] == []
    agent_id: str = response.json()["id"]
    return agent_id


async def events_until(http: httpx.AsyncClient, run_id: str, last: str) -> list[Any]:
    """The run's events from the start (replayed), up to the first `last`, each checked
    against the published schema."""
    events: list[Any] = []
    async with (
        asyncio.timeout(20),
        http.stream("GET", f"/v1/runs/{run_id}/events") as stream,
    ):
        reader = SseReader(stream)
        while not events or events[-1].event != last:
            events.append(await reader.next_message())
    return events


async def test_an_openai_compatible_agent_runs_a_tool_and_completes(
    database_url: str, clean_db: AsyncEngine
) -> None:
    async with chat_completions_wire() as wire:
        wire.plan(
            Reply.tools(
                ToolCall("echo", {"city": "Oslo"}, id="call_wire_a"),
                prompt_tokens=1_200,
                cached_tokens=1_000,
                chunk_chars=3,
            ),
            Reply("It is sunny in Oslo, says the echo."),
        )
        # No key anywhere: a local server is sent the placeholder.
        settings = make_settings(database_url, llm={"openai": {"base_url": wire.base_url}})
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            agent_id = await create_agent(http, {"provider": "openai", "name": LOCAL})
            run = await start(http, agent_id=agent_id, input="Weather?")
            final = await settle(http, run["id"])
            steps = (await http.get(f"/v1/runs/{run['id']}/history")).json()["items"]

    assert final["status"] == "completed", final
    assert final["result"] == "It is sunny in Oslo, says the echo."
    # A local model has no price: its calls' cost is unknown, not zero.
    assert final["usage"] == {
        "input_tokens": 212,  # 200 read afresh, then 12
        "output_tokens": 14,
        "cache_write_tokens": 0,
        "cache_read_tokens": 1_000,
        "cost_usd": None,
        "unpriced_calls": 2,
    }
    calls = [step["call"] for step in steps if step["call"] is not None]
    assert [(c["provider"], c["model"], c["cost_usd"]) for c in calls] == [
        ("openai", LOCAL, None),
        ("openai", LOCAL, None),
    ]
    first, second = wire.requests
    assert first.headers["authorization"] == "Bearer loopwright-no-key"
    assert first.body["model"] == LOCAL and first.body["stream"] is True
    assert first.body["stream_options"] == {"include_usage": True}
    assert first.body["max_tokens"] == 4_096
    assert first.body["messages"] == [
        {"role": "system", "content": first.body["messages"][0]["content"]},
        {"role": "user", "content": "Weather?"},
    ]
    assert first.body["messages"][0]["content"].startswith("Be brief.")
    assert [t["function"]["name"] for t in first.body["tools"]] == TOOLS
    assert first.body["tool_choice"] == "auto"
    assert second.body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_wire_a",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_wire_a", "content": '{"city": "Oslo"}'},
    ]


async def test_a_429_is_retried_after_what_retry_after_says(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """`retry-after: 0` (the service's sleep is the real one): the wait is the server's,
    not the backoff formula's half a second and more."""
    async with chat_completions_wire() as wire:
        limited = HttpError(
            429, "Rate limit reached for requests", "requests", headers={"retry-after": "0"}
        )
        wire.plan(limited, Reply("Done after the wait."))
        settings = make_settings(
            database_url,
            llm={"openai": {"api_key": "sk-wire", "base_url": wire.base_url}},
            costs={"prices": {f"openai/{LOCAL}": {"input": 1, "output": 2}}},
        )
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            agent_id = await create_agent(http, {"provider": "openai", "name": LOCAL})
            run = await start(http, agent_id=agent_id)
            final = await settle(http, run["id"])
            events = await events_until(http, run["id"], "agent_run.completed")

    assert (final["status"], final["result"]) == ("completed", "Done after the wait.")
    assert final["usage"]["cost_usd"] == pytest.approx((12 * 1 + 7 * 2) / 1e6)
    [retry] = [e.data for e in events if e.event == "agent.llm.retry"]
    assert (retry["class"], retry["http_status"], retry["attempt"]) == ("rate_limited", 429, 1)
    assert retry["delay_s"] == 0.0
    assert [r.headers["authorization"] for r in wire.requests] == ["Bearer sk-wire"] * 2


async def test_an_overloaded_anthropic_model_falls_back_to_a_local_one(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """The first call is Anthropic's (priced); the second meets an overload and goes to
    the fallback on the local server (unpriced): the run's cost becomes unknown, and each
    call is recorded, and totalled, as its own provider's model."""
    async with anthropic_wire() as claude, chat_completions_wire() as local:
        claude.plan(
            messages_api.Reply.tools(messages_api.ToolUse("echo", {"n": 1}, id="toolu_a")),
            messages_api.HttpError(529, "overloaded_error", "Overloaded"),
        )
        local.plan(Reply("The local model finished the job."))
        settings = make_settings(
            database_url,
            llm={"anthropic": {"api_key": "sk-ant-wire", "base_url": claude.url}},
            costs={"prices": {f"anthropic/{CLAUDE}": {"input": 3, "output": 15}}},
            # One overload is enough to switch: no backoff sleep in this test.
            resilience={"llm_overloads_before_fallback": 1},
        )
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            model = {
                "provider": "anthropic",
                "name": CLAUDE,
                "fallback": {"provider": "openai", "name": LOCAL, "base_url": local.base_url},
            }
            agent_id = await create_agent(http, model)
            run = await start(http, agent_id=agent_id)
            final = await settle(http, run["id"])
            steps = (await http.get(f"/v1/runs/{run['id']}/history")).json()["items"]
            events = await events_until(http, run["id"], "agent_run.completed")
            costs = (await http.get("/v1/costs", params={"group_by": "model"})).json()

    assert (final["status"], final["result"]) == ("completed", "The local model finished the job.")
    assert final["usage"]["cost_usd"] is None
    assert final["usage"]["unpriced_calls"] == 1
    calls = [step["call"] for step in steps if step["call"] is not None]
    assert [(c["provider"], c["model"]) for c in calls] == [
        ("anthropic", CLAUDE),
        ("openai", LOCAL),
    ]
    assert calls[0]["cost_usd"] == pytest.approx((12 * 3 + 7 * 15) / 1e6)
    assert calls[1]["cost_usd"] is None
    [switch] = [e.data for e in events if e.event == "agent.llm.fallback"]
    assert {k: switch[k] for k in ("from_provider", "to_provider", "to_model", "reason")} == {
        "from_provider": "anthropic",
        "to_provider": "openai",
        "to_model": LOCAL,
        "reason": "overloaded",
    }
    lines = {i["key"]: (i["calls"], i["unpriced_calls"]) for i in costs["items"]}
    assert lines == {f"anthropic/{CLAUDE}": (1, 0), f"openai/{LOCAL}": (1, 1)}
    # The local server saw the whole conversation, the Anthropic tool call as its own kind.
    [received] = local.requests
    assert received.body["model"] == LOCAL
    assert received.headers["authorization"] == "Bearer loopwright-no-key"
    assert received.body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "toolu_a",
        "content": '{"n": 1}',
    }


async def test_a_forced_ask_human_is_sent_as_the_tool_choice(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """Five identical calls climb the loop ladder to a forced `ask_human`: the sixth request
    names it in `tool_choice` (and offers it, though the agent does not list it)."""
    same = [ToolCall("echo", {"query": "status of order 42"}, id=f"call_{i}") for i in range(5)]
    ask = ToolCall("ask_human", {"question": "Is order 42 lost?"}, id="call_ask")
    async with chat_completions_wire() as wire:
        wire.plan(*[Reply.tools(call) for call in same], Reply.tools(ask))
        settings = make_settings(database_url, llm={"openai": {"base_url": wire.base_url}})
        async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
            agent_id = await create_agent(http, {"provider": "openai", "name": LOCAL})
            run = await start(http, agent_id=agent_id)
            paused = await settle(http, run["id"])

    assert paused["status"] == "waiting_on_human", paused
    assert paused["waiting_for"]["question"] == "Is order 42 lost?"
    choices = [r.body["tool_choice"] for r in wire.requests]
    forced = {"type": "function", "function": {"name": "ask_human"}}
    assert choices == ["auto"] * 5 + [forced]
    assert "ask_human" in [t["function"]["name"] for t in wire.requests[5].body["tools"]]
