"""The group committer: writes that arrive together share one transaction, each keeps its
own result, and one failing write does not sink the others."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db.connection import make_sessionmaker
from app.runtime.group_commit import GroupCommitter


async def _write_streams(session: AsyncSession, names: list[str]) -> list[str]:
    """Each item is a stream name to create; `bad` violates the primary key on purpose."""
    for name in names:
        stream = "dup" if name == "bad" else name
        await session.execute(
            text("INSERT INTO event_streams (stream, last_seq) VALUES (:s, 0)"), {"s": stream}
        )
    return [f"wrote {n}" for n in names]


async def test_writes_that_arrive_together_share_a_commit_and_a_bad_one_fails_alone(
    clean_db: AsyncEngine,
) -> None:
    sessions = make_sessionmaker(clean_db)
    async with sessions() as session, session.begin():
        await session.execute(text("INSERT INTO event_streams VALUES ('dup', 0)"))
    committer: GroupCommitter[str, str] = GroupCommitter(sessions, _write_streams)
    committer.start()
    try:
        together = await asyncio.gather(
            *(committer.submit(f"s{i}") for i in range(20)), return_exceptions=True
        )
        assert together == [f"wrote s{i}" for i in range(20)]
        assert committer.commits < 20  # they shared transactions

        mixed = await asyncio.gather(
            committer.submit("a"),
            committer.submit("bad"),
            committer.submit("b"),
            return_exceptions=True,
        )
    finally:
        await committer.stop()
    assert mixed[0] == "wrote a" and mixed[2] == "wrote b"
    assert isinstance(mixed[1], Exception)
    async with sessions() as session:
        streams = set((await session.scalars(text("SELECT stream FROM event_streams"))).all())
    assert streams == {"dup", "a", "b", *(f"s{i}" for i in range(20))}
