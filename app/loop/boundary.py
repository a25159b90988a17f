"""One safe boundary of a run, written as one unit: the run row (fenced by the worker's
lease), new messages, tool-call ledger rows, the checkpoint and the events.

`write_boundary` only talks to the session, so the group committer may run it again in a
transaction of its own if the shared one fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.engine.runs import RunEvent, emit_all
from app.llm.messages import Message, ToolUseBlock
from app.loop.tool_runner import ToolOutcome
from app.schemas.runs import RunRead
from app.store import checkpoints, conversations, tool_calls
from app.store import runs as run_store
from app.store.checkpoints import CheckpointKind, CheckpointRecord


@dataclass
class Boundary:
    """What one boundary commits together."""

    kind: CheckpointKind | None  # None: a step that is not a resume point
    messages: list[Message] = field(default_factory=list)
    run_values: dict[str, Any] = field(default_factory=dict)
    events: list[RunEvent] = field(default_factory=list)
    completed: list[tuple[str, ToolOutcome]] = field(default_factory=list)
    started: list[ToolUseBlock] = field(default_factory=list)  # ledger rows begun here
    opening: list[RunEvent] = field(default_factory=list)  # events before the messages'


@dataclass(frozen=True)
class Fence:
    """The lease a worker writes under: a write by any other claim matches no row."""

    run_id: str
    owner: str
    token: int


@dataclass(frozen=True)
class LoopState:
    """The loop's counters as they will be once this boundary is committed."""

    message_count: int
    completed_tool_call_ids: list[str]
    system_prompt_hash: str
    started: list[tuple[str, str, dict[str, Any], bool]]  # (id, tool, arguments, idempotent)


async def write_boundary(
    session: AsyncSession, fence: Fence, boundary: Boundary, state: LoopState, now: datetime
) -> RunRead | None:
    """The run as written, or None (and nothing written) when the lease was lost."""
    run = await run_store.update_leased(
        session, fence.run_id, owner=fence.owner, token=fence.token, values=boundary.run_values
    )
    if run is None:
        return None
    positions = await conversations.append_messages(
        session, run.conversation_id, run.id, boundary.messages
    )
    await tool_calls.start(session, run.id, state.started, now)
    await tool_calls.complete_many(
        session,
        run.id,
        [(i, o.content, o.is_error, o.attempts) for i, o in boundary.completed],
        now,
    )
    if boundary.kind is not None:
        await checkpoints.write(
            session,
            run.id,
            CheckpointRecord(
                kind=boundary.kind,
                iteration=run.iteration,
                message_cursor=positions[-1] if positions else state.message_count - 1,
                persisted_message_count=state.message_count,
                system_prompt_hash=state.system_prompt_hash,
                completed_tool_call_ids=state.completed_tool_call_ids,
            ),
        )
    created: list[RunEvent] = [
        (
            "message.created",
            {
                "position": position,
                "role": message.role,
                "content": [b.model_dump(mode="json") for b in message.content],
            },
        )
        for message, position in zip(boundary.messages, positions, strict=True)
    ]
    await emit_all(session, run, [*boundary.opening, *created, *boundary.events], now)
    return run


def started_events(calls: list[ToolUseBlock]) -> list[RunEvent]:
    return [("tool_call.started", {"tool_call_id": c.id, "tool": c.name}) for c in calls]
