"""Migration 0010 on data: a database as 0009 kept it (messages, checkpoints, the tool-call
ledger, run-stream events) becomes run history that the app's readers give back the same
transcript, ledger, checkpoint and events from; its downgrade gives the old rows back.
(The round trip against the models is in test_migrations.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import migrate
from app.db.connection import make_sessionmaker
from app.runs.store import history

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def said(text_: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text_}]


def use(call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}


def result(call_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


AGENT = {
    "id": "agt_1",
    "name": "a",
    "role": "helper",
    "skills": [],
    "system_prompt": "Help.",
    "tools": ["search", "lookup", "ask_human"],
    "model": {"provider": "scripted", "name": "scripted"},
    "limits": {},
    "max_concurrent_tasks": 1,
    "cost_tier": "low",
    "version": 1,
}


def run(run_id: str, conversation_id: str, status: str, iteration: int, usage: tuple[int, int]):
    return {
        "id": run_id,
        "agent_id": "agt_1",
        "conversation_id": conversation_id,
        "lane": conversation_id,
        "input": "go",
        "multitask": "enqueue",
        "status": status,
        "iteration": iteration,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        "attempt": 1,
        "metadata": {},
        "cancel_requested": False,
        "lease_token": 0,
        "resume_available": False,
        "version": 1,
    }


# run_a: completed, one tool call (retried once), no `input` checkpoint (its llm_response
# covers the input too). Then a message without a run at the end of its conversation.
# run_b: waits on a person: its batch's other call (`lookup`) was answered, which only the
# ledger and the human_pause checkpoint know (its tool_result comes once the run goes on);
# the question's call (`ask_human`) was started twice (a crash in between), never answered.
MESSAGES = [  # (conversation, position, run, role, content, created_at)
    ("conv_a", 0, "run_a", "user", said("How many hits for x?"), at(1)),
    (
        "conv_a",
        1,
        "run_a",
        "assistant",
        [*said("Searching."), use("c1", "search", {"q": "x"})],
        at(2),
    ),
    ("conv_a", 2, "run_a", "user", [result("c1", "3 hits")], at(4)),
    ("conv_a", 3, "run_a", "assistant", said("Three."), at(5)),
    ("conv_a", 4, None, "user", said("(an operator's note)"), at(6)),
    ("conv_b", 0, "run_b", "user", said("Check order 7."), at(11)),
    (
        "conv_b",
        1,
        "run_b",
        "assistant",
        [use("ca", "lookup", {"order": 7}), use("cq", "ask_human", {"question": "Which address?"})],
        at(12),
    ),
]
CHECKPOINTS = [  # (run, kind, iteration, cursor, hash, completed ids, loop counters, at)
    ("run_a", "llm_response", 1, 1, "h_a", [], {"repeats": 0}, at(2)),
    ("run_a", "tool_result", 1, 2, "h_a", ["c1"], {"repeats": 1}, at(4)),
    ("run_a", "final", 2, 3, "h_a", ["c1"], {"repeats": 1, "stagnant": 0}, at(5)),
    ("run_b", "input", 0, 0, "h_b", [], {}, at(11)),
    ("run_b", "llm_response", 1, 1, "h_b", [], {"repeats": 0}, at(12)),
    ("run_b", "human_pause", 1, 1, "h_b", ["ca"], {"repeats": 0, "asked": 1}, at(13)),
]
# (run, id, tool, arguments, idempotent, attempts, started, completed, result, is_error)
TOOL_CALLS = [
    ("run_a", "c1", "search", {"q": "x"}, True, 2, at(2), at(4), "3 hits", False),
    ("run_b", "ca", "lookup", {"order": 7}, True, 1, at(12), at(13), "lookup failed", True),
    (
        "run_b",
        "cq",
        "ask_human",
        {"question": "Which address?"},
        False,
        2,
        at(12),
        None,
        None,
        False,
    ),
]


CALL_COLUMNS = [
    "run_id",
    "tool_call_id",
    "tool",
    "arguments",
    "idempotent",
    "attempts",
    "started_at",
    "completed_at",
    "result",
    "is_error",
]
Events = list[tuple[str, dict[str, Any], str, datetime]]


def created(position: int, conversation: str = "conv_a") -> tuple[str, dict[str, Any]]:
    (message,) = [m for m in MESSAGES if m[:2] == (conversation, position)]
    return "message.created", {"position": position, "role": message[3], "content": message[4]}


EVENTS: dict[
    str, Events
] = {  # per run stream, in order: (type, data without run_id, status, created_at)
    "run_a": [
        ("agent_run.queued", {"lane": "conv_a"}, "queued", at(0)),
        ("agent_run.started", {"attempt": 1, "resumed": False}, "running", at(1)),
        (*created(0), "running", at(1)),
        (*created(1), "running", at(2)),
        ("tool_call.started", {"tool_call_id": "c1", "tool": "search"}, "running", at(2)),
        ("agent.tool.retry", {"tool": "search", "attempt": 1}, "running", at(3)),
        (*created(2), "running", at(4)),
        (
            "tool_call.completed",
            {"tool_call_id": "c1", "is_error": False, "attempts": 2, "result": "3 hits"},
            "running",
            at(4),
        ),
        (*created(3), "completed", at(5)),
        ("agent_run.completed", {"stop_reason": "end_turn"}, "completed", at(5)),
    ],
    "run_b": [
        ("agent_run.queued", {"lane": "conv_b"}, "queued", at(10)),
        ("agent_run.started", {"attempt": 1, "resumed": False}, "running", at(11)),
        (*created(0, "conv_b"), "running", at(11)),
        (*created(1, "conv_b"), "running", at(12)),
        ("tool_call.started", {"tool_call_id": "ca", "tool": "lookup"}, "running", at(12)),
        ("tool_call.started", {"tool_call_id": "cq", "tool": "ask_human"}, "running", at(12)),
        (
            "tool_call.completed",
            {"tool_call_id": "ca", "is_error": True, "attempts": 1, "result": "lookup failed"},
            "waiting_on_human",
            at(13),
        ),
        (
            "agent_run.waiting_on_human",
            {"question": "Which address?", "reason": "ask_human"},
            "waiting_on_human",
            at(13),
        ),
    ],
}


async def insert(conn: AsyncConnection, table: str, row: dict[str, Any]) -> None:
    """One row; dicts and lists go in as JSON."""
    values = ", ".join(
        f"CAST(:{c} AS jsonb)" if isinstance(v, dict | list) else f":{c}" for c, v in row.items()
    )
    params = {c: json.dumps(v) if isinstance(v, dict | list) else v for c, v in row.items()}
    await conn.execute(text(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({values})"), params)


async def insert_0009_rows(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await insert(conn, "agents", AGENT)
        for conversation, count in (("conv_a", 5), ("conv_b", 2)):
            await insert(conn, "conversations", {"id": conversation, "message_count": count})
        await insert(conn, "runs", run("run_a", "conv_a", "completed", 2, (30, 12)))
        await insert(conn, "runs", run("run_b", "conv_b", "waiting_on_human", 1, (10, 5)))
        for conversation, position, run_id, role, content, created_at in MESSAGES:
            await insert(
                conn,
                "messages",
                {
                    "conversation_id": conversation,
                    "position": position,
                    "run_id": run_id,
                    "role": role,
                    "content": content,
                    "created_at": created_at,
                },
            )
        for run_id, kind, iteration, cursor, prompt, done, loop, created_at in CHECKPOINTS:
            await insert(
                conn,
                "checkpoints",
                {
                    "run_id": run_id,
                    "kind": kind,
                    "iteration": iteration,
                    "message_cursor": cursor,
                    "persisted_message_count": cursor + 1,
                    "system_prompt_hash": prompt,
                    "completed_tool_call_ids": done,
                    "loop_counters": loop,
                    "created_at": created_at,
                },
            )
        for call in TOOL_CALLS:
            await insert(conn, "tool_calls", dict(zip(CALL_COLUMNS, call, strict=True)))
        for run_id, events in EVENTS.items():
            for seq, (event_type, data, status, created_at) in enumerate(events, 1):
                await insert(
                    conn,
                    "events",
                    {
                        "stream": f"run:{run_id}",
                        "seq": seq,
                        "type": event_type,
                        "data": {"run_id": run_id, "status": status, **data},
                        "created_at": created_at,
                    },
                )
            await insert(
                conn, "event_streams", {"stream": f"run:{run_id}", "last_seq": len(events)}
            )
        # Another stream (the runs board): the migration leaves it alone.
        await insert(
            conn,
            "events",
            {
                "stream": "runs",
                "seq": 1,
                "type": "agent_run.queued",
                "data": {"run_id": "run_a", "status": "queued", "lane": "conv_a"},
                "created_at": at(0),
            },
        )
        await insert(conn, "event_streams", {"stream": "runs", "last_seq": 1})


async def fetch(engine: AsyncEngine, sql: str) -> list[tuple[Any, ...]]:
    async with engine.connect() as conn:
        return [tuple(row) for row in await conn.execute(text(sql))]


async def test_0010_moves_runs_into_their_history_and_back(scratch_engine: AsyncEngine) -> None:
    await migrate.upgrade(scratch_engine, "0009")
    await insert_0009_rows(scratch_engine)

    await migrate.upgrade(scratch_engine)
    sessionmaker = make_sessionmaker(scratch_engine)
    async with sessionmaker() as session:
        # The transcripts: every message at its position, as it was.
        for conversation in ("conv_a", "conv_b"):
            read = await history.read_messages(session, conversation)
            assert [(m.position, m.role, [b.model_dump() for b in m.content]) for m in read] == [
                (p, role, content) for c, p, _, role, content, _ in MESSAGES if c == conversation
            ]

        # The ledger: each call as the old row had it.
        for run_id in ("run_a", "run_b"):
            entries = await history.ledger(session, run_id)
            assert {
                e.tool_call_id: (e.tool, e.idempotent, e.attempts, e.result, e.is_error)
                for e in entries.values()
            } == {
                call_id: (tool, idempotent, attempts, result, is_error)
                for r, call_id, tool, _, idempotent, attempts, _, _, result, is_error in TOOL_CALLS
                if r == run_id
            }

        # The checkpoint: the latest resume point, its watchers, the run's counters.
        done = await history.checkpoint(session, "run_a")
        assert (done.kind, done.loop_counters, done.iteration) == (
            "final",
            {"repeats": 1, "stagnant": 0},
            2,
        )
        assert done.usage == {"input_tokens": 30, "output_tokens": 12}
        waiting = await history.checkpoint(session, "run_b")
        assert (waiting.kind, waiting.loop_counters, waiting.iteration) == (
            "human_pause",
            {"repeats": 0, "asked": 1},
            1,
        )

        # The steps, in the run's order; the old events (but message.created, made on read
        # from the steps' messages) in the history, each with the status it had.
        for run_id, kinds in {
            # queued | started, p0 and p1 (one step: no input checkpoint) | the call's
            # start (written with p1) | its retry | its result | the answer | the note
            "run_a": ["note", "llm_response", "note", "note", "tool_result", "final", "note"],
            "run_b": ["note", "input", "llm_response", "human_pause"],
        }.items():
            steps = await history.steps(session, run_id, after=0, limit=100)
            assert [s.kind for s in steps] == kinds
            assert [s.seq for s in steps] == list(range(1, len(kinds) + 1))
            kept = [
                (event_type, data | {"status": step.status})
                for step in steps
                for event_type, data in [
                    *step.data.get("opening", []),
                    *step.data.get("events", []),
                ]
            ]
            assert kept == [
                (event_type, data | {"status": status})
                for event_type, data, status, _ in EVENTS[run_id]
                if event_type != "message.created"
            ]
        (note,) = await history.steps(session, "run_a", after=6, limit=1)
        assert (note.position, note.messages) == (4, [{"role": "user", "content": MESSAGES[4][4]}])

    assert await fetch(scratch_engine, "SELECT stream FROM events") == [("runs",)]
    assert await fetch(scratch_engine, "SELECT stream FROM event_streams") == [("runs",)]

    await migrate.downgrade(scratch_engine, "0009")
    # Messages: all of them; the one without a run comes back with the run whose step kept
    # it, and every message's created_at is its step's time (not compared).
    assert await fetch(
        scratch_engine,
        "SELECT conversation_id, position, run_id, role, content FROM messages "
        "ORDER BY conversation_id, position",
    ) == [(c, p, run_id or "run_a", role, content) for c, p, run_id, role, content, _ in MESSAGES]
    assert await fetch(
        scratch_engine, "SELECT id, message_count FROM conversations ORDER BY id"
    ) == [("conv_a", 5), ("conv_b", 2)]
    # Checkpoints, in order, all but created_at (the step's time: its events').
    assert await fetch(
        scratch_engine,
        "SELECT run_id, kind, iteration, message_cursor, persisted_message_count, "
        "system_prompt_hash, completed_tool_call_ids, loop_counters FROM checkpoints ORDER BY id",
    ) == [
        (run_id, kind, iteration, cursor, cursor + 1, prompt, done, loop)
        for run_id, kind, iteration, cursor, prompt, done, loop, _ in CHECKPOINTS
    ]
    # The ledger; started_at and completed_at become the times of the steps that started
    # and completed each call (only whether a call completed is compared).
    assert await fetch(
        scratch_engine,
        "SELECT run_id, tool_call_id, tool, arguments, idempotent, attempts, "
        "completed_at IS NOT NULL, result, is_error FROM tool_calls ORDER BY tool_call_id",
    ) == sorted(
        [
            (r, call_id, tool, arguments, idempotent, attempts, completed is not None, res, err)
            for r, call_id, tool, arguments, idempotent, attempts, _, completed, res, err in (
                TOOL_CALLS
            )
        ],
        key=lambda row: row[1],
    )
    # The run streams, event for event, and one more: a step's messages each come with a
    # message.created, so the operator's note (which had none) gets one, in run_a's stream.
    # A message.created takes its step's time: run_a's llm_response step holds the input
    # too, so p1's event takes p0's time (message.created times are not compared).
    note_created: Events = [(*created(4), "completed", at(6))]
    for run_id, events in {
        "run_a": EVENTS["run_a"] + note_created,
        "run_b": EVENTS["run_b"],
    }.items():
        back = await fetch(
            scratch_engine,
            f"SELECT seq, type, data, created_at FROM events WHERE stream = 'run:{run_id}' "
            "ORDER BY seq",
        )
        assert [row[:3] for row in back] == [
            (seq, event_type, {"run_id": run_id, "status": status, **data})
            for seq, (event_type, data, status, _) in enumerate(events, 1)
        ]
        assert [row[3] for row in back if row[1] != "message.created"] == [
            created_at for event_type, _, _, created_at in events if event_type != "message.created"
        ]
    assert await fetch(
        scratch_engine, "SELECT stream, last_seq FROM event_streams ORDER BY stream"
    ) == [("run:run_a", 11), ("run:run_b", 8), ("runs", 1)]
