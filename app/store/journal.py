"""A conversation's run journal (the JSONB `conversations.journal`): read it, and write it
with a `journal_update` checkpoint of the run that changed it, under that run's lease."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import CONVERSATIONS, RUNS
from app.store import checkpoints
from app.store.checkpoints import CheckpointRecord


@dataclass(frozen=True)
class LeasedJournal:
    """A journal locked for a change by the run holding its lease, with where that run
    stands (for the checkpoint that records the change)."""

    run_id: str
    conversation_id: str
    iteration: int
    system_prompt_hash: str
    message_count: int
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
                RUNS.c.iteration,
                RUNS.c.system_prompt_hash,
                CONVERSATIONS.c.message_count,
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
        iteration=row.iteration,
        system_prompt_hash=row.system_prompt_hash or "",
        message_count=row.message_count,
        journal=dict(row.journal),
    )


async def write_journal(
    session: AsyncSession, leased: LeasedJournal, journal: dict[str, Any]
) -> None:
    """Store the new journal and its `journal_update` checkpoint in the caller's transaction.
    A tool call changes no messages, so the checkpoint records the transcript as it stands
    and the tool calls the run's latest checkpoint had completed."""
    await session.execute(
        update(CONVERSATIONS)
        .where(CONVERSATIONS.c.id == leased.conversation_id)
        .values(journal=journal)
    )
    latest = await checkpoints.latest(session, leased.run_id)
    record = CheckpointRecord(
        kind="journal_update",
        iteration=leased.iteration,
        message_cursor=leased.message_count - 1,
        persisted_message_count=leased.message_count,
        system_prompt_hash=leased.system_prompt_hash,
        completed_tool_call_ids=latest.completed_tool_call_ids if latest else [],
    )
    await checkpoints.write_many(session, [(leased.run_id, record)])
