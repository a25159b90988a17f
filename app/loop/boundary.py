"""Safe boundaries of runs, written in bulk: the run rows (each fenced by its worker's
lease), new messages, tool-call ledger rows, checkpoints and events of every boundary in
a group take one statement per table, whatever the group's size.

`write_boundaries` only talks to the session, so the group committer may run it again, on
one boundary at a time, if the shared transaction fails, or once the database is back after
a lost connection: `boundary_committer` rides an outage out for as long as each write's
worker may count on its lease.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.messages import Message, ToolUseBlock
from app.core.streams import StreamEvent
from app.engine import run_transitions
from app.engine.group_commit import GroupCommitter, RideOut
from app.engine.leases import LeaseTerm
from app.engine.run_transitions import emit_many
from app.loop.tool_runner import ToolOutcome
from app.schemas.runs import RunRead
from app.store import checkpoints, conversations, tool_calls
from app.store.checkpoints import CheckpointKind, CheckpointRecord


@dataclass
class Boundary:
    """What one boundary commits together."""

    kind: CheckpointKind | None  # None: a step that is not a resume point
    messages: list[Message] = field(default_factory=list)
    run_values: dict[str, Any] = field(default_factory=dict)
    events: list[StreamEvent] = field(default_factory=list)
    completed: list[tuple[str, ToolOutcome]] = field(default_factory=list)
    started: list[ToolUseBlock] = field(default_factory=list)  # ledger rows begun here
    opening: list[StreamEvent] = field(default_factory=list)  # events before the messages'
    # A compaction: the new live context, replacing the transcript through this position.
    context: tuple[int, list[Message]] | None = None


@dataclass(frozen=True)
class BoundaryWrite:
    """A boundary with what its write needs to know: the lease it is written under (a
    write by any other claim matches no row) and the loop's counters once it is written."""

    run_id: str
    owner: str
    token: int
    boundary: Boundary
    message_count: int
    completed_tool_call_ids: list[str]
    system_prompt_hash: str
    idempotent: dict[str, bool]  # per started tool call: may it run again after a crash
    now: datetime
    term: LeaseTerm  # how long the worker may keep trying, should the database go away
    loop_counters: dict[str, Any] = field(default_factory=dict)  # the loop's watchers


def _held_until(write: BoundaryWrite) -> float:
    return write.term.held_until


# A write the database could not take is tried again while its worker's lease lasts: when
# the database is back, the fence decides (a lease taken meanwhile writes nothing).
RIDE_OUT: RideOut[BoundaryWrite] = RideOut(until=_held_until)


def boundary_committer(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> GroupCommitter[BoundaryWrite, RunRead | None]:
    """The group committer of a process's run boundaries."""
    return GroupCommitter(
        sessionmaker, write_boundaries, ride_out=RIDE_OUT, name="boundary-committer"
    )


async def write_boundaries(
    session: AsyncSession, writes: list[BoundaryWrite]
) -> list[RunRead | None]:
    """Each write's run as written, or None (and nothing written) when its lease was lost."""
    written = await run_transitions.write_leased(
        session, [(w.run_id, w.owner, w.token, w.boundary.run_values) for w in writes]
    )
    live = [(w, written[w.run_id]) for w in writes if w.run_id in written]
    # Each message in its JSON form once: for its row and for its `message.created` event.
    dumped = [[m.model_dump(mode="json") for m in w.boundary.messages] for w, _ in live]
    positions = await conversations.append_many(
        session,
        [(run.conversation_id, run.id, d) for (_, run), d in zip(live, dumped, strict=True)],
    )
    await tool_calls.start_many(
        session,
        [
            tool_calls.Started(run.id, c.id, c.name, c.input, w.idempotent[c.id], w.now)
            for w, run in live
            for c in w.boundary.started
        ],
    )
    await tool_calls.complete_many(
        session,
        [
            tool_calls.Completed(run.id, call_id, o.content, o.is_error, o.attempts, w.now)
            for w, run in live
            for call_id, o in w.boundary.completed
        ],
    )
    for w, run in live:
        if w.boundary.context is not None:
            through, context = w.boundary.context
            await conversations.replace_context(session, run.conversation_id, through, context)
    await checkpoints.write_many(
        session,
        [
            (run.id, _checkpoint(w, run, given))
            for (w, run), given in zip(live, positions, strict=True)
            if w.boundary.kind is not None
        ],
    )
    await emit_many(
        session,
        [
            (run, _events(w.boundary, d, given), w.now)
            for (w, run), d, given in zip(live, dumped, positions, strict=True)
        ],
    )
    return [written.get(w.run_id) for w in writes]


def _checkpoint(write: BoundaryWrite, run: RunRead, positions: list[int]) -> CheckpointRecord:
    assert write.boundary.kind is not None
    return CheckpointRecord(
        kind=write.boundary.kind,
        iteration=run.iteration,
        message_cursor=positions[-1] if positions else write.message_count - 1,
        persisted_message_count=write.message_count,
        system_prompt_hash=write.system_prompt_hash,
        completed_tool_call_ids=write.completed_tool_call_ids,
        loop_counters=write.loop_counters,
    )


def _events(
    boundary: Boundary, dumped: list[dict[str, Any]], positions: list[int]
) -> list[StreamEvent]:
    """The boundary's events in order: opening ones, one per new message, then the rest."""
    created: list[StreamEvent] = [
        (
            "message.created",
            {"position": position, "role": message["role"], "content": message["content"]},
        )
        for message, position in zip(dumped, positions, strict=True)
    ]
    return [*boundary.opening, *created, *boundary.events]


def started_events(calls: list[ToolUseBlock]) -> list[StreamEvent]:
    return [("tool_call.started", {"tool_call_id": c.id, "tool": c.name}) for c in calls]
