"""The `loopwright` client verbs, run as a person runs them (a subprocess of the installed
command) against a real server: what they print and how they exit."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cli import at_terminal, cli
from tests.support.factories import make_agent, settle, start_run, unique
from tests.support.server import make_settings, running_server

ASKS = (
    {"tool_calls": [{"name": "ask_human", "input": {"question": "Which colour?"}}]},
    {"text": "Blue it is."},
)
POSTS = {"method": "POST", "url": "https://example.com/orders", "body": "{}"}


async def _asker(client: httpx.AsyncClient) -> dict[str, Any]:
    """An agent that asks which colour, then answers: its representation (a unique name)."""
    return await make_agent(client, *ASKS, name=unique("asker"), tools=["ask_human"])


async def _poster(client: httpx.AsyncClient, then: str) -> dict[str, Any]:
    """An agent whose first call POSTs an order (a call that needs an approval), then says
    `then`."""
    call = {"tool_calls": [{"name": "http_request", "input": POSTS}]}
    return await make_agent(
        client, call, {"text": then}, name=unique("poster"), tools=["http_request"]
    )


async def test_run_prints_every_step_and_exits_0_when_it_completes(
    client: httpx.AsyncClient, base_url: str
) -> None:
    done = await cli(base_url, "run", "hello")
    assert done.code == 0, done
    lines = done.out.splitlines()
    assert lines[0].startswith("run run_") and "(queued)" in lines[0]
    assert '  → echo {"note": "thinking out loud"}' in lines
    assert '  ✓ {"note": "thinking out loud"}' in lines
    assert any(line.startswith("assistant: Hello from the Loopwright demo agent") for line in lines)
    assert lines[-1] == "[completed] end_turn"
    assert "· agent_run.started" in done.out  # the other events are printed too


async def test_runs_lists_newest_first_with_agent_stop_and_error_and_pages(
    client: httpx.AsyncClient, base_url: str
) -> None:
    # Each list is filtered to this test's agents: the server's other runs are not its own.
    first = await _asker(client)
    older = await start_run(client, first["id"])
    keyless = await make_agent(
        client, name=unique("keyless"), model={"provider": "anthropic", "name": "claude-x"}
    )
    earlier = await start_run(client, keyless["id"])
    await settle(client, earlier["id"])
    newer = await start_run(client, keyless["id"])
    await settle(client, newer["id"])

    page = await cli(base_url, "runs", "--agent", keyless["name"], "--limit", "1")
    assert page.code == 0, page
    header, row, more = page.out.splitlines()
    assert header.split() == ["RUN", "STATUS", "AGENT", "STOP", "CREATED", "(UTC)", "ERROR"]
    assert row.split()[:4] == [newer["id"], "failed", keyless["name"], "provider_unavailable"]
    assert "no Anthropic API key" in row
    cursor = more.removeprefix("more: loopwright runs --cursor ")
    rest = await cli(
        base_url, "runs", "--agent", keyless["name"], "--limit", "1", "--cursor", cursor
    )
    assert rest.out.splitlines()[1].split()[:3] == [earlier["id"], "failed", keyless["name"]]

    oldest = await cli(base_url, "runs", "--oldest", "--agent", first["name"])
    assert [line.split()[:3] for line in oldest.out.splitlines()[1:]] == [
        [older["id"], "waiting_on_human", first["name"]]
    ]
    by_id = await cli(base_url, "runs", "--oldest", "--agent", first["id"])  # an id as well
    assert by_id.out == oldest.out


async def test_a_question_is_asked_at_a_terminal_and_the_answer_sent(
    client: httpx.AsyncClient, base_url: str
) -> None:
    asker = await _asker(client)
    done = await at_terminal(
        base_url, "run", "--agent", asker["name"], "go", answers=[("> ", "blue")]
    )
    assert done.code == 0, done.out
    assert "? Which colour?" in done.out and "Blue it is." in done.out
    run_id = done.out.split()[1]
    shown = await cli(base_url, "show", run_id)
    assert "user: go" in shown.out
    assert '  → ask_human {"question": "Which colour?"}' in shown.out
    assert "  ✓ blue" in shown.out and "assistant: Blue it is." in shown.out


async def test_without_a_terminal_a_waiting_run_exits_5_and_says_how_to_answer(
    client: httpx.AsyncClient, base_url: str
) -> None:
    asker = await _asker(client)
    waiting = await cli(base_url, "run", "--agent", asker["name"], "go")
    assert waiting.code == 5, waiting
    run_id = waiting.out.split()[1]
    assert f"answer it with: loopwright answer {run_id} 'your answer'" in waiting.out

    answered = await cli(base_url, "answer", run_id, "red", "--follow")
    assert answered.code == 0, answered
    assert answered.out.splitlines()[-1] == "[completed] end_turn"


async def test_cancel_and_the_exit_code_of_a_cancelled_run(
    client: httpx.AsyncClient, base_url: str
) -> None:
    slow = await make_agent(client, {"text": "late", "latency_ms": 30_000})
    run = await start_run(client, slow["id"])
    cancelled = await cli(base_url, "cancel", run["id"])
    assert cancelled.code == 0, cancelled
    followed = await cli(base_url, "follow", run["id"], timeout_s=20)
    assert followed.code == 3, followed
    assert followed.out.splitlines()[-1] == "[cancelled] cancelled"


async def test_approvals_are_listed_and_rejected_from_the_command_line(
    client: httpx.AsyncClient, base_url: str
) -> None:
    poster = await _poster(client, "ok, not sent")
    run = await start_run(client, poster["id"])
    approval_id = (await settle(client, run["id"]))["waiting_for"]["approval_id"]

    # Every pending approval is listed: this test's is the one for its run.
    listed = await cli(base_url, "approvals")
    assert listed.code == 0, listed
    rows = listed.out.splitlines()[1:]
    mine = [row.split()[:4] for row in rows if run["id"] in row.split()]
    assert mine == [[approval_id, "tool_call", "pending", run["id"]]], listed
    refused = await cli(base_url, "approvals", "reject", approval_id)
    assert refused.code == 2 and "--reason" in refused.err
    rejected = await cli(base_url, "approvals", "reject", approval_id, "--reason", "not today")
    assert rejected.code == 0 and rejected.out.strip() == f"approval {approval_id}: rejected"
    assert (await settle(client, run["id"]))["result"] == "ok, not sent"


async def test_an_approval_is_decided_at_a_terminal(
    client: httpx.AsyncClient, base_url: str
) -> None:
    poster = await _poster(client, "done")
    done = await at_terminal(
        base_url,
        "run",
        "--agent",
        poster["name"],
        "go",
        answers=[("Approve this call? [y/n] ", "n"), ("Why not? ", "wrong shop")],
    )
    assert done.code == 0, done.out
    run_id = done.out.split()[1]
    approvals = (await client.get("/v1/approvals", params={"run_id": run_id})).json()["items"]
    assert [(a["status"], a["reason"]) for a in approvals] == [("rejected", "wrong shop")]


async def test_agents_are_created_from_yaml_with_mistakes_caught_at_once(
    client: httpx.AsyncClient, base_url: str, tmp_path: Path
) -> None:
    spec = tmp_path / "agent.yaml"
    name = unique("claude")
    spec.write_text(
        f"name: {name}\nmodel: {{provider: anthropic, name: claude-x}}\n"
        "tools: [http_request, nope]\n"
    )
    refused = await cli(base_url, "agents", "create", str(spec))
    assert refused.code == 6
    assert "body.tools[1]: no tool is named 'nope'; known: " in refused.err
    assert "ask_human" in refused.err and "Traceback" not in refused.err

    spec.write_text(spec.read_text().replace(", nope", ""))
    created = await cli(base_url, "agents", "create", str(spec))
    assert created.code == 0, created
    assert (
        "warning: no Anthropic API key is configured: set LOOPWRIGHT_LLM__ANTHROPIC__API_KEY"
        in (created.out)
    )
    listed = await cli(base_url, "agents")  # every agent: this test's is the one named so
    mine = [line.split()[1:] for line in listed.out.splitlines()[1:] if name in line.split()]
    assert mine == [[name, "anthropic/claude-x", "http_request"]]

    failed = await cli(base_url, "run", "--agent", name, "hi", timeout_s=20)
    assert failed.code == 1, failed  # at once: a missing key is not retried with backoff
    assert "LOOPWRIGHT_LLM__ANTHROPIC__API_KEY" in failed.out


async def test_tools_lists_each_tool_with_its_input(
    client: httpx.AsyncClient, base_url: str
) -> None:
    listed = await cli(base_url, "tools")
    assert listed.code == 0, listed
    lines = listed.out.splitlines()
    at = lines.index("ask_human: idempotent; never asks a person")
    assert lines[at + 2] == "  input: {question: string}"
    assert any(
        line.startswith("http_request: idempotent or not by its input; a side-effecting call")
        for line in lines
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_no_server_at_the_url_is_one_line_that_says_how_to_start_one() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    done = await cli(url, "runs")
    assert done.code == 7
    assert done.err.splitlines() == [
        f"loopwright: cannot reach a Loopwright server at {url} (ConnectError). Start one with "
        "`make serve` (or `loopwright serve`), or point LOOPWRIGHT_URL at yours."
    ]


@pytest.mark.parametrize("how", ["flag", "environment"])
async def test_the_api_key_comes_from_a_flag_or_the_environment(
    database_url: str, clean_db: AsyncEngine, how: str
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["s3cret"]})
    async with running_server(settings) as url:
        assert (await cli(url, "runs")).code == 6  # no key: 401
        if how == "flag":
            done = await cli(url, "runs", "--api-key", "s3cret")
        else:
            done = await cli(url, "runs", env={"LOOPWRIGHT_API_KEY": "s3cret"})
    assert done.code == 0, done
    assert done.out.split() == ["RUN", "STATUS", "AGENT", "STOP", "CREATED", "(UTC)", "ERROR"]


async def test_a_settings_mistake_is_one_line_per_setting_without_a_traceback() -> None:
    bad = {"LOOPWRIGHT_AUTH__API_KEYS": "not-json"}
    unreadable = await cli("http://unused", "serve", env=bad)
    assert unreadable.code == 2
    assert unreadable.err.splitlines() == [
        "loopwright: LOOPWRIGHT_AUTH__API_KEYS: cannot be read; lists and objects are written "
        """as JSON, e.g. LOOPWRIGHT_AUTH__API_KEYS='["key-1", "key-2"]'"""
    ]
    wrong = {"LOOPWRIGHT_WORKERS__CAPACITY": "-1", "LOOPWRIGHT_SERVER__PORT": "x"}
    invalid = await cli("http://unused", "serve", env=wrong)
    assert invalid.code == 2
    assert sorted(invalid.err.splitlines()) == [
        "loopwright: LOOPWRIGHT_SERVER__PORT: Input should be a valid integer, unable to parse "
        "string as an integer (got 'x')",
        "loopwright: LOOPWRIGHT_WORKERS__CAPACITY: Input should be greater than or equal to 1 "
        "(got '-1')",
    ]
    # The standard OpenTelemetry variables are read at start-up too (app/telemetry/tracing.py).
    grpc = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    refused = await cli("http://unused", "worker", env=grpc)
    assert refused.code == 2
    assert refused.err.splitlines() == [
        "loopwright: OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported; traces are exported "
        "over OTLP/HTTP (http/protobuf, port 4318)"
    ]


async def test_history_lists_a_runs_steps_and_fork_starts_from_one(
    client: httpx.AsyncClient, base_url: str
) -> None:
    done = await cli(base_url, "run", "hello")
    assert done.code == 0, done
    run_id = done.out.split()[1]

    steps = await cli(base_url, "history", run_id)
    assert steps.code == 0, steps
    header, *rows, hint = steps.out.splitlines()
    assert header.split()[:3] == ["STEP", "KIND", "STATUS"]
    kinds = [row.split()[1] for row in rows]
    assert kinds == ["note", "input", "llm_response", "tool_result", "final"]
    assert "→ echo" in rows[2] and '✓ {"note": "thinking out loud"}' in rows[3]
    assert hint == f"fork from a step: loopwright fork {run_id} STEP [--input TEXT]"

    forked = await cli(base_url, "fork", run_id, "5", "--input", "and again?")
    assert forked.code == 0, forked
    assert forked.out.splitlines()[0].endswith(f"forked from {run_id} after step 5")
    assert forked.out.splitlines()[-1] == "[completed] end_turn"

    refused = await cli(base_url, "fork", run_id, "99")
    assert refused.code != 0
    assert "from_seq" in refused.out + refused.err


async def test_run_at_a_time_queues_a_delayed_run_and_returns(
    client: httpx.AsyncClient, base_url: str
) -> None:
    started = await cli(base_url, "run", "later", "--at", "2099-01-01T09:00:00Z", "--detach")
    assert started.code == 0, started
    assert started.out.strip().endswith("(queued, not before 2099-01-01T09:00:00Z)")
    run_id = started.out.split()[1]
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["not_before"]) == ("queued", "2099-01-01T09:00:00Z")


async def test_a_plan_execute_run_prints_its_plan_as_it_moves_and_show_lists_it(
    client: httpx.AsyncClient, base_url: str
) -> None:
    plan = {
        "steps": [
            {"goal": "find the file", "acceptance_criteria": ["its path is known"]},
            {"goal": "read it", "acceptance_criteria": ["its first line is quoted"]},
        ]
    }
    agent = await make_agent(
        client,
        {"tool_calls": [{"name": "submit_plan", "input": plan}]},
        {"text": "/tmp/a"},
        {"tool_calls": [{"name": "step_failed", "input": {"reason": "unreadable"}}]},
        {"tool_calls": [{"name": "submit_plan", "input": {"steps": plan["steps"][1:]}}]},
        {"text": "hello"},
        execution_loop="plan_execute",
    )
    done = await cli(base_url, "run", "--agent", agent["id"], "go")
    assert done.code == 0, done
    lines = done.out.splitlines()
    moves = [line for line in lines if line[:1] in "▤▸✓✗"]
    assert moves == [
        "▤ plan: 2 steps",
        "▸ step 1: find the file",
        "✓ step 1 done: /tmp/a",
        "▸ step 2: read it",
        "✗ step 2 failed: unreadable",
        "▤ replanned (1): 2 steps",
        "▸ step 2: read it",
        "✓ step 2 done: hello",
    ]
    run_id = lines[0].split()[1]

    shown = await cli(base_url, "show", run_id)
    assert shown.code == 0, shown
    assert "loop plan_execute (the agent's execution_loop)" in shown.out
    assert "plan (2 steps, 1 replan):" in shown.out
    assert "   1. [completed] find the file\n      /tmp/a\n" in shown.out
    assert "   2. [completed] read it\n      hello\n" in shown.out
