"""The task tools through the real loop, the real TaskEngine and the real database: an agent
creates a task, finds it, reads it and moves it on, its mistakes (an illegal transition, an
unknown id, a stale version, bad arguments) come back as error results while the run goes
on, every change is an event on the task board's stream under the run's name, and a create
re-run after its worker died returns the task the first attempt made."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import Block, TextBlock, ToolResultBlock, ToolUseBlock
from app.core.states import RunStatus, TaskStatus
from app.core.streams import TASK_STREAM
from app.llm.provider import LLMRequest, LLMResponse, TextSink, Usage, UsageSink
from app.runs.engine.reconciler import Reconciler
from app.runs.loop.retry import ToolRetryPolicy
from app.runs.loop.tool_runner import ToolOutcome, ToolRunner
from app.runs.tools.base import ToolContext, define_tool
from app.runs.tools.registry import ToolRegistry
from app.tasks.schemas.tasks import TaskRead
from app.tasks.store import tasks as task_store
from app.tasks.tools import TASK_TOOL_NAMES, task_tools
from tests.support.runs import SAFETY_S, Harness, assert_valid_transcript, say, tool_results

# A step sees the tool results so far and makes the next call (a dict: name, input), or
# the final answer (a string).
Step = Callable[[list[ToolResultBlock]], dict[str, Any] | str]


class Steps:
    """A model that plays `steps` in order, one per LLM call, each able to use what the
    tools answered before (a script cannot: its tool inputs are fixed in advance)."""

    def __init__(self, *steps: Step | list[Step]) -> None:
        self.steps = steps

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        played = sum(1 for m in request.messages if m.role == "assistant")
        step = self.steps[played]
        results = tool_results(request.messages)
        content: list[Block] = []
        for index, part in enumerate(step if isinstance(step, list) else [step]):
            made = part(results)
            if isinstance(made, str):
                content.append(TextBlock(text=made))
            else:
                call_id = f"toolu_{played}_{index}"
                content.append(ToolUseBlock(id=call_id, name=made["name"], input=made["input"]))
        stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"
        return LLMResponse(content=content, stop_reason=stop, usage=Usage(1, 1), model="steps")


def first_task(results: list[ToolResultBlock]) -> dict[str, Any]:
    task: dict[str, Any] = json.loads(results[0].content)
    return task


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    """A Harness with the task tools over its (started) TaskEngine, as `build_workers`
    adds them when given the process's engine."""
    async with Harness.open(clean_db) as harness:
        for tool in task_tools(harness.task_engine, harness.sessionmaker):
            harness.registry.add(tool)
        harness.task_engine.start()
        try:
            yield harness
        finally:
            await harness.task_engine.stop(drain_timeout_s=5)


async def board(h: Harness) -> list[TaskRead]:
    async with h.sessionmaker() as session:
        return await task_store.list_tasks(session, after_id=None, limit=100, filters={})


async def task_events(h: Harness, task_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, e.data) for e in await h.stream(TASK_STREAM) if e.data["task"]["id"] == task_id
    ]


