"""Which loop drives a run of each kind (one line per kind), and which kind a run starting
now takes: its agent's, or what `auto` chose for it.

A kind's *name* stays a declared vocabulary (`ExecutionLoopKind`): the API's schema and
the `agents` table's CHECK refuse a name no process knows, before any run exists, and every
process (`serve`, each `worker`) reads the same list. `LoopKinds` refuses to be built
without a loop for each declared name, so a name is never accepted that no worker drives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

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

# A fresh loop for each execution (a kind keeps no state between them, but may within one).
LoopFactory = Callable[[], ExecutionLoop]


class LoopKinds:
    """The loops a process's workers drive runs with, by kind: one for every declared kind
    but `auto`, which is resolved to one of them when a run starts."""

    def __init__(self, loops: Mapping[ExecutionLoopKind, LoopFactory]) -> None:
        if ExecutionLoopKind.AUTO in loops:
            raise ValueError("auto is resolved to a kind when a run starts: it has no loop")
        missing = set(ExecutionLoopKind) - {ExecutionLoopKind.AUTO} - loops.keys()
        if missing:
            names = ", ".join(sorted(kind.value for kind in missing))
            raise ValueError(f"no loop for the declared kind(s) {names}")
        self.loops: Mapping[ExecutionLoopKind, LoopFactory] = MappingProxyType(dict(loops))

    def loop_of(self, kind: ExecutionLoopKind) -> ExecutionLoop:
        """The loop that drives a run of this kind (`auto` is never a run's kind:
        `selection` resolved it when the run started)."""
        factory = self.loops.get(kind)
        if factory is None:
            raise ValueError(f"{kind.value} is resolved to a kind when the run starts")
        return factory()


LOOP_KINDS = LoopKinds(
    {
        ExecutionLoopKind.REACT: ReAct,
        ExecutionLoopKind.PLAN_EXECUTE: PlanExecute,
        ExecutionLoopKind.HYBRID: Hybrid,
    }
)


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
