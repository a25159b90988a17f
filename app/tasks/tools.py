"""The task tools: `create_task`, `get_task`, `list_tasks` and `update_task`, so
that agents coordinate through the task board.

They go the way the `/v1/tasks` API goes: commands are mutations submitted to the
TaskEngine (the same `CreateTask`, `UpdateTask`, `TransitionTask` and `CancelTask`, built
from the same request schemas), queries read the store. The acting identity is the run
(`run:<id>`): it is the task's `created_by` and the `actor` of every audit row and event
the tools cause, which is how a task records the run that made or moved it.

- `create_task` is keyed on its tool call (`ToolContext.idempotency_key`) as an HTTP
  create is on its `Idempotency-Key`, and the key records the run: it is kept while the
  run may run again, so a call re-run after a crash, however late, gets the task the
  first attempt made, never a second one. So it is idempotent (retried, re-run on resume).
- `get_task` and `list_tasks` only read.
- `update_task` is not idempotent: a transition repeated after the task moved back to
  where it was would move it twice, and a field change repeated would overwrite whatever
  changed in between. A call cut short by a crash is therefore never re-run (the run asks
  a person), and transient failures are not retried.

Errors (an unknown task, an illegal transition, a version conflict, bad arguments) come
back as error results the model can read and act on; results are compact JSON.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.bounds import StorableDatetime
from app.core.errors import AppError, Unavailable
from app.core.fields import Name, Reason, Text
from app.core.states import TaskStatus
from app.core.vocabulary import Complexity, Priority, TaskType
from app.db import idempotency
from app.db.errors import translate
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool, parse_arguments
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.engine.task_mutations import (
    CancelTask,
    CreateTask,
    TaskMutation,
    TransitionTask,
    UpdateTask,
)
from app.tasks.schemas.tasks import TaskCreate, TaskPatch, TaskRead, TransitionRequest
from app.tasks.store import tasks as task_store

TASK_TOOL_NAMES = ("create_task", "get_task", "list_tasks", "update_task")
MAX_PAGE = 50
# What a transition may change in the same step (as `POST /v1/tasks/{id}/transitions`).
TRANSITION_FIELDS = frozenset({"assigned_to", "reviewers", "priority", "deadline"})
# A task reaches `completed` only through its review: a person approves it (the review
# gate). An agent moves its work to `in_review`; it does not approve its own work.
REFUSED_TARGETS = {TaskStatus.COMPLETED: "a task is completed when its review is approved"}


class _AgentTaskFields(BaseModel):
    """The task fields an agent may set: the API's, less those that are an operator's
    call (budgets, coordination topology, the delegation chain) or its identity."""

    model_config = ConfigDict(extra="forbid")

    description: Text | None = None
    type: TaskType | None = None
    priority: Priority | None = None
    project: Name | None = None
    assigned_to: Name | None = Field(
        None,
        description="An agent's id or name (the agent then works the task in a run of its "
        "own once the dependencies are completed), or a person.",
    )
    reviewers: list[Name] | None = Field(None, max_length=100)
    dependencies: list[Name] | None = Field(
        None, max_length=1_000, description="Ids of tasks that must be completed first."
    )
    acceptance_criteria: list[Text] | None = Field(None, max_length=100)
    estimated_complexity: Complexity | None = None
    deadline: StorableDatetime | None = None
    parent_task_id: Name | None = None


class CreateTaskArguments(_AgentTaskFields):
    title: Name


class GetTaskArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: Name


class ListTasksArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: TaskStatus | None = None
    assigned_to: Name | None = None
    project: Name | None = None
    priority: Priority | None = None
    limit: int = Field(20, ge=1, le=MAX_PAGE)
    cursor: Name | None = Field(None, description="`next_cursor` of the previous page.")


class UpdateTaskArguments(_AgentTaskFields):
    task_id: Name
    status: TaskStatus | None = Field(
        None,
        description="Move the task to this status (the lifecycle decides which moves are "
        "allowed). With it, only assigned_to, reviewers, priority and deadline may change "
        "in the same call.",
    )
    reason: Reason | None = Field(None, description="Why, recorded with a status change.")
    expected_version: int | None = Field(
        None, ge=1, description="Fail instead of changing a task that moved past this version."
    )
    title: Name | None = None


def task_tools(engine: TaskEngine, sessionmaker: async_sessionmaker[AsyncSession]) -> list[Tool]:
    """The four task tools over this process's TaskEngine (commands) and database (reads)."""

    async def create(context: ToolContext, arguments: dict[str, Any]) -> str:
        given = parse_arguments(CreateTaskArguments, arguments).model_dump(exclude_unset=True)
        body = parse_arguments(TaskCreate, {**given, "created_by": _actor(context)})
        digest = idempotency.request_hash(body.model_dump(mode="json"))
        # Keyed on this tool call: a re-run after a crash, however late, is answered with
        # the first task (the key is kept while the run may run again).
        mutation = CreateTask(
            body, _actor(context), context.idempotency_key, digest, run_id=context.run_id
        )
        return _task_json((await _submit(engine, mutation)).task)

    async def get(context: ToolContext, arguments: dict[str, Any]) -> str:
        task_id = parse_arguments(GetTaskArguments, arguments).task_id
        async with _reading(), sessionmaker() as session:
            task = await task_store.get_task(session, task_id)
        if task is None:
            raise ToolFailure(f"not_found: task {task_id!r} does not exist")
        return _task_json(task)

    async def list_(context: ToolContext, arguments: dict[str, Any]) -> str:
        query = parse_arguments(ListTasksArguments, arguments)
        filters = query.model_dump(include={"status", "assigned_to", "project", "priority"})
        async with _reading(), sessionmaker() as session:
            rows = await task_store.list_tasks(
                session,
                after_id=query.cursor,
                limit=query.limit + 1,
                filters={k: str(v) for k, v in filters.items() if v is not None},
            )
        shown = rows[: query.limit]
        more = len(rows) > query.limit
        page = {
            "tasks": [_summary(task) for task in shown],
            "next_cursor": shown[-1].id if more else None,
        }
        return _dumps(page)

    async def update(context: ToolContext, arguments: dict[str, Any]) -> str:
        mutation = _update_mutation(
            parse_arguments(UpdateTaskArguments, arguments), _actor(context)
        )
        return _task_json((await _submit(engine, mutation)).task)

    return [
        define_tool(
            "create_task",
            "Create a task on the task board. It starts `assigned` when assigned_to is given, "
            "else `created`. Returns the task as JSON (its id and version included).",
            CreateTaskArguments.model_json_schema(),
            create,
            idempotent=True,  # keyed on the tool call: a re-run returns the same task
            retries=True,
            destructive=False,
        ),
        define_tool(
            "get_task",
            "Read one task of the task board by id, as JSON.",
            GetTaskArguments.model_json_schema(),
            get,
            idempotent=True,
            retries=True,
            destructive=False,
        ),
        define_tool(
            "list_tasks",
            "List tasks of the task board, oldest first, filtered by status, assignee, "
            f"project or priority; at most {MAX_PAGE} a page. Pass next_cursor back as "
            "cursor for the next page.",
            ListTasksArguments.model_json_schema(),
            list_,
            idempotent=True,
            retries=True,
            destructive=False,
        ),
        define_tool(
            "update_task",
            "Change a task: move it to another status (created → assigned → in_progress → "
            "in_review; blocked, failed, cancelled, ...) or change its fields. Give "
            "expected_version (from the task you read) to make sure nobody changed it "
            "meanwhile. Returns the task as JSON.",
            UpdateTaskArguments.model_json_schema(),
            update,
            # Not idempotent (see the module docstring), yet no person approves each call
            # (weighed by reversibility and blast radius): a task change is reversible (fields
            # can be set back; blocked, failed and interrupted tasks go back to assigned)
            # and its blast radius is one task on the board, every move recorded in its
            # audit trail under this run's name. The one irreversible move left to an agent
            # is cancelling a task; completing one is its reviewer's (REFUSED_TARGETS).
            # Hence not `destructive` either: a destructive call would ask all the same.
            destructive=False,
            requires_approval=False,
        ),
    ]


