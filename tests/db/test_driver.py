"""Statements sent straight to asyncpg belong to the session's transaction, even when they
are the first of it (SQLAlchemy sends BEGIN lazily): a rollback takes them back, a commit
keeps them, as it does for the statements sent through SQLAlchemy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.states import RunStatus
from app.core.vocabulary import StepKind
from app.db.connection import make_sessionmaker
from app.db.driver import json_text
from app.db.errors import constraint_name, translate
from app.events import store as events
from app.events.store import NewEvent
from app.runs.store import history

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("commit", [True, False])
async def test_a_driver_write_first_in_a_transaction_commits_or_rolls_back_with_it(
    db_engine: AsyncEngine, token: str, commit: bool
) -> None:
    stream = f"driver-{token}"
    sessions = make_sessionmaker(db_engine)

    async with sessions() as session, session.begin() as transaction:
        await events.append_many(session, [(stream, NewEvent("a", {"n": 1}), NOW)])
        if not commit:
            await transaction.rollback()

    async with sessions() as session:
        assert await events.last_seq(session, stream) == (1 if commit else 0)


async def test_driver_writes_see_the_transactions_earlier_statements(
    db_engine: AsyncEngine, token: str
) -> None:
    stream = f"driver-{token}"
    sessions = make_sessionmaker(db_engine)

    async with sessions() as session, session.begin():
        await events.append_events(session, stream, [NewEvent("a", {})], NOW)  # SQLAlchemy
        await events.append_many(session, [(stream, NewEvent("b", {}), NOW)])  # the driver
        stored = await events.read_events(session, stream, after=0, limit=10)

    assert [(e.seq, e.type) for e in stored] == [(1, "a"), (2, "b")]


async def test_a_failed_driver_statement_raises_what_sqlalchemy_would(
    session: AsyncSession, token: str
) -> None:
    step = history.NewStep(f"run_missing_{token}", "conv", StepKind.NOTE, RunStatus.RUNNING, NOW)

    with pytest.raises(IntegrityError) as raised:
        await history.append_locked(session, step)  # through the driver

    assert constraint_name(raised.value) == "fk_run_history_run_id_runs"
    assert translate(raised.value).code == "conflict"


@dataclass(frozen=True)
class Row:
    at: datetime
    status: RunStatus


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"at": NOW}, {"at": "2026-01-01T00:00:00+00:00"}),
        ([RunStatus.RUNNING], ["running"]),
        (Row(NOW, RunStatus.QUEUED), {"at": "2026-01-01T00:00:00+00:00", "status": "queued"}),
        ({1: "a"}, {"1": "a"}),  # as json.dumps writes it
        ({"n": 2**70, "at": NOW}, {"n": 2**70, "at": "2026-01-01T00:00:00+00:00"}),
    ],
)
def test_json_text_writes_what_the_bulk_statements_are_given(value: Any, expected: Any) -> None:
    assert json.loads(json_text(value)) == expected
