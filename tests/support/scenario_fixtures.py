"""Scenarios: scripted agents that misbehave in one way each, run through the real
loop and the real database by `tests.support.runs.Harness`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.runs import Harness


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    """A harness with the service's default policies (tool retries without delays)."""
    async with Harness.open(clean_db) as harness:
        yield harness
