"""The three parts of issue 18 together, as a user would combine them: an agent on a local
model server (a real server speaking Chat Completions) calls a tool of a real MCP server
(a process the worker starts over stdio), and the run is one trace under the request that
created it: the request, the run's execution, each turn, each chat call with the GenAI
attributes, and the MCP tool's call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.chat_completions_wire import Reply, ToolCall, chat_completions_wire
from tests.support.mcp_servers import PYTHON, alive, calls, started, stdio_server
from tests.support.server import make_settings, running_server
from tests.support.traces import hex_id, recorded_spans

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
LOCAL = "llama3.1:8b"


def _ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    """(trace id, span id, parent span id) in hex."""
    assert span.context is not None
    parent = None if span.parent is None else hex_id(span.parent.span_id, 16)
    return hex_id(span.context.trace_id, 32), hex_id(span.context.span_id, 16), parent


def _under(spans: list[ReadableSpan], parent: ReadableSpan, prefix: str) -> list[ReadableSpan]:
    """The children of `parent` whose names start with `prefix`, in the order they began."""
    found = [s for s in spans if _ids(s)[2] == _ids(parent)[1] and s.name.startswith(prefix)]
    return sorted(found, key=lambda s: s.start_time or 0)


async def test_a_local_model_calls_an_mcp_tool_in_one_trace(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    log = tmp_path / "mcp-calls.jsonl"
    async with chat_completions_wire() as wire:
        wire.plan(
            Reply.tools(
                ToolCall("files__echo", {"text": "hello"}, id="call_mcp_1"),
                prompt_tokens=300,
                completion_tokens=20,
            ),
            Reply("The server said: echo: hello", prompt_tokens=340, completion_tokens=9),
        )
        settings = make_settings(database_url, mcp={"stdio_commands": [PYTHON]})
        agent = {
            "name": "local-librarian",
            "system_prompt": "Use the files server.",
            "mcp_servers": [stdio_server("files", log)],
            "model": {"provider": "openai", "name": LOCAL, "base_url": wire.base_url},
        }
        with recorded_spans() as recorded:
            async with (
                running_server(settings) as url,
                httpx.AsyncClient(base_url=url, timeout=40) as http,  # outwaits its 30 s /wait
            ):
                created = await http.post("/v1/agents", json=agent)
                assert created.status_code == 201, created.text
                assert created.json()["warnings"] == []
                response = await http.post(
                    "/v1/runs",
                    json={"agent_id": created.json()["id"], "input": "Echo hello."},
                    headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                )
                assert response.status_code == 202, response.text
                run_id = response.json()["id"]
                waited = await http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 30})
                run: dict[str, Any] = waited.json()
                spans = await recorded.wait_for(
                    lambda found: any(s.name.startswith("invoke_agent") for s in found)
                )

    # The run: the local model asked for the MCP tool, got its answer, and finished.
    assert (run["status"], run["result"]) == ("completed", "The server said: echo: hello")
    assert run["trace_id"] == CALLER_TRACE
    assert run["usage"]["cost_usd"] is None and run["usage"]["unpriced_calls"] == 2
    assert [c["arguments"] for c in calls(log, "echo")] == [{"text": "hello"}]
    first, second = wire.requests
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert offered["files__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    assert second.body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_mcp_1",
        "content": "echo: hello",
    }
    assert not any(map(alive, started(log)))  # the server stopped with the run

    # The trace: request → run → turns → (chat, MCP tool call) and (chat).
    [request] = [s for s in spans if s.name == "POST /v1/runs"]
    assert request.kind is SpanKind.SERVER
    assert _ids(request)[0] == CALLER_TRACE and _ids(request)[2] == CALLER_SPAN
    [execution] = _under(spans, request, "invoke_agent")
    assert (execution.attributes or {})["loopwright.run.id"] == run_id
    turns = _under(spans, execution, "turn")
    assert len(turns) == 2
    [asked], [answered] = (_under(spans, turn, "chat") for turn in turns)
    for chat, tokens in ((asked, (300, 20)), (answered, (340, 9))):
        attributes = dict(chat.attributes or {})
        assert chat.name == f"chat {LOCAL}"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == LOCAL
        usage = (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"])
        assert usage == tokens
        assert "loopwright.llm.cost_usd" not in attributes  # a local model has no price
    assert (asked.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_use",)
    [tool] = _under(spans, turns[0], "execute_tool")
    assert tool.name == "execute_tool files__echo"
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == "call_mcp_1"
    assert _under(spans, turns[1], "execute_tool") == []
    assert {_ids(s)[0] for s in [execution, *turns, asked, answered, tool]} == {CALLER_TRACE}