async def test_an_agent_creates_finds_reads_and_moves_a_task_and_reads_its_own_mistakes(
    h: Harness,
) -> None:
    def task_id(results: list[ToolResultBlock]) -> str:
        return str(first_task(results)["id"])

    model = Steps(
        lambda r: {
            "name": "create_task",
            "input": {
                "title": "Write the release notes",
                "priority": "high",
                "acceptance_criteria": ["lists every change"],
            },
        },
        lambda r: {"name": "list_tasks", "input": {"status": "created", "limit": 5}},
        lambda r: {"name": "get_task", "input": {"task_id": task_id(r)}},
        # created → in_review skips the lifecycle: an error result, and the run goes on.
        lambda r: {"name": "update_task", "input": {"task_id": task_id(r), "status": "in_review"}},
        lambda r: {"name": "get_task", "input": {"task_id": "task_does_not_exist"}},
        lambda r: {
            "name": "update_task",
            "input": {
                "task_id": task_id(r),
                "status": "assigned",
                "assigned_to": "docs-writer",
                "reason": "docs-writer knows the changes",
                "expected_version": 1,
            },
        },
        # Version 1 is stale now: the change is refused, not applied over the move.
        lambda r: {
            "name": "update_task",
            "input": {"task_id": task_id(r), "priority": "low", "expected_version": 1},
        },
        lambda r: {"name": "update_task", "input": {"task_id": task_id(r), "priority": "low"}},
        lambda r: "The release notes task is assigned to docs-writer.",
    )
    # No auto-approvals: update_task (not idempotent) needs none by itself.
    agent = await h.agent(say("unused"), tools=list(TASK_TOOL_NAMES), auto_approve=[])
    h.models[agent.id] = model
    run = await h.finish(agent, "Put the release notes on the board.")

    assert run.status is RunStatus.COMPLETED
    assert run.result == "The release notes task is assigned to docs-writer."
    results = tool_results(await h.transcript(run.conversation_id))
    assert [r.is_error for r in results] == [False, False, False, True, True, False, True, False]
    created, listed, got, illegal, unknown, moved, stale, changed = results

    [task] = await board(h)  # one task, made by this run
    assert task.created_by == f"run:{run.id}"
    assert json.loads(created.content) == {
        "id": task.id,
        "title": "Write the release notes",
        "type": "development",
        "priority": "high",
        "acceptance_criteria": ["lists every change"],
        "estimated_complexity": "medium",
        "task_structure": "sequential",
        "coordination_topology": "auto",
        "max_retries": 1,
        "created_by": f"run:{run.id}",
        "status": "created",
        "retry_count": 0,
        "version": 1,
        "created_at": json.loads(created.content)["created_at"],
        "updated_at": json.loads(created.content)["updated_at"],
    }
    assert json.loads(listed.content) == {
        "tasks": [
            {
                "id": task.id,
                "title": "Write the release notes",
                "status": "created",
                "priority": "high",
                "version": 1,
            }
        ],
        "next_cursor": None,
    }
    assert json.loads(got.content) == json.loads(created.content)
    assert illegal.content == (
        "Error: invalid_transition: cannot move from 'created' to 'in_review'; "
        "allowed from here: assigned"
    )
    assert unknown.content == "Error: not_found: task 'task_does_not_exist' does not exist"
    after_move = json.loads(moved.content)
    assert (after_move["status"], after_move["assigned_to"], after_move["version"]) == (
        "assigned",
        "docs-writer",
        2,
    )
    assert stale.content.startswith("Error: version_conflict: expected version 1 but the current")
    assert (json.loads(changed.content)["priority"], json.loads(changed.content)["version"]) == (
        "low",
        3,
    )
    assert (task.status, task.assigned_to, task.priority, task.version) == (
        TaskStatus.ASSIGNED,
        "docs-writer",
        "low",
        3,
    )

    # Every change is on the task board's stream, and its audit trail names the run.
    events = await task_events(h, task.id)
    assert [t for t, _ in events] == ["task.created", "task.transitioned", "task.updated"]
    transition = events[1][1]
    assert (transition["from"], transition["to"], transition["actor"]) == (
        "created",
        "assigned",
        f"run:{run.id}",
    )
    assert transition["reason"] == "docs-writer knows the changes"
    async with h.sessionmaker() as session:
        trail = await task_store.list_transitions(session, task.id)
    assert [(t.from_status, t.to_status, t.actor) for t in trail] == [
        (None, TaskStatus.CREATED, f"run:{run.id}"),
        (TaskStatus.CREATED, TaskStatus.ASSIGNED, f"run:{run.id}"),
    ]
    # Nothing waited for a person, and the tools' calls are in the run's events.
    assert "agent_run.waiting_on_human" not in await h.event_types(run.id)
    assert_valid_transcript(await h.messages(run.conversation_id))


