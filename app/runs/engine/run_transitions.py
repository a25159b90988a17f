"""The one writer of a run's status.

Every change of `runs.status` goes through this module: the commands from outside (cancel,
retry, resume, a person's answer, an approval's decision), the reconciler's time-outs, a
worker's claim and its release at shutdown, and the boundaries a worker commits. Each
checks the run state machine (`check_run_transition`) before it writes, and records the
change as a step of the run's history in the same transaction. Only creating a run writes
a status elsewhere (it inserts `queued`).

A run's own event stream is its history (`app/runs/store/history.py`); its lifecycle events
(`agent_run.*`) also go to the runs board, which wakes workers in every process (a lane may
have come free), and to its lane's stream. Only those: the other events (messages, tool
calls) come every turn, and a copy of each would cost the loop's hot path a row apiece.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.messages import Message
from app.core.states import RunStatus, check_run_transition
from app.core.streams import RUNS_STREAM, StreamEvent, lane_stream
from app.core.vocabulary import StepKind
from app.events import store as event_store
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from app.runs.store import runs as run_store


async def announce(
    session: AsyncSession, batches: Sequence[tuple[RunRead, Sequence[StreamEvent], datetime]]
) -> None:
    """Copy each run's lifecycle events (`agent_run.*`) to the runs board and its lane's
    stream, in one statement for all of them (the run's own stream is its history)."""
    appended: list[tuple[str, event_store.NewEvent, datetime]] = []
    for run, events, now in batches:
        base = {"run_id": run.id, "status": run.status.value}
        for kind, data in events:
            if kind.startswith("agent_run."):
                board = event_store.NewEvent(kind, {**base, "lane": run.lane})
                appended.append((RUNS_STREAM, board, now))
                appended.append(
                    (lane_stream(run.lane), event_store.NewEvent(kind, {**base, **data}), now)
                )
    await event_store.append_many(session, appended)


async def record(
    session: AsyncSession,
    run: RunRead,
    now: datetime,
    *,
    events: Sequence[StreamEvent],
    messages: Sequence[Message] = (),
    data: dict[str, Any] | None = None,
) -> None:
    """A step in the history of a run no worker holds, locked by this transaction (a
    command's change), and its lifecycle events on the board and its lane."""
    step = history.NewStep(
        run.id,
        run.conversation_id,
        StepKind.NOTE,
        run.status,
        now,
        [m.model_dump(mode="json") for m in messages],
        (data or {}) | ({"events": [list(e) for e in events]} if events else {}),
    )
    await history.append_locked(session, step)
    await announce(session, [(run, events, now)])


async def move(
    session: AsyncSession,
    run: RunRead,
    to: RunStatus,
    now: datetime,
    *,
    events: Sequence[StreamEvent],
    values: dict[str, Any] | None = None,
    messages: Sequence[Message] = (),
    data: dict[str, Any] | None = None,
) -> RunRead:
    """Move a run this transaction holds locked (read `FOR UPDATE`) to `to`, writing
    `values` with it, and record the change (with `messages` appended to its conversation
    and the ledger's `data`, if any) as a step of its history; `invalid_transition` (409)
    when the machine forbids it."""
    check_run_transition(run.status, to)
    changed = await run_store.set_status(
        session, run.id, read_version=run.version, status=to, values=values or {}
    )
    if changed is None:  # the caller locked the row: no one else can have written it
        raise RuntimeError(f"run {run.id} changed under its lock")
    await record(session, changed, now, events=events, messages=messages, data=data)
    return changed


async def claim(session: AsyncSession, *, owner: str, limit: int, ttl_s: float) -> list[RunRead]:
    """`queued → running`: the heads of free lanes, leased to `owner`. The claim's event is
    the `agent_run.started` its loop records at its first boundary."""
    check_run_transition(RunStatus.QUEUED, RunStatus.RUNNING)
    return await run_store.claim_runs(session, owner=owner, limit=limit, ttl_s=ttl_s)


async def release(
    session: AsyncSession, *, owner: str, leases: Sequence[tuple[str, int]], now: datetime
) -> list[RunRead]:
    """`running → queued` at shutdown, for the runs `owner` still holds under these lease
    tokens (a run settled or taken over meanwhile is left alone): each keeps its place at
    the head of its lane, with an `agent_run.interrupted` event."""
    check_run_transition(RunStatus.RUNNING, RunStatus.QUEUED)
    released = await run_store.release(session, owner=owner, leases=leases)
    interrupted: list[StreamEvent] = [("agent_run.interrupted", {"at_boundary": False})]
    for run in released:  # the loops are stopped: no worker appends to these histories
        await record(session, run, now, events=interrupted)
    return released


async def write_leased(
    session: AsyncSession, writes: Sequence[tuple[str, str, int, dict[str, Any]]]
) -> dict[str, RunRead]:
    """The boundaries of running runs, each fenced by its worker's lease (run id, owner,
    token, values): a boundary may take its run out of `running` to any status the machine
    allows from there. The runs written, by id; a run missing lost its lease."""
    for _, _, _, values in writes:
        if "status" in values:
            check_run_transition(RunStatus.RUNNING, RunStatus(values["status"]))
    return await run_store.update_leased_many(session, writes)
