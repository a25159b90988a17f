"""The group committer's options, on the real database (the TaskEngine uses all of them):
a failure retrying cannot help fails the whole group at once with the caller's error, the
after-commit step sees each committed transaction's results, and a write whose caller
left is written or dropped as asked."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.errors import QueueFull, ShuttingDown
from app.db.connection import make_sessionmaker
from app.runtime.group_commit import GroupCommitter


class Streams:
    """Each item is a stream name to create; `dup` is there already and fails the
    transaction on the primary key. Records the batches it was given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def __call__(self, session: AsyncSession, names: list[str]) -> list[str]:
        self.batches.append(names)
        for name in names:
            await session.execute(
                text("INSERT INTO event_streams (stream, last_seq) VALUES (:s, 0)"), {"s": name}
            )
        return [f"wrote {n}" for n in names]


async def stored(db: AsyncEngine) -> set[str]:
    async with db.connect() as conn:
        return set((await conn.scalars(text("SELECT stream FROM event_streams"))).all())


@pytest.fixture
async def db(clean_db: AsyncEngine) -> AsyncEngine:
    async with clean_db.begin() as conn:
        await conn.execute(text("INSERT INTO event_streams VALUES ('dup', 0)"))
    return clean_db


class Refused(Exception):
    pass


async def test_a_group_that_retrying_cannot_help_fails_at_once_with_the_callers_error(
    db: AsyncEngine,
) -> None:
    write, seen = Streams(), []

    async def after_commit(results: list[str]) -> None:
        seen.append(results)
        raise RuntimeError("an after-commit step that fails does not stop the writer")

    committer: GroupCommitter[str, str] = GroupCommitter(
        make_sessionmaker(db),
        write,
        isolate=lambda exc: False,
        error=lambda exc: Refused(type(exc).__name__),
        after_commit=after_commit,
    )
    committer.start()
    try:
        failed = await asyncio.gather(
            *(committer.submit(n) for n in ("a", "dup", "b")), return_exceptions=True
        )
        later = await committer.submit("c")
    finally:
        await committer.stop()

    assert write.batches[0] == ["a", "dup", "b"]  # together, and never one by one
    assert [type(f) for f in failed] == [Refused] * 3
    assert str(failed[0]) == "IntegrityError"
    assert (later, seen) == ("wrote c", [["wrote c"]])
    assert await stored(db) == {"dup", "c"}


@pytest.mark.parametrize("write_abandoned", [False, True])
async def test_a_write_whose_caller_left_is_written_only_when_asked(
    db: AsyncEngine, write_abandoned: bool
) -> None:
    write, entered, held = Streams(), asyncio.Event(), asyncio.Event()

    async def hold(results: list[str]) -> None:
        if results == ["wrote first"]:
            entered.set()
            await held.wait()

    committer: GroupCommitter[str, str] = GroupCommitter(
        make_sessionmaker(db),
        write,
        queue_size=1,
        queue_full_retry_after_s=7,
        after_commit=hold,
        write_abandoned=write_abandoned,
    )
    committer.start()
    first = asyncio.create_task(committer.submit("first"))
    await entered.wait()  # the writer holds on, after committing "first"
    left = asyncio.create_task(committer.submit("left"))
    await asyncio.sleep(0)
    with pytest.raises(QueueFull) as full:
        await committer.submit("refused")
    left.cancel()
    held.set()
    await committer.stop()

    assert full.value.retry_after_s == 7
    assert await first == "wrote first"
    assert not committer.running
    with pytest.raises(ShuttingDown):
        await committer.submit("too late")
    expected = {"dup", "first", "left"} if write_abandoned else {"dup", "first"}
    assert await stored(db) == expected