async def test_a_create_re_run_after_its_worker_died_returns_the_task_it_made(
    h: Harness,
) -> None:
    """The worker dies (its lease expires) after create_task committed and before the
    batch's results were recorded; the next worker re-runs the idempotent create, and the
    engine answers it from the tool call's idempotency key: one task, the same one."""
    entered, release = asyncio.Event(), asyncio.Event()
    stalls = 0

    async def stall(context: ToolContext, arguments: dict[str, Any]) -> str:
        nonlocal stalls
        stalls += 1
        if stalls == 1:  # the first worker hangs here, holding the batch open
            entered.set()
            await release.wait()
        return "stalled"

    h.registry.add(
        define_tool("stall", "Test tool stall.", {"type": "object"}, stall, idempotent=True)
    )
    model = Steps(
        [
            lambda r: {"name": "create_task", "input": {"title": "Only once"}},
            lambda r: {"name": "stall", "input": {}},
        ],
        lambda r: f"made {first_task(r)['id']}",
    )
    agent = await h.agent(say("unused"), tools=["create_task", "stall"])
    h.models[agent.id] = model
    run = await h.start(agent)
    old = h.new_pool(capacity=1, owner="old-worker")
    try:
        await old.claim()
        async with asyncio.timeout(SAFETY_S):
            await entered.wait()
        [made] = await board(h)  # the first attempt's create committed

        async with h.sessionmaker() as session, session.begin():
            await session.execute(
                text(
                    "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = :id"
                ),
                {"id": run.id},
            )
        report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
        assert (report.timed_out, report.resumed) == (1, 1)
        await h.drain()  # another worker resumes the run and re-runs both cut-short calls
    finally:
        release.set()
    async with asyncio.timeout(SAFETY_S):
        await old.run_until_idle()  # the old worker finishes late; its writes are fenced

    done = await h.run(run.id)
    assert done.status is RunStatus.COMPLETED
    assert done.result == f"made {made.id}"
    assert [t.id for t in await board(h)] == [made.id]
    assert [t for t, _ in await task_events(h, made.id)] == ["task.created"]
    created = tool_results(await h.transcript(run.conversation_id))[0]
    assert json.loads(created.content)["id"] == made.id and not created.is_error
    assert stalls == 2  # the batch ran again on the new worker
    started = [e.data["tool"] for e in await h.events(run.id) if e.type == "tool_call.started"]
    assert started == ["create_task", "stall"] * 2  # the create ran twice, made one task
    assert_valid_transcript(await h.messages(run.conversation_id))


# -- arguments, through the tool runner as the loop calls the tools ------------------------


class Calls:
    def __init__(self, h: Harness) -> None:
        self.runner = ToolRunner(
            ToolRegistry(task_tools(h.task_engine, h.sessionmaker)), ToolRetryPolicy((0, 0, 0))
        )
        self.context = ToolContext(
            run_id="run_test", tool_call_id="", agent_id="agent_test", conversation_id="c"
        )
        self.retries: list[dict[str, Any]] = []

    async def __call__(self, call_id: str, tool: str, **arguments: Any) -> ToolOutcome:
        async def on_retry(data: dict[str, Any]) -> None:
            self.retries.append(data)

        return await self.runner.run(
            ToolUseBlock(id=call_id, name=tool, input=arguments),
            replace(self.context, tool_call_id=call_id),
            allowed=set(TASK_TOOL_NAMES),
            on_retry=on_retry,
        )


async def test_the_same_create_call_twice_makes_one_task_and_another_call_a_second(
    h: Harness,
) -> None:
    call = Calls(h)
    first = await call("toolu_a", "create_task", title="Once")
    again = await call("toolu_a", "create_task", title="Once")
    other = await call("toolu_b", "create_task", title="Once")
    assert not (first.is_error or again.is_error or other.is_error)
    assert again.content == first.content
    assert json.loads(other.content)["id"] != json.loads(first.content)["id"]
    assert len(await board(h)) == 2


