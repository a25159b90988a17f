"""Migration 0009 on data: approvals the expiry sweep decided become `expired` with that
decision, people's answers become their own decision, every row gets a summary; its
downgrade gives the old statuses back. (The round trip against the models is in
test_migrations.py.)"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import migrate

# As 0008 kept them: (id, kind, status, decided_by, arguments)
ROWS_0008 = [
    ("apr_pending", "task_review", "pending", None, None),
    ("apr_person", "task_review", "approved", "ann", None),
    ("apr_timer_yes", "task_review", "approved", "system:timeout", None),
    ("apr_timer_no", "tool_call", "rejected", "system:timeout", {"to": "ops"}),
    ("apr_person_no", "tool_call", "rejected", "bob", None),
    ("apr_gone", "task_review", "cancelled", "system", None),
]


async def insert_0008_rows(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        for n, (approval_id, kind, status, decided_by, arguments) in enumerate(ROWS_0008):
            await conn.execute(
                text(
                    "INSERT INTO approvals (id, kind, status, task_id, run_id, review_round, "
                    "tool_call_id, tool, arguments, question, decided_by, timeout_s, "
                    "timeout_policy, expires_at, escalations, version) VALUES (:id, :kind, "
                    ":status, :task, :run, :round, :call, :tool, CAST(:arguments AS jsonb), "
                    ":question, :by, 60, 'escalate', now(), 0, 1)"
                ),
                {
                    "id": approval_id,
                    "kind": kind,
                    "status": status,
                    "task": f"task_{n}",
                    "run": f"run_{n}",
                    "round": 1 if kind == "task_review" else None,
                    "call": f"call_{n}" if kind == "tool_call" else None,
                    "tool": "wire" if kind == "tool_call" else None,
                    "arguments": json.dumps(arguments) if arguments else None,
                    "question": f"Question {n}?",
                    "by": decided_by,
                },
            )


async def rows(engine: AsyncEngine, columns: str) -> dict[str, tuple[object, ...]]:
    async with engine.connect() as conn:
        result = await conn.execute(text(f"SELECT id, {columns} FROM approvals ORDER BY id"))
        return {row[0]: tuple(row[1:]) for row in result}


def _checks(connection: Connection) -> set[str]:
    return {str(c["name"]) for c in inspect(connection).get_check_constraints("approvals")}


async def test_0009_turns_timer_decisions_into_expiries_and_takes_them_back(
    scratch_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(scratch_engine, "0008")
    await insert_0008_rows(scratch_engine)

    await migrate.upgrade(scratch_engine, "0009")
    assert await rows(scratch_engine, "status, decision") == {
        "apr_pending": ("pending", None),
        "apr_person": ("approved", "approved"),
        "apr_timer_yes": ("expired", "approved"),
        "apr_timer_no": ("expired", "rejected"),
        "apr_person_no": ("rejected", "rejected"),
        "apr_gone": ("cancelled", None),
    }
    summaries = {k: v[0] for k, v in (await rows(scratch_engine, "summary")).items()}
    assert summaries["apr_pending"] == "Question 0?"
    assert summaries["apr_timer_no"] == 'Question 3?\nArguments: {"to": "ops"}'
    async with scratch_engine.connect() as conn:
        assert {
            "ck_approvals_status",
            "ck_approvals_decision",
            "ck_approvals_decision_matches_status",
            "ck_approvals_summary_length",
        } <= await conn.run_sync(_checks)
    # The constraints hold the new shape: a decided row needs its decision.
    with pytest.raises(Exception, match="ck_approvals_decision_matches_status"):
        async with scratch_engine.begin() as conn:
            await conn.execute(text("UPDATE approvals SET decision = NULL WHERE id = 'apr_person'"))

    await migrate.downgrade(scratch_engine, "0008")
    assert await rows(scratch_engine, "status, decided_by") == {
        approval_id: (status, decided_by) for approval_id, _, status, decided_by, _ in ROWS_0008
    }
    async with scratch_engine.connect() as conn:
        columns = await conn.run_sync(
            lambda c: {col["name"] for col in inspect(c).get_columns("approvals")}
        )
        assert not {"summary", "decision"} & columns
        assert "ck_approvals_status" in await conn.run_sync(_checks)