def _actor(context: ToolContext) -> str:
    return f"run:{context.run_id}"


def _update_mutation(args: UpdateTaskArguments, actor: str) -> TaskMutation:
    """The mutation the API would submit for the same change: a transition (with the few
    fields a transition may set) or a field update."""
    fields = args.model_dump(exclude_unset=True, exclude={"task_id", "status", "reason"})
    version = fields.pop("expected_version", None)
    if args.status is not None:
        if refused := REFUSED_TARGETS.get(args.status):
            raise ToolFailure(f"cannot move a task to {args.status.value!r} here: {refused}")
        if others := sorted(fields.keys() - TRANSITION_FIELDS):
            raise ToolFailure(
                f"with `status`, only {', '.join(sorted(TRANSITION_FIELDS))} may change in the "
                f"same call; change {', '.join(others)} in a call of its own"
            )
        if args.status is TaskStatus.CANCELLED and not fields:
            return CancelTask(args.task_id, actor, version, args.reason)
        request = parse_arguments(
            TransitionRequest,
            {"to": args.status, "expected_version": version, "reason": args.reason, **fields},
        )
        overrides = request.model_dump(exclude_unset=True, include=set(TRANSITION_FIELDS))
        return TransitionTask(
            args.task_id, request.to, actor, request.expected_version, request.reason, overrides
        )
    if args.reason is not None:
        raise ToolFailure("`reason` is recorded with a status change: give `status` too")
    if not fields:
        raise ToolFailure("nothing to change: give `status` or a field to set")
    changes = parse_arguments(TaskPatch, fields).model_dump(exclude_unset=True)
    return UpdateTask(args.task_id, changes, actor, version)


async def _submit(engine: TaskEngine, mutation: TaskMutation) -> MutationResult:
    try:
        return await engine.submit(mutation)
    except AppError as exc:
        raise _failure(exc) from None


@contextlib.asynccontextmanager
async def _reading() -> AsyncIterator[None]:
    """Database errors of a read, as the tool failures the model sees (an unreachable
    database is transient: the call may be retried)."""
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        raise _failure(translate(exc)) from None


def _failure(error: AppError) -> ToolFailure:
    """`code: detail`, e.g. "invalid_transition: cannot move from 'created' to …; allowed
    from here: assigned". Only an unavailable engine or database is worth a retry."""
    return ToolFailure(f"{error.code}: {error.detail}", transient=isinstance(error, Unavailable))


def _task_json(task: TaskRead) -> str:
    return _dumps(_compact(task.model_dump(mode="json")))


def _summary(task: TaskRead) -> dict[str, Any]:
    """A task in a list: enough to pick one; `get_task` has the rest."""
    keep = (
        "id",
        "title",
        "status",
        "priority",
        "assigned_to",
        "project",
        "dependencies",
        "parent_task_id",
        "version",
    )
    return _compact(task.model_dump(mode="json", include=set(keep)))


def _compact(values: dict[str, Any]) -> dict[str, Any]:
    """Without empty values (null, "", []): the model pays for every token."""
    return {k: v for k, v in values.items() if v not in (None, "", [])}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
