"""Which loop drives a run: its agent's kind, or what `auto` chose for it."""

from __future__ import annotations

from app.agents.schemas import AgentRead
from app.core.vocabulary import ExecutionLoopKind
from app.runs.loop.budget_guard import BudgetGuard
from app.runs.loop.deps import LoopDeps
from app.runs.loop.kinds.auto import select_loop
from app.runs.loop.kinds.hybrid import Hybrid
from app.runs.loop.kinds.plan_execute import PlanExecute
from app.runs.loop.kinds.protocol import ExecutionLoop
from app.runs.loop.kinds.react import ReAct
from app.runs.schemas.runs import LoopSelection
from app.tasks.store import task_runs

AGENTS_CHOICE = "the agent's execution_loop"


async def selection(
    deps: LoopDeps, agent: AgentRead, lane: str, budgets: BudgetGuard
) -> LoopSelection:
    """The kind a run starting now uses: its agent's, or for `auto`, the one its task's
    `estimated_complexity` and its tightest monthly budget call for (a run that is no
    task's: the policy's default)."""
    if agent.execution_loop is not ExecutionLoopKind.AUTO:
        return LoopSelection(kind=agent.execution_loop, reason=AGENTS_CHOICE)
    async with deps.sessionmaker() as session:
        complexity = await task_runs.lane_complexity(session, lane)
    tightest = await budgets.tightest_monthly()
    spent_percent = None if tightest is None else tightest[1]
    chosen = select_loop(complexity, spent_percent, deps.auto_loops)
    return LoopSelection(kind=chosen.kind, reason=f"auto: {chosen.reason}")


def loop_of(kind: ExecutionLoopKind) -> ExecutionLoop:
    """The loop that drives a run of this kind (`auto` is never a run's kind: `selection`
    resolved it when the run started)."""
    if kind is ExecutionLoopKind.REACT:
        return ReAct()
    if kind is ExecutionLoopKind.PLAN_EXECUTE:
        return PlanExecute()
    if kind is ExecutionLoopKind.HYBRID:
        return Hybrid()
    raise ValueError(f"{kind.value} is resolved to a kind when the run starts")
