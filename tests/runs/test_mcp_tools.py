"""Agents' MCP tool servers in the agent loop, on the real database, against a real MCP
server (tests/support/mcp_stdio_server.py) run as a subprocess over stdio, or over
streamable HTTP: tools listed at the run's start and recorded, read-only calls that ask
nobody, side effects that wait for approval and run once, a server that crashes, hangs or
answers an error, and no server process left behind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentCreate, AgentPatch, AgentRead
from app.core.breakers import CircuitBreakerPolicy
from app.core.model_config import ModelConfig, ScriptedTurn
from app.core.states import RunStatus, StopReason
from app.runs.loop.retry import RunRetryPolicy
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from app.runs.tools.mcp.hub import McpHub
from app.runs.tools.mcp.policy import McpPolicy
from tests.support.mcp_servers import PYTHON, alive, calls, http_server, started, stdio_server
from tests.support.runs import (
    SAFETY_S,
    Harness,
    assert_valid_transcript,
    call,
    say,
    tool_results,
)

TOKEN = "t0ken"
POLICY = McpPolicy(
    stdio_commands=(PYTHON,),
    allowed_networks=("127.0.0.0/8",),
    secret_env=("MCP_TEST_TOKEN",),
    environ=lambda: {"MCP_TEST_TOKEN": TOKEN},
)
# Opens once two of the last two calls of a server failed.
BREAKER = CircuitBreakerPolicy(window_calls=2, min_calls=2, failure_rate=1.0, cooldown_s=600)


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db, mcp=McpHub(POLICY), breaker_policy=BREAKER) as harness:
        yield harness
        assert harness.deps.mcp.open_connections == 0


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


async def agent(
    h: Harness,
    *script: ScriptedTurn,
    servers: list[dict[str, Any]],
    auto_approve: list[str] | None = None,
) -> AgentRead:
    return await h.agents.create(
        AgentCreate.model_validate(
            {
                "name": "mcp-agent",
                "mcp_servers": servers,
                "auto_approve": auto_approve or [],
                "model": ModelConfig(provider="scripted", name="s", script=list(script)),
            }
        )
    )


def offered(h: Harness, agent: AgentRead, turn: int) -> list[str]:
    return [tool.name for tool in h.llm_calls[agent.id][turn].request.tools]


async def recorded_tools(h: Harness, run: RunRead) -> dict[str, Any] | None:
    async with h.sessionmaker() as session:
        return await history.mcp_tools(session, run.id)


async def results(h: Harness, run: RunRead) -> list[tuple[str, bool]]:
    return [(r.content, r.is_error) for r in tool_results(await h.messages(run.conversation_id))]


async def test_a_read_only_tool_asks_nobody_and_its_server_stops_with_the_run(
    h: Harness, log: Path
) -> None:
    a = await agent(
        h, call("files__echo", text="hi"), say("Done."), servers=[stdio_server("files", log)]
    )
    done = await h.finish(a)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "Done.")
    assert await results(h, done) == [("echo: hi", False)]
    assert [c["arguments"] for c in calls(log, "echo")] == [{"text": "hi"}]
    # Offered as the agent's own (it lists none in `tools`), after the journal tools.
    names = offered(h, a, 0)
    assert {"files__echo", "files__append_line", "files__refuse"} <= set(names)
    assert offered(h, a, 1) == names
    record = await recorded_tools(h, done)
    assert record is not None and record["files"]["transport"] == "stdio"
    echo = next(t for t in record["files"]["tools"] if t["name"] == "files__echo")
    assert (echo["tool"], echo["read_only"]) == ("echo", True)
    listed = [e for e in await h.events(done.id) if e.type == "agent.mcp.tools_listed"]
    assert [e.data["server"] for e in listed] == ["files"]
    assert listed[0].data["tools"] == [t["name"] for t in record["files"]["tools"]]
    [pid] = started(log)
    assert not alive(pid)


async def test_a_side_effect_waits_for_approval_then_runs_once_on_a_fresh_server(
    h: Harness, log: Path
) -> None:
    a = await agent(
        h,
        call("files__append_line", line="ship it"),
        say("Shipped."),
        servers=[stdio_server("files", log)],
    )
    paused = await h.finish(a)
    assert paused.status is RunStatus.WAITING_ON_HUMAN
    assert paused.waiting_for is not None and paused.waiting_for.reason == "approval"
    assert calls(log, "append_line") == []  # nothing ran before a person said yes
    [first] = started(log)
    assert not alive(first)  # a run waiting on a person holds no server

    await h.approvals.approve(str(paused.waiting_for.approval_id), "alice")
    await h.drain()
    done = await h.run(paused.id)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "Shipped.")
    assert [c["arguments"] for c in calls(log, "append_line")] == [{"line": "ship it"}]
    assert await results(h, done) == [("appended 'ship it'", False)]
    # The resumed run started the server for its call, without listing anew.
    first_again, second = started(log)
    assert first_again == first and second != first and not alive(second)
    types = await h.event_types(done.id)
    assert types.count("agent.mcp.tools_listed") == 1
    assert_valid_transcript(await h.messages(done.conversation_id))


async def test_an_auto_approved_side_effect_runs_at_once(h: Harness, log: Path) -> None:
    a = await agent(
        h,
        call("files__append_line", line="x"),
        say("Done."),
        servers=[stdio_server("files", log)],
        auto_approve=["files__append_line"],
    )
    done = await h.finish(a)
    assert done.status is RunStatus.COMPLETED
    assert len(calls(log, "append_line")) == 1


async def test_a_resumed_run_keeps_the_tools_it_listed_though_the_server_lists_others(
    h: Harness, log: Path
) -> None:
    a = await agent(
        h,
        call("files__append_line", line="x"),
        say("Finished."),
        servers=[stdio_server("files", log)],
    )
    paused = await h.finish(a)
    assert paused.waiting_for is not None
    before = offered(h, a, 0)
    # The server is upgraded while the run waits: it lists `newer`, no `append_line`.
    upgraded = stdio_server("files", log, env={"MCP_TEST_VARIANT": "b"})
    await h.agents.update(
        a.id, AgentPatch.model_validate({"mcp_servers": [upgraded]}), expected_version=None
    )

    await h.approvals.approve(str(paused.waiting_for.approval_id), "alice")
    await h.drain()
    done = await h.run(paused.id)

    assert done.status is RunStatus.COMPLETED
    assert offered(h, a, 1) == before  # the tools the run began with
    assert "files__newer" not in before
    # The server no longer has the tool: its error is the call's result, for the model.
    [(content, is_error)] = await results(h, done)
    assert is_error and "append_line" in content
    assert [r["variant"] for r in calls(log, "started")] == ["a", "b"]


async def test_a_server_that_crashes_is_a_tool_error_and_its_breaker_opens(
    h: Harness, log: Path
) -> None:
    a = await agent(
        h,
        call("files__crash"),
        call("files__echo", text="still there?"),
        say("It broke."),
        servers=[stdio_server("files", log)],
    )
    done = await h.finish(a)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "It broke.")
    (crashed, crashed_error), (refused, refused_error) = await results(h, done)
    assert crashed_error and "stopped during the call" in crashed
    assert "about to crash" in crashed  # what the server said on stderr
    assert refused_error and "circuit breaker is open" in refused
    # A read-only call may be sent again: retried once, on a restarted server, which
    # crashed too; then the server's breaker was open and nothing started it again.
    assert len(calls(log, "crash")) == 2
    assert calls(log, "echo") == []
    pids = started(log)
    assert len(pids) == 2 and not any(map(alive, pids))
    events = await h.events(done.id)
    [opened] = [e for e in events if e.type == "agent.breaker.opened"]
    assert opened.data["breaker"] == f"tool:mcp:{a.id}/files"
    failed = [e.data for e in events if e.type == "agent.mcp.server_failed"]
    assert [f["stage"] for f in failed] == ["call", "call"]
    assert [e.type for e in events].count("agent.mcp.server_restarted") == 1


async def test_a_crash_on_a_call_that_may_repeat_is_retried_on_a_restarted_server(
    h: Harness, log: Path, tmp_path: Path
) -> None:
    server = stdio_server("files", log, env={"MCP_TEST_MARKER": str(tmp_path / "crashed")})
    a = await agent(h, call("files__crash_once"), say("Done."), servers=[server])
    done = await h.finish(a)
    assert done.status is RunStatus.COMPLETED
    assert await results(h, done) == [("recovered", False)]
    assert len(calls(log, "crash_once")) == 2
    assert "agent.tool.retry" in await h.event_types(done.id)


async def test_a_hung_call_ends_at_the_servers_timeout(h: Harness, log: Path) -> None:
    a = await agent(
        h,
        call("files__freeze"),
        call("files__echo", text="again"),
        say("Done."),
        servers=[stdio_server("files", log, timeout_s=0.5)],
        auto_approve=["files__freeze"],
    )
    began = time.monotonic()
    done = await h.finish(a)
    took = time.monotonic() - began

    assert done.status is RunStatus.COMPLETED
    (frozen, frozen_error), echoed = await results(h, done)
    assert frozen_error and "did not answer within 0.5 s" in frozen
    assert echoed == ("echo: again", False)  # on a server started afresh
    assert len(calls(log, "freeze")) == 1  # a side effect is never retried
    assert took < 15
    pids = started(log)
    assert len(pids) == 2 and not any(map(alive, pids))
    failed = [e.data for e in await h.events(done.id) if e.type == "agent.mcp.server_failed"]
    assert [f["stage"] for f in failed] == ["timeout"]


async def test_an_error_the_tool_reports_goes_to_the_model_and_is_not_retried(
    h: Harness, log: Path
) -> None:
    a = await agent(
        h, call("files__refuse", reason="nope"), say("OK."), servers=[stdio_server("files", log)]
    )
    done = await h.finish(a)
    [(content, is_error)] = await results(h, done)
    assert is_error and "refuse" in content
    assert len(calls(log, "refuse")) == 1  # the server answered: nothing to retry
    assert "agent.mcp.server_failed" not in await h.event_types(done.id)


async def test_only_the_tools_the_agent_names_are_offered(h: Harness, log: Path) -> None:
    server = stdio_server("files", log, tools=["echo"])
    a = await agent(h, call("files__refuse"), say("OK."), servers=[server])
    done = await h.finish(a)
    assert [n for n in offered(h, a, 0) if n.startswith("files__")] == ["files__echo"]
    [(content, is_error)] = await results(h, done)
    assert is_error and "unknown tool 'files__refuse'" in content


@pytest.mark.parametrize(
    ("server", "retryable", "says"),
    [
        (
            {"command": "/bin/true"},
            False,
            "not one the operator lets agents run (LOOPWRIGHT_MCP__STDIO_COMMANDS)",
        ),
        (
            {"env": {"KEY": "${HOME}"}},
            False,
            "${HOME} is not a variable the operator lets agents reference",
        ),
        ({"args": ["-c", "import sys; sys.exit(2)"]}, True, "could not start"),
    ],
)
async def test_a_server_that_cannot_start_fails_the_run_saying_why(
    clean_db: AsyncEngine, log: Path, server: dict[str, Any], retryable: bool, says: str
) -> None:
    """Retried with backoff when waiting may help; failed at once when the operator must
    change something."""
    retries = RunRetryPolicy(max_retries=1)
    async with Harness.open(clean_db, mcp=McpHub(POLICY), run_retry=retries) as h:
        config = stdio_server("files", log) | server
        a = await agent(h, call("files__echo", text="hi"), say("Done."), servers=[config])
        run = await h.finish(a)
        assert h.llm_calls.get(a.id) is None  # no model call was made without its tools
        assert h.deps.mcp.open_connections == 0
    [error] = run.error_log
    assert error.code == StopReason.TOOLS_UNAVAILABLE
    assert error.message.startswith("MCP server 'files': ") and says in error.message
    if retryable:
        assert (run.status, run.not_before is not None) == (RunStatus.QUEUED, True)
    else:
        assert (run.status, run.stop_reason) == (RunStatus.FAILED, StopReason.TOOLS_UNAVAILABLE)


async def test_a_missing_command_is_a_configuration_error(h: Harness, log: Path) -> None:
    hub = McpHub(McpPolicy(stdio_commands=("*",)))
    h.deps.mcp = hub
    config = stdio_server("files", log) | {"command": "/nonexistent/mcp-server"}
    a = await agent(h, say("Done."), servers=[config])
    failed = await h.finish(a)
    assert failed.stop_reason is StopReason.TOOLS_UNAVAILABLE
    assert failed.error is not None  # (the error's paths are left out: `[path]`)
    assert "cannot run '[path]': No such file or directory" in failed.error.message
    assert hub.open_connections == 0


async def test_an_http_server_gets_the_agents_headers_with_the_secret_resolved(
    h: Harness, log: Path
) -> None:
    async with http_server(TOKEN, log) as url:
        server = {
            "name": "search",
            "transport": "http",
            "url": url,
            "headers": {"X-Test-Token": "${MCP_TEST_TOKEN}"},
        }
        a = await agent(h, call("search__echo", text="over http"), say("Done."), servers=[server])
        done = await h.finish(a)
        wrong = await agent(
            h, say("Done."), servers=[server | {"headers": {"X-Test-Token": "guess"}}]
        )
        refused = await h.finish(wrong)

    assert done.status is RunStatus.COMPLETED
    assert await results(h, done) == [("echo: over http", False)]
    assert refused.stop_reason is StopReason.TOOLS_UNAVAILABLE
    assert refused.error is not None and "answered HTTP 401" in refused.error.message


async def test_an_http_server_on_a_private_address_needs_the_operators_leave(
    h: Harness, log: Path
) -> None:
    h.deps.mcp = McpHub(McpPolicy())  # public addresses only
    async with http_server(TOKEN, log) as url:
        a = await agent(
            h, say("Done."), servers=[{"name": "search", "transport": "http", "url": url}]
        )
        refused = await h.finish(a)
    assert refused.stop_reason is StopReason.TOOLS_UNAVAILABLE
    assert refused.error is not None
    assert "refusing to connect to 127.0.0.1: loopback address" in refused.error.message


async def test_a_failed_start_of_one_server_stops_the_others(h: Harness, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    broken = stdio_server("broken", bad) | {"args": ["-c", "import sys; sys.exit(2)"]}
    a = await agent(h, say("Done."), servers=[stdio_server("files", good), broken])
    failed = await h.finish(a)
    assert failed.stop_reason is StopReason.TOOLS_UNAVAILABLE
    assert failed.error is not None and "MCP server 'broken'" in failed.error.message
    [pid] = started(good)
    assert not alive(pid)


async def test_a_run_cancelled_during_a_call_stops_its_server(h: Harness, log: Path) -> None:
    a = await agent(
        h,
        call("files__hang"),
        say("Never said."),
        servers=[stdio_server("files", log, timeout_s=1)],
        auto_approve=["files__hang"],
    )
    run = await h.start(a)
    draining = h.drain_in_background()
    async with asyncio.timeout(SAFETY_S):
        while not calls(log, "hang"):  # noqa: ASYNC110 - another process's file: no event
            await asyncio.sleep(0.02)
    await h.runs.cancel(run.id)
    await draining
    done = await h.run(run.id)
    assert done.status is RunStatus.CANCELLED
    # The call under way ran to its end (its time-out), as any tool's does.
    [(content, is_error)] = await results(h, done)
    assert is_error and "did not answer within 1 s" in content
    [pid] = started(log)
    assert not alive(pid)
