"""The TaskRouter: routes a `created` task to an agent.

One attempt: load every agent with how many tasks it holds and its model's price, keep
those with room as the candidates, let the strategy choose, and submit an `AssignTask`.
The TaskEngine's writer locks the agent's row and counts its tasks again in the
transaction that writes the assignment, so routers racing (in this process or in
others) never put an agent over its `max_concurrent_tasks`; the loser hears
`agent_at_capacity`, and the attempt chooses again with that agent counted full. When
no agent fits, the task stays `created` and its stream gets `task.routing_failed` with
the reason.

`route()` is a person's request (`POST /v1/tasks/{id}/route`): it routes now and says
why not. Tasks that carry a `routing` request are routed by `sweep()`, most urgent first
(priority, then age), once their dependencies are completed: the router observes the
TaskEngine and sweeps when such a task is created or patched, and when an agent's task
ends (room, and perhaps a dependency, came free), and every `interval_s` for changes
made by other processes. A sweep notes a task's failure again only when its reason
changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.store import agent_loads
from app.agents.store import agents as agent_store
from app.core.config import RoutingSettings
from app.core.errors import AppError, Conflict, InvalidTransition, NotFound, ProblemCode
from app.core.states import TASK_HELD, TaskStatus, allowed_targets
from app.core.vocabulary import AssignmentStrategy
from app.llm.prices import PriceTable
from app.llm.provider import Provider
from app.routing.engine.auction import Auction
from app.routing.engine.base import Candidate, Choice, RoutingContext, RoutingStrategy, Unroutable
from app.routing.engine.cost_optimised import CostOptimised
from app.routing.engine.hierarchical import Hierarchical
from app.routing.engine.model_scorer import ModelScorer
from app.routing.engine.simple import LoadBalanced, Manual, RoleBased
from app.runtime.components import Loop, Wakes
from app.tasks.engine.task_engine import MutationResult, TaskEngine
from app.tasks.engine.task_mutations import AgentAtCapacity, AssignTask, NoteUnroutable
from app.tasks.engine.task_runs import execution_stopped
from app.tasks.schemas.tasks import RouteRequest, TaskRead
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store

log = logging.getLogger(__name__)

ACTOR = "router"
BATCH = 500

STRATEGIES: Mapping[AssignmentStrategy, RoutingStrategy] = {
    AssignmentStrategy.MANUAL: Manual(),
    AssignmentStrategy.ROLE_BASED: RoleBased(),
    AssignmentStrategy.LOAD_BALANCED: LoadBalanced(),
    AssignmentStrategy.AUCTION: Auction(),
    AssignmentStrategy.HIERARCHICAL: Hierarchical(),
    AssignmentStrategy.COST_OPTIMISED: CostOptimised(),
}


def strategies(
    settings: RoutingSettings,
    providers: Callable[..., Provider],
    prices: PriceTable,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> Mapping[AssignmentStrategy, RoutingStrategy]:
    """The strategies, with the auction's bids from the configured scorer model, if any."""
    if settings.auction_scorer is None:
        return STRATEGIES
    scorer = ModelScorer(
        settings.auction_scorer,
        providers,
        prices,
        sessionmaker,
        max_usd=settings.auction_max_usd,
    )
    return {**STRATEGIES, AssignmentStrategy.AUCTION: Auction(scorer)}


class TaskUnroutable(Conflict):
    """No agent can take the task now; it stays `created`, and `reason` says why."""

    code = ProblemCode.UNROUTABLE

    def __init__(self, strategy: AssignmentStrategy, reason: str) -> None:
        self.strategy = strategy
        self.reason = reason
        super().__init__(f"{strategy.value}: {reason}")

    def extensions(self) -> dict[str, Any]:
        return {"strategy": self.strategy.value, "reason": self.reason}


