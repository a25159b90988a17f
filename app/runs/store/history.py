"""The run history: one row per step of a run, keyed `(run_id, seq)`, and everything read
from it (the checkpoint, the tool-call ledger, the transcript, the run's events).

A step's `data` holds, each key only when the step has it:
- `opening`, `events`: its events, as `[type, data]` pairs, before and after the
  `message.created` event of each message it appended (those are made on read);
- `started`: tool calls started before they run, `{id, tool, idempotent}` (a call started
  again after a crash counts one more attempt);
- `completed`: tool calls answered, `{id, attempts}`, with `result` and `is_error` unless
  the step's own messages carry the call's `tool_result`;
- `forgotten`: calls a person let run again as if never started;
- `iteration`, `usage`: the run's counters once the step was written (when they changed);
- `loop`: the watchers' state, when it changed (the checkpoint reads the latest one);
- `prompt_hash`: the agent's prompt, on the `input` step;
- `mcp_tools`: the tools of the agent's MCP servers as the run listed them, offered for the
  rest of the run (a resumed run reads the latest one: `mcp_tools()`).

A `tool_call.completed` event keeps only the call's id: its result, `is_error` and
`attempts` are those of the step's `completed` entry, read with it.

Two writers: the worker holding a run's lease appends with the fence in the statement
(`append_leased`: a stale owner inserts nothing); commands append only to a run no worker
holds, under its row lock (`append_locked`). Either way a step's number is the run's last
plus one: no two writers ever append to one run at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.messages import Message
from app.core.states import RunStatus
from app.core.vocabulary import RESUME_POINTS, StepKind
from app.db.driver import driver_connection, json_text
from app.runs.schemas.history import AnsweredCall, LLMCallRead, RunStepRead, StartedCall
from app.runs.schemas.runs import MessageRead, RunRead, Usage

NOTIFY_CHANNEL = "loopwright_events"  # as app/events/store.py: the listener's channel
_RESUME_POINTS = "(" + ", ".join(f"'{k.value}'" for k in sorted(RESUME_POINTS)) + ")"


@dataclass(frozen=True)
class NewStep:
    """A step to append: `messages` in their JSON form (`Message.model_dump(mode="json")`)."""

    run_id: str
    conversation_id: str
    kind: StepKind
    status: RunStatus
    at: datetime
    messages: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeasedStep:
    """A worker's step, written under its lease; its messages placed by the worker
    (`position`: the conversation's length before them)."""

    step: NewStep
    owner: str
    token: int
    position: int


def _row(step: NewStep, seq: int | None = None, position: int | None = None) -> dict[str, Any]:
    return {
        "run_id": step.run_id,
        "seq": seq,
        "kind": step.kind,
        "status": step.status,
        "at": step.at,
        "conversation_id": step.conversation_id,
        "position": position if step.messages else None,
        "messages": step.messages or None,
        "data": step.data,
    }


_COLUMNS = "run_id, seq, kind, status, at, conversation_id, position, messages, data"
_RECORD = (
    "run_id text, seq int, kind text, status text, at timestamptz, conversation_id text, "
    "position int, messages jsonb, data jsonb"
)
# The fence and the append in one statement: the runs whose lease is still the writer's are
# locked FOR SHARE (in id order, as every statement that locks several runs), which a claim,
# a time-out or a cancel (FOR UPDATE) waits for; one that committed first is seen in the
# re-checked row, and its run gets nothing. Only the lease holder appends to a running run
# (and a tool of its, in between its boundaries), so its next number is the last plus one.
# The NOTIFY wakes the run's readers elsewhere.
_APPEND_LEASED = f"""
    WITH batch AS (
        SELECT * FROM jsonb_to_recordset($1::text::jsonb) AS b({_RECORD}, owner text, token bigint)
    ), fenced AS (
        SELECT r.id, r.cancel_requested FROM runs AS r
        JOIN batch AS b ON b.run_id = r.id AND r.lease_owner = b.owner
            AND r.lease_token = b.token AND r.status = 'running'
        ORDER BY r.id FOR SHARE OF r
    ), appended AS (
        INSERT INTO run_history ({_COLUMNS})
        SELECT b.run_id,
            coalesce((SELECT max(h.seq) FROM run_history AS h WHERE h.run_id = b.run_id), 0) + 1,
            b.kind, b.status, b.at, b.conversation_id, b.position, b.messages, b.data
        FROM batch AS b JOIN fenced AS f ON f.id = b.run_id
        RETURNING run_id, seq
    )
    SELECT f.id, f.cancel_requested,
           pg_notify($2, json_build_object('stream', 'run:' || a.run_id, 'seq', a.seq)::text)
    FROM appended AS a JOIN fenced AS f ON f.id = a.run_id
"""


async def append_leased(session: AsyncSession, steps: Sequence[LeasedStep]) -> dict[str, bool]:
    """Append the steps of running runs, each fenced by its worker's lease, in one
    statement. The runs written, with whether a cancel was asked of each; a run missing
    lost its lease, and nothing of it was written."""
    if not steps:
        return {}
    rows = [_row(s.step, None, s.position) | {"owner": s.owner, "token": s.token} for s in steps]
    driver = await driver_connection(session)
    fenced = await driver.fetch(_APPEND_LEASED, json_text(rows), NOTIFY_CHANNEL)
    return {r["id"]: r["cancel_requested"] for r in fenced}


# A command's step: the run is locked by the caller, so no worker appends meanwhile and the
# next number is the last one plus one; its messages go at the conversation's end.
# (A journal tool's step is appended this way too, under its run's lease and row lock.)
_APPEND_LOCKED = f"""
    WITH b AS (SELECT * FROM jsonb_to_record($1::text::jsonb) AS b({_RECORD})),
    placed AS (
        SELECT b.*,
            coalesce((SELECT max(h.seq) FROM run_history AS h WHERE h.run_id = b.run_id), 0)
                + 1 AS next_seq,
            CASE WHEN b.messages IS NULL THEN NULL ELSE coalesce((
                SELECT h.position + jsonb_array_length(h.messages) FROM run_history AS h
                WHERE h.conversation_id = b.conversation_id AND h.position IS NOT NULL
                ORDER BY h.position DESC LIMIT 1), 0) END AS next_position
        FROM b
    )
    INSERT INTO run_history ({_COLUMNS})
    SELECT run_id, next_seq, kind, status, at, conversation_id, next_position, messages, data
    FROM placed
    RETURNING seq, position, pg_notify($2,
        json_build_object('stream', 'run:' || run_id, 'seq', seq)::text)
"""


async def append_locked(session: AsyncSession, step: NewStep) -> tuple[int, int | None]:
    """Append a step of a run this transaction holds locked (`FOR UPDATE`) and no worker
    holds; its seq, and the position of its first message (None: it has none)."""
    driver = await driver_connection(session)
    (row,) = await driver.fetch(_APPEND_LOCKED, json_text(_row(step)), NOTIFY_CHANNEL)
    return row["seq"], row["position"]


# -- the checkpoint --------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """Where a run stands, read from its history: the latest resume point (`kind`, the
    watchers' state), its counters, and the number of its last step."""

    last_seq: int
    kind: StepKind | None  # None: no resume point yet (nothing ran)
    loop_counters: dict[str, Any]
    iteration: int | None  # None: no LLM call answered yet
    usage: dict[str, int] | None


_CHECKPOINT = text(
    f"""
    SELECT
        (SELECT max(seq) FROM run_history WHERE run_id = :run) AS last_seq,
        p.kind, w.data -> 'loop' AS loop, c.data -> 'iteration' AS iteration,
        c.data -> 'usage' AS usage
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT kind FROM run_history
        WHERE run_id = :run AND kind IN {_RESUME_POINTS} ORDER BY seq DESC LIMIT 1
    ) AS p ON true
    LEFT JOIN LATERAL (
        SELECT data FROM run_history
        WHERE run_id = :run AND data ? 'loop' ORDER BY seq DESC LIMIT 1
    ) AS w ON true
    LEFT JOIN LATERAL (
        SELECT data FROM run_history
        WHERE run_id = :run AND data ? 'iteration' ORDER BY seq DESC LIMIT 1
    ) AS c ON true
    """
)


async def checkpoint(session: AsyncSession, run_id: str) -> Checkpoint:
    row = (await session.execute(_CHECKPOINT, {"run": run_id})).one()
    return Checkpoint(
        last_seq=row.last_seq or 0,
        kind=StepKind(row.kind) if row.kind else None,
        loop_counters=row.loop or {},
        iteration=row.iteration,
        usage=row.usage,
    )


_MCP_TOOLS = text(
    "SELECT data -> 'mcp_tools' FROM run_history WHERE run_id = :run AND data ? 'mcp_tools' "
    "ORDER BY seq DESC LIMIT 1"
)


async def mcp_tools(session: AsyncSession, run_id: str) -> dict[str, Any] | None:
    """The MCP tools the run recorded last (None: it has listed none yet)."""
    found: dict[str, Any] | None = await session.scalar(_MCP_TOOLS, {"run": run_id})
    return found


_COUNTERS = text(
    """
    SELECT DISTINCT ON (run_id) run_id, data -> 'iteration' AS iteration,
        data -> 'usage' AS usage
    FROM run_history WHERE run_id = ANY(CAST(:runs AS text[])) AND data ? 'iteration'
    ORDER BY run_id, seq DESC
    """
)


async def counters(session: AsyncSession, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The latest counters (`iteration`, `usage`) of runs that have answered an LLM call."""
    if not run_ids:
        return {}
    rows = await session.execute(_COUNTERS, {"runs": list(run_ids)})
    return {r.run_id: {"iteration": r.iteration, "usage": r.usage} for r in rows}


# -- the ledger ------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    """A tool call as the ledger knows it: started (and how often), and its result once
    answered."""

    tool_call_id: str
    tool: str
    idempotent: bool
    attempts: int
    result: str | None = None
    is_error: bool = False
    started_at: datetime | None = None
    completed_at: datetime | None = None


_LEDGER = text(
    "SELECT at, messages, data FROM run_history WHERE run_id = :run "
    "AND data ?| array['started', 'completed', 'forgotten'] ORDER BY seq"
)


async def ledger(session: AsyncSession, run_id: str) -> dict[str, LedgerEntry]:
    """The run's tool calls by id, folded from its steps in order."""
    entries: dict[str, LedgerEntry] = {}
    for at, messages, data in (await session.execute(_LEDGER, {"run": run_id})).all():
        for started in data.get("started", ()):
            before = entries.get(started["id"])
            entries[started["id"]] = LedgerEntry(
                started["id"],
                started["tool"],
                started["idempotent"],
                before.attempts + 1 if before else 1,
                started_at=at,
            )
        results = _results(messages)
        for done in data.get("completed", ()):
            call_id = done["id"]
            result, is_error = results.get(call_id) or (done["result"], done["is_error"])
            before = entries.get(call_id)
            tool, idempotent = (before.tool, before.idempotent) if before else ("", False)
            entries[call_id] = LedgerEntry(
                call_id,
                tool,
                idempotent,
                done["attempts"],
                result,
                is_error,
                before.started_at if before else at,
                at,
            )
        for call_id in data.get("forgotten", ()):
            entries.pop(call_id, None)
    return entries


def _results(messages: list[dict[str, Any]] | None) -> dict[str, tuple[str, bool]]:
    return {
        block["tool_use_id"]: (block["content"], block.get("is_error", False))
        for message in messages or ()
        for block in message["content"]
        if block["type"] == "tool_result"
    }


def completed_entry(
    call_id: str, result: str, is_error: bool, attempts: int, carried: bool
) -> dict[str, Any]:
    """A `completed` item; `carried`: the step's messages hold its `tool_result`."""
    entry: dict[str, Any] = {"id": call_id, "attempts": attempts}
    return entry if carried else entry | {"result": result, "is_error": is_error}


# -- the transcript --------------------------------------------------------------------

# Steps hold at most a few messages each: the step holding position `after` (found through
# the index) and those after it are all that may hold later messages.
_MESSAGES = text(
    """
    SELECT h.position + m.ord - 1 AS position, m.message ->> 'role' AS role,
        m.message -> 'content' AS content, h.run_id, h.at AS created_at
    FROM run_history AS h
    CROSS JOIN LATERAL jsonb_array_elements(h.messages) WITH ORDINALITY AS m(message, ord)
    WHERE h.conversation_id = :conversation AND h.position IS NOT NULL
      AND h.position >= coalesce((
          SELECT max(s.position) FROM run_history AS s
          WHERE s.conversation_id = :conversation AND s.position <= :after), 0)
      AND h.position + m.ord - 1 > :after
    ORDER BY h.position, m.ord
    LIMIT :limit
    """
)


async def read_messages(
    session: AsyncSession, conversation_id: str, *, after: int = -1, limit: int = 10_000
) -> list[MessageRead]:
    """The conversation's transcript after position `after`, in order."""
    rows = await session.execute(
        _MESSAGES, {"conversation": conversation_id, "after": after, "limit": limit}
    )
    return [MessageRead.model_validate(row._mapping) for row in rows]


async def transcript(
    session: AsyncSession, conversation_id: str, *, after: int = -1
) -> list[Message]:
    """The transcript after `after` as messages (what a run's loop reads), each validated
    once. Positions are gapless: the last one is `after` plus their number."""
    params = {"conversation": conversation_id, "after": after, "limit": 2**31 - 1}
    rows = await session.execute(_MESSAGES, params)
    return [Message.model_validate({"role": r.role, "content": r.content}) for r in rows]


# -- pages of steps --------------------------------------------------------------------


@dataclass(frozen=True)
class StoredStep:
    run_id: str
    conversation_id: str
    seq: int
    kind: StepKind
    status: RunStatus
    at: datetime
    position: int | None
    messages: list[dict[str, Any]]
    data: dict[str, Any]


_STEPS = text(
    f"SELECT {_COLUMNS} FROM run_history WHERE run_id = :run AND seq > :after "
    "ORDER BY seq LIMIT :limit"
)


async def steps(session: AsyncSession, run_id: str, *, after: int, limit: int) -> list[StoredStep]:
    rows = await session.execute(_STEPS, {"run": run_id, "after": after, "limit": limit})
    return [
        StoredStep(
            r.run_id,
            r.conversation_id,
            r.seq,
            StepKind(r.kind),
            RunStatus(r.status),
            r.at,
            r.position,
            r.messages or [],
            r.data,
        )
        for r in rows
    ]


async def last_seq(session: AsyncSession, run_id: str) -> int:
    value = await session.scalar(
        text("SELECT max(seq) FROM run_history WHERE run_id = :run"), {"run": run_id}
    )
    return int(value or 0)


async def with_live_counters(session: AsyncSession, runs: Sequence[RunRead]) -> list[RunRead]:
    """Runs as clients read them: a running run's row keeps the counters of its claim, so
    its iteration and usage are read from its history."""
    running = [run.id for run in runs if run.status is RunStatus.RUNNING]
    found = await counters(session, running)
    return [
        run.model_copy(
            update={
                "iteration": found[run.id]["iteration"],
                "usage": Usage.model_validate(found[run.id]["usage"]),
            }
        )
        if run.id in found
        else run
        for run in runs
    ]


def step_events(step: StoredStep) -> list[tuple[str, dict[str, Any]]]:
    """The events of a step in order: those before its messages, one `message.created` per
    message it appended, then the rest."""
    created = [
        (
            "message.created",
            {"position": step.position + n, "role": m["role"], "content": m["content"]},
        )
        for n, m in enumerate(step.messages)
        if step.position is not None
    ]
    opening = [(kind, data) for kind, data in step.data.get("opening", ())]
    rest = [(kind, _filled(step, kind, data)) for kind, data in step.data.get("events", ())]
    return [*opening, *created, *rest]


RESULT_PREVIEW_CHARS = 2_000  # of a `tool_call.completed` event (the message has it all)


def _filled(step: StoredStep, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """A stored event as sent: a call's completion with its ledger entry's fields."""
    if kind != "tool_call.completed" or "attempts" in data:
        return data
    call_id = data["tool_call_id"]
    done = next(d for d in step.data.get("completed", ()) if d["id"] == call_id)
    result, is_error = _results(step.messages).get(call_id) or (done["result"], done["is_error"])
    return {
        "tool_call_id": call_id,
        "is_error": is_error,
        "attempts": done["attempts"],
        "result": result[:RESULT_PREVIEW_CHARS],
    }


def step_read(step: StoredStep) -> RunStepRead:
    """A step as clients read it: its messages with their positions, its ledger entries
    with the results its messages carry."""
    results = _results(step.messages)
    messages = [
        MessageRead(
            position=(step.position or 0) + n,
            role=m["role"],
            content=m["content"],
            run_id=step.run_id,
            created_at=step.at,
        )
        for n, m in enumerate(step.messages)
    ]
    answered = []
    for done in step.data.get("completed", ()):
        result, is_error = results.get(done["id"]) or (done["result"], done["is_error"])
        answered.append(
            AnsweredCall(id=done["id"], attempts=done["attempts"], is_error=is_error, result=result)
        )
    usage = step.data.get("usage")
    return RunStepRead(
        seq=step.seq,
        kind=step.kind,
        status=step.status,
        at=step.at,
        messages=messages,
        started=[StartedCall.model_validate(s) for s in step.data.get("started", ())],
        answered=answered,
        forgotten=list(step.data.get("forgotten", ())),
        iteration=step.data.get("iteration"),
        usage=Usage.model_validate(usage) if usage is not None else None,
        call=LLMCallRead.model_validate(call) if (call := step.data.get("call")) else None,
        events=[kind for kind, _ in step_events(step)],
    )


@dataclass(frozen=True)
class StateAt:
    """A run as it stood after one of its steps: what a fork starts from."""

    step: StoredStep
    transcript_end: int  # the conversation's messages before this position are its transcript
    loop_counters: dict[str, Any]
    iteration: int
    plan: dict[str, Any] | None  # a planning loop's plan (null: none yet, or another kind)


_STATE_AT = text(
    """
    SELECT
        (SELECT h.position + jsonb_array_length(h.messages) FROM run_history AS h
         WHERE h.run_id = :run AND h.seq <= :seq AND h.position IS NOT NULL
         ORDER BY h.seq DESC LIMIT 1) AS end_here,
        (SELECT min(h.position) FROM run_history AS h
         WHERE h.run_id = :run AND h.position IS NOT NULL) AS first_of_run,
        (SELECT h.data -> 'loop' FROM run_history AS h
         WHERE h.run_id = :run AND h.seq <= :seq AND h.data ? 'loop'
         ORDER BY h.seq DESC LIMIT 1) AS loop,
        (SELECT h.data -> 'iteration' FROM run_history AS h
         WHERE h.run_id = :run AND h.seq <= :seq AND h.data ? 'iteration'
         ORDER BY h.seq DESC LIMIT 1) AS iteration,
        (SELECT h.data -> 'plan' FROM run_history AS h
         WHERE h.run_id = :run AND h.seq <= :seq AND h.data ? 'plan'
         ORDER BY h.seq DESC LIMIT 1) AS plan
    """
)


async def state_at(session: AsyncSession, run_id: str, seq: int) -> StateAt | None:
    """None when the run has no step `seq`. The transcript is the conversation's up to the
    step's last message (messages of earlier runs included); before the run's first
    message, up to where the run began."""
    found = await steps(session, run_id, after=seq - 1, limit=1)
    if not found or found[0].seq != seq:
        return None
    row = (await session.execute(_STATE_AT, {"run": run_id, "seq": seq})).one()
    end = row.end_here if row.end_here is not None else row.first_of_run
    if end is None:  # the run appended nothing: the conversation as it is
        end = await next_position(session, found[0].conversation_id)
    return StateAt(found[0], end, row.loop or {}, row.iteration or 0, row.plan)


async def next_position(session: AsyncSession, conversation_id: str) -> int:
    """The length of the conversation's transcript."""
    value = await session.scalar(
        text(
            "SELECT h.position + jsonb_array_length(h.messages) FROM run_history AS h "
            "WHERE h.conversation_id = :conversation AND h.position IS NOT NULL "
            "ORDER BY h.position DESC LIMIT 1"
        ),
        {"conversation": conversation_id},
    )
    return int(value or 0)
