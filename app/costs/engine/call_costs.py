"""The cost of an LLM call made outside a run (an auction's scoring, a coordination's
decomposition): priced, and added to its day's totals under an agent on a task's lane, so
it counts in the task's and its project's costs. Each call is its own short transaction,
written after the call returned: no transaction is held across it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.costs.store import costs as cost_store
from app.llm.prices import PriceTable
from app.llm.provider import Usage
from app.tasks.store.task_runs import task_lane


@dataclass(frozen=True)
class CallCosts:
    """Counts calls with `prices`, on the day `clock` says (UTC)."""

    prices: PriceTable
    sessionmaker: async_sessionmaker[AsyncSession]
    clock: Callable[[], datetime]

    async def count(
        self, *, agent_id: str, task_id: str, provider: str, model: str, usage: Usage
    ) -> None:
        """One call of `agent_id`'s for the task; `model` is the one that answered."""
        call = cost_store.CallCost(
            day=self.clock().astimezone(UTC).date(),
            agent_id=agent_id,
            lane=task_lane(task_id),
            provider=provider,
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cost_usd=self.prices.cost(provider, model, usage),
        )
        async with self.sessionmaker.begin() as session:
            await cost_store.record(session, [call])
