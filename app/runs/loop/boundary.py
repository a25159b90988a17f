"""Safe boundaries of runs, written in bulk: each boundary is one step of its run's
history (its messages, ledger entries, counters, watchers and events), and the steps of
every boundary in a group are one statement, fenced by each worker's lease, whatever the
group's size. A boundary that changes a run's lifecycle (it pauses, settles or is handed
back; the first one records the prompt) also writes the run's row and its lifecycle events.

`write_boundaries` only talks to the session, so the group committer may run it again, on
one boundary at a time, if the shared transaction fails, or once the database is back after
a lost connection: `boundary_committer` rides an outage out for as long as each write's
worker may count on its lease.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.messages import Message, ToolResultBlock, ToolUseBlock
from app.core.states import RunStatus
from app.core.streams import BUDGETS_STREAM, StreamEvent
from app.core.vocabulary import StepKind
from app.costs.schemas.budgets import alert_event
from app.costs.store import budgets as budget_store
from app.costs.store import costs
from app.costs.store.costs import CallCost
from app.events import store as event_store
from app.runs.engine import run_transitions
from app.runs.engine.leases import LeaseTerm
from app.runs.loop.tool_runner import ToolOutcome
from app.runs.schemas.runs import RunRead
from app.runs.store import conversations, history
from app.runtime.group_commit import GroupCommitter, RideOut


@dataclass
class Boundary:
    """What one boundary commits together: one step of the run's history."""

    kind: StepKind  # NOTE: a step that is not a resume point
    messages: list[Message] = field(default_factory=list)
    run_values: dict[str, Any] = field(default_factory=dict)
    events: list[StreamEvent] = field(default_factory=list)
    completed: list[tuple[str, ToolOutcome]] = field(default_factory=list)
    started: list[ToolUseBlock] = field(default_factory=list)  # ledger entries begun here
    opening: list[StreamEvent] = field(default_factory=list)  # events before the messages'
    # A compaction: the new live context, replacing the transcript through this position.
    context: tuple[int, list[Message]] | None = None
    call: CallCost | None = None  # the LLM call this step counts, added to the cost totals
    mcp_tools: dict[str, Any] | None = None  # the MCP tools the run listed (see history.py)

    @property
    def lifecycle(self) -> bool:
        """Whether the run's row changes with it (its status, what it waits for, its
        prompt): the counters alone live in the history until the run leaves `running`."""
        return not set(self.run_values) <= COUNTERS


COUNTERS = frozenset({"iteration", "usage"})


@dataclass(frozen=True)
class BoundaryWrite:
    """A boundary with what its write needs to know: the lease it is written under (a
    write by any other claim writes nothing), its messages' place in the conversation, and
    the run as the loop will hold it once it is written."""

    run: RunRead  # with the boundary's values applied
    owner: str
    token: int
    position: int
    boundary: Boundary
    idempotent: dict[str, bool]  # per started tool call: may it run again after a crash
    now: datetime
    term: LeaseTerm  # how long the worker may keep trying, should the database go away
    loop_counters: dict[str, Any] | None = None  # the watchers' state, when it changed
    prompt_hash: str = ""


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
    """Each write's run as written, or None (and nothing written) when its lease was lost:
    one statement appends every step (fenced), and only the boundaries that change a run's
    lifecycle write its row and its lane's and the board's events."""
    steps = [history.LeasedStep(_step(w), w.owner, w.token, w.position) for w in writes]
    cancel_asked = await history.append_leased(session, steps)
    live = [w for w in writes if w.run.id in cancel_asked]
    await _count_calls(session, live)
    changing = [w for w in live if w.boundary.lifecycle]
    written = await run_transitions.write_leased(
        session, [(w.run.id, w.owner, w.token, _row_values(w)) for w in changing]
    )
    for w in live:
        if w.boundary.context is not None:
            through, context = w.boundary.context
            await conversations.replace_context(session, w.run.conversation_id, through, context)
    await run_transitions.announce(
        session,
        [
            (written[w.run.id], [*w.boundary.opening, *w.boundary.events], w.now)
            for w in changing
            if w.run.id in written
        ],
    )
    runs: list[RunRead | None] = []
    for w in writes:
        if w.run.id not in cancel_asked:
            runs.append(None)
        else:
            flag = {"cancel_requested": cancel_asked[w.run.id]}
            runs.append(written.get(w.run.id) or w.run.model_copy(update=flag))
    return runs


