"""The `coordinate_task` tool: an agent splits a task of the board into subtasks that other
agents run in waves, as `POST /v1/tasks/{id}/coordinate` does (the same command, the same
request schema, less `auto_accept`: an agent does not accept work in place of its
reviewers).

It is keyed on its tool call, the key kept while the run may run again, so a call re-run
after a crash gets the coordination the first attempt started, never a second one: it is
idempotent. It answers at once with the coordination's id; the agent follows it with
`get_task` on the parent (whose status the coordination moves) or a person on
`GET /v1/coordinations/{id}`. Starting one changes the board (subtasks, agents' time), so
it is not marked safe: unless the agent's `auto_approve` names it, a person approves each
call, as for any side effect.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.coordination.engine.commands import CoordinationCommands
from app.coordination.schemas import (
    AgentDispatchOptions,
    CoordinationRequest,
    Decomposition,
    DispatchOptions,
)
from app.core.errors import AppError, Unavailable
from app.core.fields import Name
from app.db import idempotency
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool, parse_arguments


class CoordinateTaskArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: Name = Field(description="A `created` task of the board to split.")
    decomposition: Decomposition | None = Field(
        None,
        description="The subtasks and their dependencies; without it, the agent named by "
        "`options.decomposer` decomposes the task.",
    )
    options: AgentDispatchOptions = Field(default_factory=AgentDispatchOptions)


def coordinate_task_tool(commands: CoordinationCommands) -> Tool:
    async def coordinate(context: ToolContext, arguments: dict[str, Any]) -> str:
        args = parse_arguments(CoordinateTaskArguments, arguments)
        options = DispatchOptions(**args.options.model_dump())
        request = CoordinationRequest(decomposition=args.decomposition, options=options)
        digest = idempotency.request_hash([args.task_id, request.model_dump(mode="json")])
        try:
            started = await commands.start(
                args.task_id,
                request,
                idempotency_key=context.idempotency_key,
                request_hash=digest,
                run_id=context.run_id,
            )
        except AppError as exc:
            transient = isinstance(exc, Unavailable)
            raise ToolFailure(f"{exc.code}: {exc.detail}", transient=transient) from None
        made = started.coordination
        answer = {"coordination_id": made.id, "task_id": made.parent_task_id, "status": "running"}
        return json.dumps(answer, separators=(",", ":"))

    return define_tool(
        "coordinate_task",
        "Split a `created` task into subtasks that agents run in waves (by their "
        "dependencies), then roll their results up into the task: give the subtasks "
        "(`decomposition`) or name a decomposer agent. Answers the coordination's id; "
        "the task moves to in_progress, then in_review, failed or cancelled.",
        CoordinateTaskArguments.model_json_schema(),
        coordinate,
        idempotent=True,  # keyed on the tool call: a re-run answers the same coordination
        retries=True,
    )