class TaskRouter:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        tasks: TaskEngine,
        prices: PriceTable,
        *,
        strategies: Mapping[AssignmentStrategy, RoutingStrategy] = STRATEGIES,
        interval_s: float = 30.0,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._tasks = tasks
        self._prices = prices
        self._strategies = strategies
        # A sweep at start (tasks left waiting by the last process), when a task comes to
        # wait for an agent or frees one (`_on_task_change`), else every `interval_s`.
        self.loop = Loop("task-router", self.sweep, Wakes(interval_s))
        self._noted: dict[str, str] = {}  # the last failure noted per task, by sweeps

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Observe the TaskEngine, and sweep now (tasks left waiting by the last run)."""
        self._tasks.add_observer(self._on_task_change)
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def _on_task_change(self, result: MutationResult) -> None:
        change = result.change
        if change is None or not change.writes_row:
            return
        before, after = change.before, change.after
        waiting = after is not None and after.status is TaskStatus.CREATED and after.routing
        freed = (
            before is not None
            and before.status in TASK_HELD
            and (after is None or after.status not in TASK_HELD)
        )
        if waiting or freed:
            self.loop.wake()

    # -- routing ---------------------------------------------------------------------

    async def route(self, task_id: str, request: RouteRequest, actor: str) -> TaskRead:
        """Route a `created` task now: the task as assigned, or `unroutable` (after its
        `task.routing_failed` event is written)."""
        async with self._sessionmaker() as session:
            task = await task_store.get_task(session, task_id)
        if task is None:
            raise NotFound("task", task_id)
        if task.status is not TaskStatus.CREATED:
            allowed = allowed_targets(
                task.status, retry_count=task.retry_count, max_retries=task.max_retries
            )
            raise InvalidTransition(
                task.status, TaskStatus.ASSIGNED, allowed, " (only a created task is routed)"
            )
        outcome = await self.attempt(task, request, actor)
        if isinstance(outcome, Unroutable):
            await self._tasks.submit(
                NoteUnroutable(task.id, request.strategy, actor, outcome.reason)
            )
            raise TaskUnroutable(request.strategy, outcome.reason)
        return outcome

    async def attempt(
        self, task: TaskRead, request: RouteRequest, actor: str
    ) -> TaskRead | Unroutable:
        """Choose and assign; choose again while the chosen agent turns out to be full."""
        strategy = self._strategies[request.strategy]
        full: set[str] = set()  # refused by the writer: full as of this attempt
        while True:
            context = await self._context(request, full)
            candidates = [c for c in context.agents.values() if c.has_room]
            choice = await strategy.choose(task, candidates, context)
            if isinstance(choice, Unroutable):
                return choice
            if choice.agent_id in full:  # a strategy must not choose a full agent
                return Unroutable(f"agent {choice.agent_id!r} is at capacity")
            mutation = AssignTask(
                task.id, choice.agent_id, request.strategy, actor, choice.reason, choice.delegation
            )
            try:
                return (await self._tasks.submit(mutation)).task
            except AgentAtCapacity:
                full.add(choice.agent_id)

    async def plan(
        self, task: TaskRead, request: RouteRequest, planned: Mapping[str, int]
    ) -> Choice | Unroutable:
        """Choose an agent for work that starts later (a coordination's subtask), assigning
        nothing. Every agent is a candidate whatever it holds now: room is checked when the
        work is assigned. `planned` counts, per agent, the work planned to run beside this
        one, so that one wave spreads over the capable agents."""
        context = await self._context(request, set(), planned=planned)
        candidates = list(context.agents.values())
        return await self._strategies[request.strategy].choose(task, candidates, context)

    async def _context(
        self, request: RouteRequest, full: set[str], *, planned: Mapping[str, int] | None = None
    ) -> RoutingContext:
        async with self._sessionmaker() as session:
            agents = await agent_store.all_agents(session)
            held = await agent_loads.held_counts(session)
        candidates = {}
        for agent in agents:
            count = held.get(agent.id, 0)
            if agent.id in full:
                count = max(count, agent.max_concurrent_tasks)
            price = self._price(agent.model.provider, agent.model.name)
            if planned is None:
                candidates[agent.id] = Candidate(agent, count, price)
            else:
                count += planned.get(agent.id, 0)
                candidates[agent.id] = Candidate(agent, count, price, bounded=False)
        return RoutingContext(request, candidates)

    def _price(self, provider: str, model: str) -> Decimal | None:
        price = self._prices.price(provider, model)
        return None if price is None else price.input + price.output

    # -- tasks that route themselves ---------------------------------------------------

    async def sweep(self) -> int:
        """Route the waiting tasks that carry a `routing` request and are ready (their
        dependencies completed, their workflow execution running), most urgent first;
        how many were assigned."""
        async with self._sessionmaker() as session:
            waiting = await task_store.routable_tasks(session, limit=BATCH)
        routed = 0
        for task in waiting:
            assert task.routing is not None  # what routable_tasks selects
            async with self._sessionmaker() as session:
                if await task_run_store.unfinished_dependencies(session, task):
                    continue
                if await execution_stopped(session, task.id):
                    continue
            try:
                outcome = await self.attempt(task, task.routing, ACTOR)
            except AppError as exc:  # it moved meanwhile (routed by hand, deleted)
                log.info("task %s not routed: %s", task.id, exc)
                continue
            if isinstance(outcome, Unroutable):
                await self._note(task, task.routing.strategy, outcome.reason)
            else:
                self._noted.pop(task.id, None)
                routed += 1
        return routed

    async def _note(self, task: TaskRead, strategy: AssignmentStrategy, reason: str) -> None:
        if self._noted.get(task.id) == reason:
            return
        try:
            await self._tasks.submit(NoteUnroutable(task.id, strategy, ACTOR, reason))
        except AppError as exc:
            log.info("task %s: routing failure not noted: %s", task.id, exc)
            return
        self._noted[task.id] = reason
