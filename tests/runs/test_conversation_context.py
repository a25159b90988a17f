"""A conversation's live context on real Postgres: the compacted prefix followed by the
transcript after it, while the transcript itself stays whole (it is the audit record)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import CompactionSettings
from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.runs.loop.compaction import Compactor, LadderState
from app.runs.store import conversations, history
from tests.support.history import append_messages


def exchange(i: int) -> list[Message]:
    return [
        Message(
            role="assistant",
            content=[ToolUseBlock(id=f"t{i}", name="search", input={"query": f"q{i}"})],
        ),
        Message(
            role="user",
            content=[ToolResultBlock(tool_use_id=f"t{i}", content=f"hit {i} " * 200)],
        ),
    ]


async def transcript(session: AsyncSession, conversation_id: str) -> list[Message]:
    stored = await history.read_messages(session, conversation_id)
    return [Message(role=m.role, content=m.content) for m in stored]


async def test_without_a_compaction_the_context_is_the_whole_transcript(
    session: AsyncSession, token: str
) -> None:
    cid = f"conv-{token}"
    await conversations.create_conversation(session, cid)
    assert await conversations.read_context(session, cid) == ([], -1)

    messages = [Message.user_text("find things"), *exchange(0)]
    await append_messages(session, cid, messages)

    assert await conversations.read_context(session, cid) == (messages, 2)


async def test_the_context_is_the_prefix_then_the_messages_after_it(
    session: AsyncSession, token: str
) -> None:
    cid = f"conv-{token}"
    await conversations.create_conversation(session, cid)
    original = [Message.user_text("find things"), *exchange(0), *exchange(1)]
    await append_messages(session, cid, original)
    summary = Message(role="user", content=[TextBlock(text="[Compacted: 3 messages] found hits")])
    prefix = [summary, *original[3:]]

    await conversations.replace_context(session, cid, 4, prefix)
    assert await conversations.read_context(session, cid) == (prefix, 4)

    later = [*exchange(2), Message(role="assistant", content=[TextBlock(text="done")])]
    await append_messages(session, cid, later)
    assert await conversations.read_context(session, cid) == ([*prefix, *later], 7)
    assert await transcript(session, cid) == [*original, *later]  # nothing lost or rewritten


async def test_a_new_compaction_replaces_the_old_prefix(session: AsyncSession, token: str) -> None:
    cid = f"conv-{token}"
    await conversations.create_conversation(session, cid)
    await append_messages(session, cid, [Message.user_text("go"), *exchange(0)])
    first = [Message.user_text("[Compacted: first]")]
    second = [Message.user_text("[Compacted: second]")]

    await conversations.replace_context(session, cid, 1, first)
    await conversations.replace_context(session, cid, 2, second)

    assert await conversations.read_context(session, cid) == (second, 2)


async def test_a_compaction_written_back_is_what_the_next_read_sees(
    session: AsyncSession, token: str
) -> None:
    """The loop's round: read the context, compact it, store it with the position it
    covers; later messages follow the stored prefix."""

    async def summarise(messages: Sequence[Message]) -> str:
        return f"searched {len(messages) // 2} times"

    cid = f"conv-{token}"
    await conversations.create_conversation(session, cid)
    await append_messages(
        session,
        cid,
        [Message.user_text("research"), *(m for i in range(20) for m in exchange(i))],
    )
    live, through = await conversations.read_context(session, cid)
    compactor = Compactor(CompactionSettings(), summarise, context_window=12_000)

    recovery = await compactor.recover(
        live, through_position=through, iteration=20, state=LadderState()
    )
    assert recovery is not None and recovery.messages is not None
    await conversations.replace_context(session, cid, recovery.through_position, recovery.messages)
    await append_messages(session, cid, exchange(20))

    assert await conversations.read_context(session, cid) == (
        [*recovery.messages, *exchange(20)],
        through + 2,
    )
    assert len(await transcript(session, cid)) == 43
