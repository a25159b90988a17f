"""Which loop kind a run is given, on the real database: its agent's kind, or for `auto`
the one its task's `estimated_complexity` calls for, moved from hybrid to plan_execute
once a monthly budget of its agent is 80 % spent; a run that is no task's takes the
default. A ReAct agent's run records its kind when it starts."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentRead
from app.core.vocabulary import Complexity, ExecutionLoopKind
from app.costs.engine.budgets import BudgetCommands
from app.costs.models.costs import LLM_COST_DAYS
from app.costs.schemas.budgets import BudgetCreate
from app.runs.loop.budget_guard import BudgetGuard
from app.runs.loop.kinds.auto import AutoLoopPolicy
from app.runs.loop.kinds.registry import AGENTS_CHOICE, selection
from app.runs.schemas.runs import LoopSelection
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import CreateTask
from app.tasks.schemas.tasks import TaskCreate
from app.tasks.store.task_runs import task_lane
from tests.support.runs import Harness, say

K = ExecutionLoopKind


async def _auto_agent(h: Harness) -> AgentRead:
    # The choice itself is read here, without running the agent.
    agent = await h.agent(say("done"))
    return agent.model_copy(update={"execution_loop": K.AUTO})


async def _spend(h: Harness, agent_id: str, usd: str) -> None:
    """What its model calls cost this month (as the cost ledger counts it)."""
    async with h.sessionmaker.begin() as session:
        await session.execute(
            insert(LLM_COST_DAYS).values(
                day=h.clock.now.date(),
                agent_id=agent_id,
                project="",
                task_id="",
                provider="scripted",
                model="scripted",
                calls=1,
                input_tokens=0,
                output_tokens=0,
                cache_write_tokens=0,
                cache_read_tokens=0,
                cost_usd=Decimal(usd),
                unpriced_calls=0,
            )
        )


@pytest.mark.parametrize(
    ("complexity", "spent_usd", "kind"),
    [
        (Complexity.SIMPLE, None, K.REACT),
        (Complexity.MEDIUM, None, K.PLAN_EXECUTE),
        (Complexity.EPIC, "7.99", K.HYBRID),
        (Complexity.COMPLEX, "8.00", K.PLAN_EXECUTE),  # 80 % of the 10 USD monthly budget
    ],
)
async def test_auto_reads_the_task_s_complexity_and_the_monthly_budget(
    clean_db: AsyncEngine,
    engine: TaskEngine,
    complexity: Complexity,
    spent_usd: str | None,
    kind: K,
) -> None:
    async with Harness.open(clean_db) as h:
        agent = await _auto_agent(h)
        budget = BudgetCreate.model_validate(
            {"scope": "agent", "subject": agent.id, "period": "month", "limit_usd": 10}
        )
        await BudgetCommands(h.sessionmaker, clock=h.clock).create_keyed(budget)
        if spent_usd is not None:
            await _spend(h, agent.id, spent_usd)
        body = TaskCreate.model_validate({"title": "t", "estimated_complexity": complexity})
        task = (await engine.submit(CreateTask(body, actor="tester"))).task
        lane = task_lane(task.id)

        chosen = await selection(h.deps, agent, lane, BudgetGuard(h.deps, agent, lane))

    assert chosen.kind is kind
    assert chosen.reason.startswith(f"auto: {complexity.value} → ")


async def test_auto_without_a_task_takes_the_default_and_hybrid_may_fall_back(
    clean_db: AsyncEngine, engine: TaskEngine
) -> None:
    async with Harness.open(clean_db) as h:
        agent = await _auto_agent(h)
        lane = "conversation:conv_x"
        plain = await selection(h.deps, agent, lane, BudgetGuard(h.deps, agent, lane))
        body = TaskCreate.model_validate({"title": "t", "estimated_complexity": "epic"})
        epic = task_lane((await engine.submit(CreateTask(body, actor="tester"))).task.id)
        h.deps.auto_loops = AutoLoopPolicy(hybrid_fallback=K.REACT)
        fell_back = await selection(h.deps, agent, epic, BudgetGuard(h.deps, agent, epic))

    assert plain == LoopSelection(kind=K.REACT, reason="auto: no task complexity: the default")
    assert fell_back.kind is K.REACT
    assert fell_back.reason == "auto: epic → hybrid; hybrid falls back → react"


async def test_a_react_run_records_its_kind_when_it_starts(clean_db: AsyncEngine) -> None:
    async with Harness.open(clean_db) as h:
        run = await h.finish(await h.agent(say("done")))

    assert run.result == "done"
    assert run.execution_loop == LoopSelection(kind=K.REACT, reason=AGENTS_CHOICE)
