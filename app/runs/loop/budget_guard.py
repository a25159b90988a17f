"""Before every LLM call: may the run spend its worst case? Checked against the run's own
limit (`limits.max_cost_usd`, in memory: one worker holds the run), its task's
`budget_limit` (the task's other runs settled already: a task lane runs one at a time),
and every agent or project budget it counts against, where the worst case is reserved in
the database (`costs/store/budgets.py`), so that runs racing for the last of a budget make only
the calls it has room for. The reservation goes when the call is counted. The worst case is
that of the dearer of the call's model and the agent's fallback (which may answer it).

A call none of whose models has a price is not checked: its cost is unknown, not zero, and no
budget can bound it (the README says so). A call that does not fit ends the run
`budget_exhausted`: failed, not retried (a retry would be refused the same way); a person
raises the limit and retries it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.schemas import AgentRead
from app.core.states import StopReason
from app.costs.store import budgets as budget_store
from app.llm import tokens
from app.llm.provider import LLMRequest
from app.runs.loop.deps import LoopDeps
from app.runs.loop.terminators import Stop, failed
from app.runs.schemas.runs import ModelDowngrade, RunRead
from app.tasks.store import task_runs

_EVERY = {"day": "daily", "month": "monthly"}


@dataclass(frozen=True)
class Refusal:
    """The limit a call does not fit under."""

    scope: str  # run, task, agent or project
    subject: str
    limit_usd: float
    spent_usd: float
    needed_usd: float
    budget_id: str | None = None
    period: str | None = None


class BudgetExhausted(Exception):
    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        where = f"{refusal.scope} {refusal.subject}"
        if refusal.period:
            where = f"the {_EVERY[refusal.period]} budget of {where}"
        super().__init__(
            f"{where}: {refusal.spent_usd:.6f} of {refusal.limit_usd:.6f} USD spent or "
            f"reserved, and the next call may cost {refusal.needed_usd:.6f}"
        )

    def stop(self) -> Stop:
        stop = failed(StopReason.BUDGET_EXHAUSTED, str(self), retryable=False)
        data: dict[str, Any] = {k: v for k, v in vars(self.refusal).items() if v is not None}
        return replace(stop, event=("agent.budget.exhausted", data))


class BudgetGuard:
    def __init__(self, deps: LoopDeps, agent: AgentRead, lane: str) -> None:
        self.deps = deps
        self.agent = agent
        self.lane = lane
        self.task_id = task_runs.lane_task(lane)
        self._project: str | None = None  # read at the first priced call

    async def downgrade(self, run: RunRead) -> ModelDowngrade | None:
        """A run of a large-tier model starts on the next tier's while a monthly budget it
        counts against is past the threshold (`LOOPWRIGHT_COSTS__DOWNGRADE_AT_PERCENT`)."""
        threshold = self.deps.downgrade_at_percent
        target = self.deps.prices.downgrade(self.agent.model.provider, self.agent.model.name)
        if threshold is None or target is None:
            return None
        tightest = await self.tightest_monthly()
        if tightest is None or tightest[1] < threshold:
            return None
        budget_id, spent_percent = tightest
        return ModelDowngrade(
            from_model=target.from_model,
            to_model=target.to_model,
            from_tier=target.from_tier,
            to_tier=target.to_tier,
            budget_id=budget_id,
            spent_percent=spent_percent,
        )

    async def tightest_monthly(self) -> tuple[str, float] | None:
        """The monthly budget the run counts against that has spent the most of its limit,
        and that percent; None without one."""
        async with self.deps.sessionmaker() as session:
            project = await self._project_in(session)
            today = self.deps.clock().astimezone(UTC).date()
            return await budget_store.tightest_monthly(session, self.agent.id, project, today=today)

    async def _project_in(self, session: AsyncSession) -> str:
        if self._project is None:
            self._project = await task_runs.lane_project(session, self.lane)
        return self._project

    async def admit(self, run: RunRead, request: LLMRequest) -> None:
        """Reserve the call's worst case, or raise `BudgetExhausted`."""
        worst = self._worst_case(request)
        if worst is None:
            return
        spent = Decimal(str(run.usage.cost_usd or 0))
        limit = self.agent.limits.max_cost_usd
        if limit is not None and spent + worst > Decimal(str(limit)):
            raise BudgetExhausted(Refusal("run", run.id, limit, float(spent), float(worst)))
        async with self.deps.sessionmaker.begin() as session:
            if self.task_id is not None:
                await self._check_task(session, run, spent, worst)
            spender = budget_store.Spender(
                run.id,
                self.agent.id,
                await self._project_in(session),
                self.deps.clock().astimezone(UTC).date(),
            )
            over = await budget_store.reserve(session, spender, worst)
        if over is not None:
            standing = over.current
            raise BudgetExhausted(
                Refusal(
                    over.scope.value,
                    over.subject,
                    over.limit_usd,
                    standing.spent_usd + standing.reserved_usd,
                    float(worst),
                    budget_id=over.id,
                    period=over.period.value,
                )
            )

    def _worst_case(self, request: LLMRequest) -> Decimal | None:
        """The most the call may cost: it may be answered by the model it names or by the
        fallback, each priced as its own provider's model (None: neither has a price)."""
        routes = [(self.agent.model.provider, request.model)]
        if (fallback := self.agent.model.fallback_model()) is not None:
            routes.append((fallback.provider, fallback.name))
        prices = [p for p in (self.deps.prices.price(*route) for route in routes) if p]
        if not prices:
            return None
        prompt = tokens.count_request(request.system, request.messages, request.tools)
        return max(price.worst_case(prompt, request.max_tokens) for price in prices)

    async def _check_task(
        self, session: AsyncSession, run: RunRead, spent: Decimal, worst: Decimal
    ) -> None:
        assert self.task_id is not None
        found = await task_runs.task_spending(session, self.task_id, other_than=run.id)
        if found is None:
            return
        limit, others = found
        if others + spent + worst > limit:
            raise BudgetExhausted(
                Refusal("task", self.task_id, float(limit), float(others + spent), float(worst))
            )
