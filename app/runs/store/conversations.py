"""Conversations: the live context a run's loop reads (its transcript is the runs'
history, `app/runs/store/history.py`), and its compacted prefix."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.messages import Message
from app.runs.models import CONVERSATIONS
from app.runs.store import history


async def create_conversation(session: AsyncSession, conversation_id: str) -> None:
    await session.execute(CONVERSATIONS.insert().values(id=conversation_id))


async def exists(session: AsyncSession, conversation_id: str) -> bool:
    found = await session.scalar(
        select(CONVERSATIONS.c.id).where(CONVERSATIONS.c.id == conversation_id)
    )
    return found is not None


async def read_context(session: AsyncSession, conversation_id: str) -> tuple[list[Message], int]:
    """The live context an LLM call sees: the compacted prefix (when a compaction wrote one)
    followed by the transcript after it; and the position of the last transcript message
    it covers (-1 for an empty conversation)."""
    context = await session.scalar(
        select(CONVERSATIONS.c.context).where(CONVERSATIONS.c.id == conversation_id)
    )
    prefix = [Message.model_validate(m) for m in context["messages"]] if context else []
    through: int = context["through_position"] if context else -1
    later = await history.transcript(session, conversation_id, after=through)
    return prefix + later, through + len(later)


async def replace_context(
    session: AsyncSession, conversation_id: str, through_position: int, messages: Sequence[Message]
) -> None:
    """Make `messages` the live context in place of the transcript up to `through_position`
    (included). The transcript itself is untouched: it stays the audit record."""
    await session.execute(
        CONVERSATIONS.update()
        .where(CONVERSATIONS.c.id == conversation_id)
        .values(
            context={
                "through_position": through_position,
                "messages": [m.model_dump(mode="json") for m in messages],
            }
        )
    )