async def _count_calls(session: AsyncSession, live: list[BoundaryWrite]) -> None:
    """The LLM calls these steps count: added to the cost totals, their reservations
    released, and the budgets' thresholds they crossed alerted (once a period each)."""
    calls = [w.boundary.call for w in live if w.boundary.call is not None]
    if not calls:
        return
    priced = [call for call in calls if call.cost_usd is not None]
    if priced:  # only a priced call reserves
        await budget_store.release(session, [w.run.id for w in live if w.boundary.call in priced])
    spenders = await costs.record(session, calls)
    if not spenders:
        return
    now = live[0].now
    alerts = await budget_store.due_alerts(session, spenders, today=now.astimezone(UTC).date())
    await event_store.append_many(
        session,
        [(BUDGETS_STREAM, event_store.NewEvent(*alert_event(b, t)), now) for b, t in alerts],
    )


def _row_values(write: BoundaryWrite) -> dict[str, Any]:
    """The run row's values at a lifecycle boundary: its counters come along."""
    run = write.run
    counters = {"iteration": run.iteration, "usage": run.usage.model_dump()}
    return counters | write.boundary.run_values


def _step(write: BoundaryWrite) -> history.NewStep:
    boundary, run = write.boundary, write.run
    messages = [m.model_dump(mode="json") for m in boundary.messages]
    carried = {
        b.tool_use_id
        for m in boundary.messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }
    data: dict[str, Any] = {}
    if boundary.opening:
        data["opening"] = [list(e) for e in boundary.opening]
    if boundary.events:
        data["events"] = [_stored(kind, event) for kind, event in boundary.events]
    if boundary.started:
        data["started"] = [
            {"id": c.id, "tool": c.name, "idempotent": write.idempotent[c.id]}
            for c in boundary.started
        ]
    if boundary.completed:
        data["completed"] = [
            history.completed_entry(i, o.content, o.is_error, o.attempts, i in carried)
            for i, o in boundary.completed
        ]
    if COUNTERS & set(boundary.run_values):
        data["iteration"] = run.iteration
        data["usage"] = run.usage.model_dump()
    if boundary.call is not None:
        data["call"] = _call_entry(boundary.call)
    if write.loop_counters is not None:
        data["loop"] = write.loop_counters
    if boundary.kind is StepKind.INPUT:
        data["prompt_hash"] = write.prompt_hash
    if boundary.mcp_tools is not None:
        data["mcp_tools"] = boundary.mcp_tools
    if "plan" in boundary.run_values:  # as it stood after this step: where a fork goes on
        data["plan"] = boundary.run_values["plan"]
    status = boundary.run_values.get("status", RunStatus.RUNNING)
    return history.NewStep(
        run.id, run.conversation_id, boundary.kind, RunStatus(status), write.now, messages, data
    )


def _call_entry(call: CallCost) -> dict[str, Any]:
    """The LLM call as its step records it: the model that answered and its provider,
    tokens and cost."""
    return {
        "provider": call.provider,
        "model": call.model,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "cache_write_tokens": call.cache_write_tokens,
        "cache_read_tokens": call.cache_read_tokens,
        "cost_usd": None if call.cost_usd is None else float(call.cost_usd),
    }


def _stored(kind: str, data: dict[str, Any]) -> list[Any]:
    """An event as its step keeps it: a call's completion names the call only, and is
    filled in on read from the step's ledger entry and result (runs/store/history.py)."""
    if kind == "tool_call.completed":
        return [kind, {"tool_call_id": data["tool_call_id"]}]
    return [kind, data]


def started_events(calls: list[ToolUseBlock]) -> list[StreamEvent]:
    return [("tool_call.started", {"tool_call_id": c.id, "tool": c.name}) for c in calls]
