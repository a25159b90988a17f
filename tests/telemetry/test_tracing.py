"""Traces through the real HTTP server and its workers, in one process: a client's request
that creates a run is the root of one tree of spans (request → run → turns → LLM and tool
calls), a tool's HTTP call carries it on, a child run joins its parent's trace and a webhook
delivery's run the delivery's, group commits link to what they wrote; and with tracing off,
nothing of it happens."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.telemetry import tracing
from tests.support.receiver import Receiver, receiver
from tests.support.server import make_settings, running_app
from tests.support.traces import hex_id, recorded_spans
from tests.triggers.test_hooks_api import ISSUE, body_of, deliver, webhook_trigger

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
PRICE = {"input": 3, "output": 15}  # USD per million tokens


@pytest.fixture
def traced_settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        tools={"http_allowed_networks": ["127.0.0.0/8"]},
        costs={"prices": {"scripted/priced": PRICE}},
    )


@pytest.fixture
async def hook() -> AsyncIterator[Receiver]:
    async with receiver() as found:
        yield found


@asynccontextmanager
async def _client(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """A client of the app behind a real server (with its workers) started now: with tracing
    on, its requests are instrumented (the app decides when it is made)."""
    async with (
        running_app(settings) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=20) as http,
    ):
        yield http, app


def _agent(name: str, script: list[Any], tools: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "tools": tools,
        "auto_approve": [t for t in tools if t == "http_request"],
        "model": {"provider": "scripted", "name": "priced", "script": script},
    }


async def _create_agent(http: httpx.AsyncClient, body: dict[str, Any]) -> str:
    response = await http.post("/v1/agents", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _run_to_the_end(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    created = await http.post(
        "/v1/runs",
        json={"agent_id": agent_id, "input": "go"},
        headers={"traceparent": TRACEPARENT},
    )
    assert created.status_code == 202, created.text
    run_id = created.json()["id"]
    settled = await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})
    assert settled.json()["status"] == "completed", settled.text
    found: dict[str, Any] = (await http.get(f"/v1/runs/{run_id}")).json()
    return found


def _span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.span_id, 16)


def _trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.trace_id, 32)


def _parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else hex_id(span.parent.span_id, 16)


def _children(spans: list[ReadableSpan], parent: ReadableSpan, prefix: str) -> list[ReadableSpan]:
    found = [s for s in spans if _parent_id(s) == _span_id(parent) and s.name.startswith(prefix)]
    return sorted(found, key=lambda s: s.start_time or 0)


def _runs_ended(count: int) -> Any:
    return lambda spans: sum(s.name.startswith("invoke_agent") for s in spans) >= count


async def test_a_run_is_one_tree_of_spans_under_the_request_that_created_it(
    traced_settings: Settings, clean_db: AsyncEngine, hook: Receiver
) -> None:
    script = [
        {"tool_calls": [{"name": "http_request", "input": {"url": hook.hook(), "method": "POST"}}]},
        {"text": "done"},
    ]
    with recorded_spans() as recorded:
        async with _client(traced_settings) as (http, _app):
            agent_id = await _create_agent(http, _agent("caller", script, ["http_request"]))
            run = await _run_to_the_end(http, agent_id)
            path = f"/v1/conversations/{run['conversation_id']}/messages"
            call_id = (await http.get(path)).json()[1]["content"][0]["id"]
            spans = await recorded.wait_for(_runs_ended(1))

    # The client's request is the root the caller gave: every span is in the caller's trace.
    [request] = [s for s in spans if s.name == "POST /v1/runs"]
    assert request.kind is SpanKind.SERVER
    assert (_trace_id(request), _parent_id(request)) == (CALLER_TRACE, CALLER_SPAN)
    assert run["trace_id"] == CALLER_TRACE  # where a user finds the run's trace

    [execution] = _children(spans, request, "invoke_agent")
    assert execution.name == "invoke_agent caller"
    attributes = execution.attributes or {}
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["loopwright.run.id"] == run["id"]
    assert attributes["loopwright.run.status"] == "completed"
    assert attributes["loopwright.run.cost_usd"] == pytest.approx(run["usage"]["cost_usd"])

    turns = _children(spans, execution, "turn")
    assert [(t.attributes or {})["loopwright.turn"] for t in turns] == [1, 2]
    chats = [_children(spans, turn, "chat") for turn in turns]
    assert [len(c) for c in chats] == [1, 1]
    first, last = chats[0][0], chats[1][0]
    assert first.name == "chat priced" and first.kind is SpanKind.CLIENT
    llm: dict[str, Any] = dict(first.attributes or {})
    assert llm["gen_ai.operation.name"] == "chat"
    assert llm["gen_ai.provider.name"] == llm["gen_ai.system"] == "scripted"
    assert type(llm["gen_ai.provider.name"]) is str
    assert llm["gen_ai.request.model"] == llm["gen_ai.response.model"] == "priced"
    assert llm["gen_ai.request.max_tokens"] > 0
    assert llm["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert (last.attributes or {})["gen_ai.response.finish_reasons"] == ("end_turn",)
    tokens_in, tokens_out = llm["gen_ai.usage.input_tokens"], llm["gen_ai.usage.output_tokens"]
    assert tokens_in > 0 and tokens_out > 0
    expected = (tokens_in * PRICE["input"] + tokens_out * PRICE["output"]) / 1_000_000
    assert llm["loopwright.llm.cost_usd"] == pytest.approx(expected)

    [tool] = _children(spans, turns[0], "execute_tool")
    assert tool.name == "execute_tool http_request"
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == call_id
    assert (tool.attributes or {})["gen_ai.tool.name"] == "http_request"
    assert tool.status.status_code is StatusCode.UNSET
    assert _children(spans, turns[1], "execute_tool") == []

    # The tool's HTTP call carried the trace on: the callee's parent is the tool call.
    [delivered] = hook.received
    assert delivered.headers["traceparent"] == f"00-{CALLER_TRACE}-{_span_id(tool)}-01"

    # Group commits serve many runs at once: each is a root of its own, linked to the spans
    # of the writes it committed (this run's among them).
    commits = [s for s in spans if s.name == "group_commit boundary-committer"]
    assert commits and all(s.parent is None for s in commits)
    assert all(_trace_id(s) != CALLER_TRACE for s in commits)
    linked = {hex_id(link.context.span_id, 16) for s in commits for link in s.links}
    ours = {_span_id(s) for s in [execution, *turns, tool]}
    assert ours & linked and linked <= ours
    sizes = [(s.attributes or {})["loopwright.group_commit.size"] for s in commits]
    assert all(isinstance(n, int) and n >= 1 for n in sizes)


async def test_a_child_run_joins_its_parents_trace_under_the_call_that_spawned_it(
    traced_settings: Settings, clean_db: AsyncEngine
) -> None:
    with recorded_spans() as recorded:
        async with _client(traced_settings) as (http, _app):
            child_agent = await _create_agent(http, _agent("child", [{"text": "hi"}], ["echo"]))
            spawn = {"runs": [{"input": "help", "agent_id": child_agent}]}
            script = [
                {"tool_calls": [{"name": "spawn_child_runs", "input": spawn}]},
                {"text": "spawned"},
            ]
            parent_agent = await _create_agent(http, _agent("parent", script, ["spawn_child_runs"]))
            parent = await _run_to_the_end(http, parent_agent)
            [child] = (await http.get("/v1/runs", params={"agent_id": child_agent})).json()["items"]
            spans = await recorded.wait_for(_runs_ended(2))
            assert (await http.get(f"/v1/runs/{child['id']}/wait")).json()["trace_id"] == (
                CALLER_TRACE
            )

    assert parent["trace_id"] == child["trace_id"] == CALLER_TRACE
    [spawning] = [s for s in spans if s.name == "execute_tool spawn_child_runs"]
    [child_execution] = [s for s in spans if s.name == "invoke_agent child"]
    assert _trace_id(child_execution) == CALLER_TRACE
    assert _parent_id(child_execution) == _span_id(spawning)
    assert (child_execution.attributes or {})["loopwright.run.id"] == child["id"]


async def test_retries_are_events_of_the_llm_call_and_a_failed_tool_is_an_error(
    traced_settings: Settings, clean_db: AsyncEngine
) -> None:
    overloaded = {"status": 529, "message": "Overloaded", "headers": {"retry-after": "0"}}
    script = [
        {"tool_calls": [{"name": "http_request", "input": {"url": "ftp://example.com/x"}}]},
        {"text": "done", "fault": overloaded},
    ]
    with recorded_spans() as recorded:
        async with _client(traced_settings) as (http, _app):
            agent_id = await _create_agent(http, _agent("flaky", script, ["http_request"]))
            await _run_to_the_end(http, agent_id)
            spans = await recorded.wait_for(_runs_ended(1))

    [tool] = [s for s in spans if s.name == "execute_tool http_request"]
    assert tool.status.status_code is StatusCode.ERROR
    assert "only http, https allowed" in (tool.status.description or "")
    assert (tool.attributes or {})["error.type"] == "tool_error"
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert [[e.name for e in c.events] for c in chats] == [[], ["agent.llm.retry"]]
    retry = chats[1].events[0].attributes or {}
    assert (retry["class"], retry["http_status"], retry["attempt"]) == ("overloaded", 529, 1)
    assert chats[1].status.status_code is StatusCode.UNSET  # the call succeeded in the end


async def test_with_tracing_off_nothing_is_traced_stored_or_sent(
    traced_settings: Settings,
    clean_db: AsyncEngine,
    hook: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)  # as by default: the app decides when it is made
    assert not tracing.enabled()
    script = [
        {"tool_calls": [{"name": "http_request", "input": {"url": hook.hook(), "method": "POST"}}]},
        {"text": "done"},
    ]
    async with _client(traced_settings) as (http, app):
        agent_id = await _create_agent(http, _agent("quiet", script, ["http_request"]))
        run = await _run_to_the_end(http, agent_id)
        # No instrumentation in the request path at all.
        assert not getattr(app, "_is_instrumented_by_opentelemetry", False)
    assert run["trace_id"] is None
    [delivered] = hook.received
    assert "traceparent" not in delivered.headers
    stored = await _stored_context(clean_db, run["id"])
    assert stored is None


async def _stored_context(db: AsyncEngine, run_id: str) -> Any:
    async with db.connect() as conn:
        value = (
            await conn.execute(
                text("SELECT trace_context FROM runs WHERE id = :id"), {"id": run_id}
            )
        ).scalar_one()
    return json.loads(value) if isinstance(value, str) else value


async def test_a_webhook_deliverys_run_joins_the_trace_of_the_delivery(
    traced_settings: Settings, clean_db: AsyncEngine
) -> None:
    with recorded_spans() as recorded:
        async with _client(traced_settings) as (http, _app):
            trigger = await webhook_trigger(http)
            delivered = await deliver(
                http, trigger, body_of(ISSUE), headers={"traceparent": TRACEPARENT}
            )
            assert delivered.status_code == 202, delivered.text
            run_id = delivered.json()["run_id"]
            run = (await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})).json()
            spans = await recorded.wait_for(_runs_ended(1))

    assert run["trace_id"] == CALLER_TRACE
    [request] = [s for s in spans if s.name == "POST /v1/hooks/{trigger_id}"]
    assert (_trace_id(request), _parent_id(request)) == (CALLER_TRACE, CALLER_SPAN)
    [execution] = _children(spans, request, "invoke_agent")
    assert (execution.attributes or {})["loopwright.run.id"] == run_id


async def test_a_caller_that_did_not_sample_its_trace_gets_no_spans_of_the_run(
    traced_settings: Settings, clean_db: AsyncEngine, hook: Receiver
) -> None:
    script = [
        {"tool_calls": [{"name": "http_request", "input": {"url": hook.hook(), "method": "POST"}}]},
        {"text": "done"},
    ]
    unsampled = f"00-{CALLER_TRACE}-{CALLER_SPAN}-00"
    with recorded_spans() as recorded:
        async with _client(traced_settings) as (http, _app):
            agent_id = await _create_agent(http, _agent("unsampled", script, ["http_request"]))
            created = await http.post(
                "/v1/runs",
                json={"agent_id": agent_id, "input": "go"},
                headers={"traceparent": unsampled},
            )
            run_id = created.json()["id"]
            run = (await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})).json()
        spans = recorded.finished  # the server has stopped: its workers' loops have ended

    # The sampling decision travels with the stored context (`parentbased_always_on`).
    assert run["status"] == "completed" and run["trace_id"] == CALLER_TRACE
    assert [s.name for s in spans if _trace_id(s) == CALLER_TRACE] == []
    [delivered] = hook.received
    assert delivered.headers["traceparent"].startswith(f"00-{CALLER_TRACE}-")
    assert delivered.headers["traceparent"].endswith("-00")
