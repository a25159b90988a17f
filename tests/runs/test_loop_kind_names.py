"""The migrated database refuses exactly the loop kinds the vocabulary does not declare:
a kind added to `ExecutionLoopKind` needs its migration (Alembic's comparison of the
models does not read CHECK constraints, so this test does)."""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.vocabulary import ExecutionLoopKind


async def test_the_agents_check_admits_every_declared_kind_and_no_other(
    session: AsyncSession,
) -> None:
    definition = await session.scalar(
        text(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conname = 'ck_agents_execution_loop'"
        )
    )
    assert definition is not None
    assert set(re.findall(r"'(\w+)'", definition)) == {kind.value for kind in ExecutionLoopKind}
