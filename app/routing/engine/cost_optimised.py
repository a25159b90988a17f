"""Cost-optimised routing: the capable agent whose model costs least (input plus output
per million tokens, from the price table); agents whose model has no price come after the
priced ones. Equal prices go to the lower `cost_tier`, then the least busy."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from app.routing.engine.base import TIER_RANK, Candidate, Choice, RoutingContext, Unroutable
from app.tasks.schemas.tasks import TaskRead


class CostOptimised:
    async def choose(
        self, task: TaskRead, candidates: Sequence[Candidate], context: RoutingContext
    ) -> Choice | Unroutable:
        capable = [c for c in candidates if c.capable(context.request)]
        if not capable:
            return context.none_capable()
        best = min(capable, key=_cost_key)
        price = "unpriced" if best.price_per_mtok is None else f"${best.price_per_mtok}/MTok"
        return Choice(best.id, f"cheapest: {price}, tier {best.agent.cost_tier.value}")


def _cost_key(c: Candidate) -> tuple[bool, Decimal, int, int, str]:
    price = c.price_per_mtok
    return (price is None, price or Decimal(0), TIER_RANK[c.agent.cost_tier], c.held, c.id)
