"""A conversation's run journal (the JSONB `conversations.journal`): read it, and write it
with a `journal_update` step of the run that changed it, under that run's lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RunStatus
from app.core.vocabulary import StepKind
from app.runs.models import CONVERSATIONS, RUNS
from app.runs.store import history


@dataclass(frozen=True)
class LeasedJournal:
    """A journal locked for a change by the run holding its lease."""

    run_id: str
    conversation_id: str
    journal: dict[str, Any]


async def read_journal(session: AsyncSession, conversation_id: str) -> dict[str, Any] | None:
    """The stored journal document; None for an unknown conversation."""
    row = (
        await session.execute(
            select(CONVERSATIONS.c.journal).where(CONVERSATIONS.c.id == conversation_id)
        )
    ).first()
    return None if row is None else dict(row.journal)


async def lock_for_run(
    session: AsyncSession, run_id: str, *, owner: str, token: int
) -> LeasedJournal | None:
    """Lock the run and its conversation for a read-modify-write of the journal, fenced as
    every worker write is (owner, token, still running); None when that lease is gone, and
    then the caller writes nothing. The lock on the run row, held to commit, keeps a new
    claim (which takes a new token) from slipping in between this check and the write."""
    row = (
        await session.execute(
            select(
                RUNS.c.conversation_id,
                CONVERSATIONS.c.journal,
            )
            .join(CONVERSATIONS, CONVERSATIONS.c.id == RUNS.c.conversation_id)
            .where(
                RUNS.c.id == run_id,
                RUNS.c.lease_owner == owner,
                RUNS.c.lease_token == token,
                RUNS.c.status == "running",
            )
            .with_for_update(key_share=True)  # FOR NO KEY UPDATE: foreign keys still pass
        )
    ).first()
    if row is None:
        return None
    return LeasedJournal(
        run_id=run_id,
        conversation_id=row.conversation_id,
        journal=dict(row.journal),
    )


async def write_journal(
    session: AsyncSession, leased: LeasedJournal, journal: dict[str, Any], now: datetime
) -> None:
    """Store the new journal and its `journal_update` step in the caller's transaction. A
    tool call changes no messages nor the watchers: the step is a resume point, as where
    the run stood."""
    await session.execute(
        update(CONVERSATIONS)
        .where(CONVERSATIONS.c.id == leased.conversation_id)
        .values(journal=journal)
    )
    step = history.NewStep(
        leased.run_id,
        leased.conversation_id,
        StepKind.JOURNAL_UPDATE,
        RunStatus.RUNNING,
        now,
    )
    await history.append_locked(session, step)