@pytest.mark.parametrize(
    ("tool", "arguments", "error"),
    [
        ("create_task", {}, "invalid arguments: title: Field required"),
        ("create_task", {"title": "x", "priority": "urgent"}, "invalid arguments: priority:"),
        ("create_task", {"title": "x", "created_by": "ceo"}, "created_by: Extra inputs"),
        ("create_task", {"title": "x", "type": None}, "invalid arguments: type:"),
        ("update_task", {"task_id": "{id}"}, "nothing to change"),
        ("update_task", {"task_id": "{id}", "reason": "why"}, "give `status` too"),
        ("update_task", {"task_id": "{id}", "title": None}, "title cannot be null"),
        ("update_task", {"task_id": "{id}", "status": "completed"}, "review is approved"),
        (
            "update_task",
            {"task_id": "{id}", "status": "assigned", "title": "y"},
            "change title in a call of its own",
        ),
        (
            "update_task",
            {"task_id": "{id}", "status": "assigned"},
            "validation_error: assigned_to: a task moving to 'assigned' needs an assignee",
        ),
        ("update_task", {"task_id": "task_nope", "priority": "low"}, "not_found: task 'task_nope'"),
        ("list_tasks", {"limit": 500}, "invalid arguments: limit:"),
        ("get_task", {"id": "{id}"}, "invalid arguments:"),
    ],
)
async def test_bad_calls_come_back_as_error_results_that_say_what_to_fix(
    h: Harness, tool: str, arguments: dict[str, Any], error: str
) -> None:
    call = Calls(h)
    made = json.loads((await call("toolu_setup", "create_task", title="target")).content)
    filled = {
        k: v.replace("{id}", made["id"]) if isinstance(v, str) else v for k, v in arguments.items()
    }
    outcome = await call("toolu_bad", tool, **filled)
    assert outcome.is_error, outcome.content
    assert error in outcome.content
    # A wrong call is answered at once, never retried. (The setup call may be: it is
    # idempotent, and a loaded machine can make the task engine answer `unavailable`.)
    assert [r for r in call.retries if r["tool_call_id"] == "toolu_bad"] == []
    [unchanged] = await board(h)
    assert unchanged.version == 1


async def test_cancelling_and_paging(h: Harness) -> None:
    call = Calls(h)
    ids = [
        json.loads(
            (await call(f"toolu_{n}", "create_task", title=f"t{n}", assigned_to="bob")).content
        )["id"]
        for n in range(3)
    ]
    first = json.loads((await call("toolu_p1", "list_tasks", limit=2)).content)
    assert [t["id"] for t in first["tasks"]] == ids[:2] and first["next_cursor"] == ids[1]
    rest = json.loads((await call("toolu_p2", "list_tasks", cursor=first["next_cursor"])).content)
    assert [t["id"] for t in rest["tasks"]] == ids[2:] and rest["next_cursor"] is None

    cancelled = await call("toolu_c", "update_task", task_id=ids[0], status="cancelled")
    assert json.loads(cancelled.content)["status"] == "cancelled"
    async with h.sessionmaker() as session:
        trail = await task_store.list_transitions(session, ids[0])
    assert (trail[-1].to_status, trail[-1].reason, trail[-1].actor) == (
        TaskStatus.CANCELLED,
        "cancelled",
        "run:run_test",
    )
    terminal = await call("toolu_c2", "update_task", task_id=ids[0], status="assigned")
    assert terminal.is_error and "allowed from here: none" in terminal.content
    listed = json.loads((await call("toolu_l", "list_tasks", status="cancelled")).content)
    assert [t["id"] for t in listed["tasks"]] == [ids[0]]


def test_the_tools_declare_what_they_are() -> None:
    tools = {t.name: t for t in task_tools(None, None)}  # type: ignore[arg-type]
    assert sorted(tools) == sorted(TASK_TOOL_NAMES)
    for name in ("create_task", "get_task", "list_tasks"):
        assert tools[name].is_idempotent({}) and tools[name].retries
        assert not tools[name].needs_approval({}, auto_approved=())
    update = tools["update_task"]
    assert not update.is_idempotent({}) and not update.retries
    assert not update.needs_approval({}, auto_approved=())
    assert all(t.requires_permission for t in tools.values())  # an agent must list them
