"""Conversations and their messages (positions handed out by a per-conversation counter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.messages import Message
from app.models import CONVERSATIONS, MESSAGES
from app.schemas.runs import MessageRead
from app.store.driver import driver_connection, json_text


async def create_conversation(session: AsyncSession, conversation_id: str) -> None:
    await session.execute(CONVERSATIONS.insert().values(id=conversation_id, message_count=0))


async def exists(session: AsyncSession, conversation_id: str) -> bool:
    found = await session.scalar(
        select(CONVERSATIONS.c.id).where(CONVERSATIONS.c.id == conversation_id)
    )
    return found is not None


async def append_messages(
    session: AsyncSession, conversation_id: str, run_id: str | None, messages: Sequence[Message]
) -> list[int]:
    """Append in order; returns their positions (0-based)."""
    (positions,) = await append_many(session, [(conversation_id, run_id, messages)])
    return positions


async def read_messages(
    session: AsyncSession, conversation_id: str, *, after: int = -1, limit: int = 10_000
) -> list[MessageRead]:
    rows = await session.execute(
        select(MESSAGES)
        .where(MESSAGES.c.conversation_id == conversation_id, MESSAGES.c.position > after)
        .order_by(MESSAGES.c.position)
        .limit(limit)
    )
    return [MessageRead.model_validate(row._mapping) for row in rows]


_BUMP = (
    "UPDATE conversations AS c SET message_count = c.message_count + n.n "
    "FROM jsonb_to_recordset($1::text::jsonb) AS n(id text, n int) "
    "WHERE c.id = n.id RETURNING c.id, c.message_count"
)
_INSERT_MANY = (
    "INSERT INTO messages (conversation_id, position, run_id, role, content) "
    "SELECT conversation_id, position, run_id, role, content "
    "FROM jsonb_to_recordset($1::text::jsonb) "
    "AS m(conversation_id text, position int, run_id text, role text, content jsonb)"
)


async def append_many(
    session: AsyncSession,
    appends: Sequence[tuple[str, str | None, Sequence[Message | dict[str, Any]]]],
) -> list[list[int]]:
    """Several appends (conversation_id, run_id, messages) in two statements; the positions
    given to each append's messages, in order. Messages may come already in their JSON
    form (`Message.model_dump(mode="json")`), when the caller needs that form too."""
    counts: dict[str, int] = {}
    for conversation_id, _, messages in appends:
        if messages:
            counts[conversation_id] = counts.get(conversation_id, 0) + len(messages)
    if not counts:
        return [[] for _ in appends]
    driver = await driver_connection(session)
    bumped = await driver.fetch(
        _BUMP, json_text([{"id": c, "n": n} for c, n in sorted(counts.items())])
    )
    next_position = {row["id"]: row["message_count"] - counts[row["id"]] for row in bumped}
    positions: list[list[int]] = []
    rows = []
    for conversation_id, run_id, messages in appends:
        given = []
        for message in messages:
            position = next_position[conversation_id]
            next_position[conversation_id] += 1
            given.append(position)
            rows.append(
                {
                    "conversation_id": conversation_id,
                    "position": position,
                    "run_id": run_id,
                    **(message if isinstance(message, dict) else message.model_dump(mode="json")),
                }
            )
        positions.append(given)
    await driver.execute(_INSERT_MANY, json_text(rows))
    return positions


async def read_context(session: AsyncSession, conversation_id: str) -> tuple[list[Message], int]:
    """The live context an LLM call sees: the compacted prefix (when a compaction wrote one)
    followed by the transcript after it; and the position of the last transcript message
    it covers (-1 for an empty conversation)."""
    context = await session.scalar(
        select(CONVERSATIONS.c.context).where(CONVERSATIONS.c.id == conversation_id)
    )
    prefix = [Message.model_validate(m) for m in context["messages"]] if context else []
    through: int = context["through_position"] if context else -1
    rows = await session.execute(
        select(MESSAGES.c.position, MESSAGES.c.role, MESSAGES.c.content)
        .where(MESSAGES.c.conversation_id == conversation_id, MESSAGES.c.position > through)
        .order_by(MESSAGES.c.position)
    )
    later = rows.all()
    messages = prefix + [Message(role=r.role, content=r.content) for r in later]
    return messages, later[-1].position if later else through


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
