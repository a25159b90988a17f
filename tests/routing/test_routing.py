"""Task routing on the real database: each strategy from a table of agents and a task to
the agent expected, the capacity held under racing routers, the order and the waiting
rules of the sweep."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate
from app.core.errors import InvalidTransition, NotFound
from app.core.states import TaskStatus
from app.core.streams import TASK_STREAM
from app.core.vocabulary import AssignmentStrategy
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.llm.prices import PriceTable
from app.routing.engine.base import Candidate, Choice, RoutingContext, Unroutable
from app.routing.engine.hierarchical import Hierarchical
from app.routing.engine.router import TaskRouter, TaskUnroutable
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_mutations import AssignTask, CreateTask, DeleteTask, TransitionTask
from app.tasks.schemas.tasks import RouteRequest, TaskCreate, TaskRead
from app.tasks.store import tasks as task_store
from app.workflows.engine.workflows import WorkflowCommands
from app.workflows.schemas.workflows import ActivateRequest, WorkflowCreate
from tests.support.engine import StartEngine

S = AssignmentStrategy
OPUS = {"provider": "anthropic", "name": "claude-opus-4-5"}  # $5 + $25 per MTok
SONNET = {"provider": "anthropic", "name": "claude-sonnet-4-5"}  # $3 + $15
HAIKU = {"provider": "anthropic", "name": "claude-haiku-4-5"}  # $1 + $5
UNPRICED = {"provider": "scripted", "name": "local", "script": [{"text": "done"}]}


@dataclass(frozen=True)
class A:
    """An agent of a table: `held`, the tasks it holds before the routing."""

    name: str
    role: str = "engineer"
    skills: tuple[str, ...] = ()
    capacity: int = 2
    held: int = 0
    model: dict[str, Any] = field(default_factory=lambda: HAIKU)
    tier: str = "medium"
    reports_to: str | None = None  # a name of the table


class World:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        engine: TaskEngine,
        bus: EventBus | None = None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.engine = engine
        self.engine_bus = bus or EventBus()
        self.agents = AgentCommands(sessionmaker)
        self.ids: dict[str, str] = {}
        self.router = TaskRouter(sessionmaker, engine, PriceTable())

    def name(self, agent_id: str | None) -> str | None:
        return next((n for n, i in self.ids.items() if i == agent_id), agent_id)

    async def add(self, *agents: A) -> None:
        """In table order, so that ids sort as the table reads (ties go to the first)."""
        for a in agents:
            body = AgentCreate.model_validate(
                {
                    "name": a.name,
                    "role": a.role,
                    "skills": list(a.skills),
                    "max_concurrent_tasks": a.capacity,
                    "cost_tier": a.tier,
                    "model": a.model,
                    "reports_to": self.ids[a.reports_to] if a.reports_to else None,
                }
            )
            self.ids[a.name] = (await self.agents.create(body)).id
            for i in range(a.held):
                await self.task(f"{a.name}'s task {i}", assigned_to=self.ids[a.name])
            await asyncio.sleep(0.002)  # ids carry milliseconds

    async def task(self, title: str = "the task", **fields: Any) -> TaskRead:
        body = TaskCreate.model_validate({"title": title, **fields})
        return (await self.engine.submit(CreateTask(body, actor="tester"))).task

    async def get(self, task_id: str) -> TaskRead:
        async with self.sessionmaker() as session:
            task = await task_store.get_task(session, task_id)
        assert task is not None
        return task

    async def reach(self, task_id: str, status: TaskStatus) -> None:
        """Wait (woken by each committed task change) until the task has this status."""
        with self.engine_bus.subscribe(TASK_STREAM) as wake:
            async with asyncio.timeout(10):
                while (await self.get(task_id)).status is not status:
                    await wake.wait(0.05)

    async def events(self, task_id: str) -> list[tuple[str, dict[str, Any]]]:
        async with self.sessionmaker() as session:
            events = await event_store.read_events(session, TASK_STREAM, after=0, limit=1_000)
        return [(e.type, e.data) for e in events if e.data["task"]["id"] == task_id]


@pytest.fixture
def world(
    sessionmaker: async_sessionmaker[AsyncSession], engine: TaskEngine, bus: EventBus
) -> World:
    return World(sessionmaker, engine, bus)


# (strategy, agents, task fields, request fields, the agent expected or a reason's words)
CASES: list[tuple[str, S, list[A], dict[str, Any], dict[str, Any], str]] = [
    ("manual: the agent named", S.MANUAL, [A("a"), A("b")], {}, {"agent": "b"}, "b"),
    ("manual: none named", S.MANUAL, [A("a")], {}, {}, "needs an agent"),
    ("manual: unknown", S.MANUAL, [A("a")], {}, {"agent": "zed"}, "no agent has"),
    ("manual: full", S.MANUAL, [A("a", capacity=1, held=1)], {}, {"agent": "a"}, "capacity"),
    (
        "role_based: role and skills",
        S.ROLE_BASED,
        [A("a", "writer", ("python",)), A("b", "writer", ("python", "sql")), A("c", "editor")],
        {},
        {"role": "writer", "skills": ["sql"]},
        "b",
    ),
    (
        "role_based: the least busy of the role",
        S.ROLE_BASED,
        [A("a", "writer", held=1), A("b", "writer", held=0), A("c", "editor")],
        {},
        {"role": "writer"},
        "b",
    ),
    (
        "role_based: a tie goes to the oldest",
        S.ROLE_BASED,
        [A("a", "writer"), A("b", "writer")],
        {},
        {"role": "writer"},
        "a",
    ),
    ("role_based: no role", S.ROLE_BASED, [A("a")], {}, {}, "needs a role"),
    (
        "role_based: nobody of the role",
        S.ROLE_BASED,
        [A("a", "writer")],
        {},
        {"role": "editor"},
        "no agent is of role 'editor'",
    ),
    (
        "role_based: the role is full",
        S.ROLE_BASED,
        [A("a", "writer", capacity=1, held=1), A("b", "editor")],
        {},
        {"role": "writer"},
        "every agent of role 'writer' is at capacity (1 of them)",
    ),
    (
        "load_balanced: fewest held",
        S.LOAD_BALANCED,
        [A("a", capacity=3, held=2), A("b", capacity=3, held=1), A("c", capacity=2, held=1)],
        {},
        {},
        "b",
    ),
    (
        "load_balanced: the full are left out",
        S.LOAD_BALANCED,
        [A("a", capacity=1, held=1), A("b", capacity=5, held=3)],
        {},
        {},
        "b",
    ),
    (
        "load_balanced: skills filter",
        S.LOAD_BALANCED,
        [A("a"), A("b", skills=("rust",), held=1)],
        {},
        {"skills": ["rust"]},
        "b",
    ),
    (
        "load_balanced: nobody with the skills",
        S.LOAD_BALANCED,
        [A("a")],
        {},
        {"skills": ["cobol"]},
        "no agent is with skills cobol",
    ),
    (
        "auction: a simple task suits a low tier",
        S.AUCTION,
        [A("a", tier="high"), A("b", tier="low")],
        {"estimated_complexity": "simple"},
        {},
        "b",
    ),
    (
        "auction: an epic suits a high tier",
        S.AUCTION,
        [A("a", tier="low"), A("b", tier="high")],
        {"estimated_complexity": "epic"},
        {},
        "b",
    ),
    (
        "auction: skills outbid spare capacity",
        S.AUCTION,
        [A("a", skills=("go",), capacity=4), A("b", skills=("go", "sql"), capacity=4, held=2)],
        {},
        {"skills": ["go", "sql"]},
        "b",
    ),
    (
        "auction: only the role bids",
        S.AUCTION,
        [A("a", "writer"), A("b", "editor", tier="low")],
        {"estimated_complexity": "simple"},
        {"role": "writer"},
        "a",
    ),
    ("auction: no bidder", S.AUCTION, [A("a", "writer")], {}, {"role": "x"}, "no agent"),
    (
        "cost_optimised: the cheapest model",
        S.COST_OPTIMISED,
        [A("a", model=OPUS), A("b", model=HAIKU), A("c", model=SONNET)],
        {},
        {},
        "b",
    ),
    (
        "cost_optimised: unpriced after priced",
        S.COST_OPTIMISED,
        [A("a", model=UNPRICED), A("b", model=OPUS)],
        {},
        {},
        "b",
    ),
    (
        "cost_optimised: the lower tier at one price",
        S.COST_OPTIMISED,
        [A("a", tier="high"), A("b", tier="low"), A("c", tier="medium")],
        {},
        {},
        "b",
    ),
    ("cost_optimised: nobody capable", S.COST_OPTIMISED, [A("a")], {}, {"role": "x"}, "no agent"),
    (
        "cost_optimised: the cheapest with room and skills",
        S.COST_OPTIMISED,
        [A("a", capacity=1, held=1), A("b", model=OPUS, skills=("sql",)), A("c", model=SONNET)],
        {},
        {"skills": ["sql"]},
        "b",
    ),
]
TEAM = [
    A("lead", "engineer"),
    A("dev1", "engineer", reports_to="lead"),
    A("dev2", "engineer", ("rust",), reports_to="lead"),
    A("intern", "engineer", reports_to="dev1"),
]
CASES += [
    ("hierarchical: down to a leaf", S.HIERARCHICAL, TEAM, {}, {"role": "engineer"}, "intern"),
    (
        "hierarchical: a full team is passed over",
        S.HIERARCHICAL,
        [
            A("lead", "engineer"),
            A("dev1", "engineer", capacity=1, held=1, reports_to="lead"),
            A("dev2", "engineer", reports_to="lead"),
            A("intern", "engineer", capacity=1, held=1, reports_to="dev1"),
        ],
        {},
        {"role": "engineer"},
        "dev2",
    ),
    (
        "hierarchical: a busy manager whose report has room",
        S.HIERARCHICAL,
        [
            A("lead", "engineer"),
            A("dev1", "engineer", capacity=1, held=1, reports_to="lead"),
            A("intern", "engineer", reports_to="dev1"),
        ],
        {},
        {"role": "engineer"},
        "intern",
    ),
    (
        "hierarchical: skills choose the report",
        S.HIERARCHICAL,
        TEAM,
        {},
        {"role": "engineer", "skills": ["rust"]},
        "dev2",
    ),
    ("hierarchical: the manager named", S.HIERARCHICAL, TEAM, {}, {"agent": "dev2"}, "dev2"),
    (
        "hierarchical: the manager keeps it",
        S.HIERARCHICAL,
        [A("lead", "engineer"), A("dev1", "engineer", capacity=1, held=1, reports_to="lead")],
        {},
        {"role": "engineer"},
        "lead",
    ),
    (
        "hierarchical: everyone full",
        S.HIERARCHICAL,
        [A("lead", "engineer", capacity=1, held=1)],
        {},
        {"role": "engineer"},
        "nobody in the team of 'lead'",
    ),
    ("hierarchical: no head", S.HIERARCHICAL, TEAM, {}, {"role": "designer"}, "reports to nobody"),
    ("hierarchical: no role", S.HIERARCHICAL, TEAM, {}, {}, "needs a role or a manager"),
    ("hierarchical: unknown manager", S.HIERARCHICAL, TEAM, {}, {"agent": "x"}, "no agent has"),
]


@pytest.mark.parametrize(
    ("strategy", "agents", "task_fields", "request_fields", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_each_strategy_routes_as_its_table_says(
    world: World,
    strategy: S,
    agents: list[A],
    task_fields: dict[str, Any],
    request_fields: dict[str, Any],
    expected: str,
) -> None:
    await world.add(*agents)
    task = await world.task(**task_fields)
    request = RouteRequest(strategy=strategy, **request_fields)
    if expected in world.ids:
        routed = await world.router.route(task.id, request, "tester")
        assert (routed.status, world.name(routed.assigned_to)) == (TaskStatus.ASSIGNED, expected)
        [*_, (event, data)] = await world.events(task.id)
        assert (event, data["strategy"], data["to"]) == ("task.transitioned", strategy, "assigned")
        return
    with pytest.raises(TaskUnroutable) as refused:
        await world.router.route(task.id, request, "tester")
    assert expected in refused.value.reason
    assert (await world.get(task.id)).status is TaskStatus.CREATED
    [*_, (event, data)] = await world.events(task.id)
    assert (event, data["reason"], data["strategy"]) == (
        "task.routing_failed",
        refused.value.reason,
        strategy,
    )


async def test_hierarchical_routing_records_the_delegation_chain(world: World) -> None:
    await world.add(*TEAM)
    task = await world.task(delegation_chain=["product_manager"])
    request = RouteRequest(strategy=S.HIERARCHICAL, role="engineer")
    routed = await world.router.route(task.id, request, "tester")
    chain = [world.name(agent) for agent in routed.delegation_chain]
    assert chain == ["product_manager", "lead", "dev1", "intern"]


async def test_only_a_created_task_is_routed(world: World) -> None:
    await world.add(A("a"))
    task = await world.task(assigned_to="someone")
    request = RouteRequest(strategy=S.LOAD_BALANCED)
    with pytest.raises(InvalidTransition, match="only a created task is routed"):
        await world.router.route(task.id, request, "tester")
    with pytest.raises(NotFound):
        await world.router.route("task_missing", request, "tester")


async def test_the_writer_refuses_an_assignment_past_capacity(world: World) -> None:
    """Even an assignment chosen on a stale count: the writer counts again under the
    agent's lock, its own batch included."""
    await world.add(A("a", capacity=2, held=1))
    first, second = await world.task("one"), await world.task("two")
    assign = [
        AssignTask(t.id, world.ids["a"], S.MANUAL, "tester", "stale") for t in (first, second)
    ]
    outcomes = await asyncio.gather(
        *(world.engine.submit(m) for m in assign), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(refused) == 1 and getattr(refused[0], "code", None) == "agent_at_capacity"
    with pytest.raises(NotFound, match="agt_gone"):
        await world.engine.submit(AssignTask(first.id, "agt_gone", S.MANUAL, "tester", "x"))


async def test_racing_routers_of_two_processes_never_overfill_an_agent(
    sessionmaker: async_sessionmaker[AsyncSession], start_engine: StartEngine
) -> None:
    """Two TaskEngines (two processes' writers) and their routers route 20 tasks at once
    to three agents of capacity 2: six are assigned, two to each, the rest stay created."""
    first, second = start_engine(), start_engine()
    world = World(sessionmaker, first)
    await world.add(A("a"), A("b"), A("c"))
    tasks = [await world.task(f"task {i}") for i in range(20)]
    routers = [world.router, TaskRouter(sessionmaker, second, PriceTable())]
    request = RouteRequest(strategy=S.LOAD_BALANCED)
    outcomes = await asyncio.gather(
        *(routers[i % 2].attempt(t, request, "tester") for i, t in enumerate(tasks))
    )
    assigned = [o for o in outcomes if isinstance(o, TaskRead)]
    holders = sorted(world.name(t.assigned_to) or "" for t in assigned)
    assert holders == ["a", "a", "b", "b", "c", "c"]
    unroutable = [o for o in outcomes if isinstance(o, Unroutable)]
    assert len(unroutable) == 14
    assert {u.reason for u in unroutable} == {"every agent available is at capacity (3 of them)"}


async def test_a_strategy_that_chooses_a_full_agent_gets_no_loop(
    sessionmaker: async_sessionmaker[AsyncSession], engine: TaskEngine
) -> None:
    """A strategy that keeps choosing an agent the writer refused is stopped at once."""

    class Stubborn:
        async def choose(
            self, task: TaskRead, candidates: Any, context: RoutingContext
        ) -> Choice | Unroutable:
            return Choice(stubborn.ids["a"], "always a")

    stubborn = World(sessionmaker, engine)
    await stubborn.add(A("a", capacity=1, held=1))
    stubborn.router = TaskRouter(
        sessionmaker, engine, PriceTable(), strategies={S.MANUAL: Stubborn()}
    )
    task = await stubborn.task()
    outcome = await stubborn.router.attempt(task, RouteRequest(strategy=S.MANUAL), "tester")
    assert outcome == Unroutable(f"agent {stubborn.ids['a']!r} is at capacity")


async def _complete(engine: TaskEngine, task: TaskRead) -> None:
    for status in (TaskStatus.IN_PROGRESS, TaskStatus.IN_REVIEW, TaskStatus.COMPLETED):
        task = (await engine.submit(TransitionTask(task.id, status, "tester"))).task


async def test_the_sweep_routes_the_most_urgent_first_and_notes_the_rest_once(
    world: World,
) -> None:
    await world.add(A("a", capacity=1))
    routing = {"strategy": "load_balanced"}
    low = await world.task("low", priority="low", routing=routing)
    critical = await world.task("critical", priority="critical", routing=routing)
    high = await world.task("high", priority="high", routing=routing)
    medium_old = await world.task("medium, older", priority="medium", routing=routing)
    assert await world.router.sweep() == 1
    assert (await world.get(critical.id)).assigned_to == world.ids["a"]
    for waiting in (low, high, medium_old):
        assert [e for e, _ in await world.events(waiting.id)] == [
            "task.created",
            "task.routing_failed",
        ]
    assert await world.router.sweep() == 0  # the same reasons are not noted again
    assert [e for e, _ in await world.events(high.id)] == ["task.created", "task.routing_failed"]
    await _complete(world.engine, await world.get(critical.id))  # room comes free
    assert await world.router.sweep() == 1
    assert (await world.get(high.id)).status is TaskStatus.ASSIGNED
    assert (await world.get(low.id)).status is TaskStatus.CREATED


async def test_the_sweep_waits_for_dependencies(world: World) -> None:
    await world.add(A("a"))
    first = await world.task("first", assigned_to="a person")
    second = await world.task(
        "second", dependencies=[first.id], routing={"strategy": "role_based", "role": "engineer"}
    )
    assert await world.router.sweep() == 0
    assert [e for e, _ in await world.events(second.id)] == ["task.created"]
    await _complete(world.engine, first)
    assert await world.router.sweep() == 1
    assert (await world.get(second.id)).assigned_to == world.ids["a"]


async def test_the_router_sweeps_when_a_routed_task_is_created_or_room_comes_free(
    world: World,
) -> None:
    await world.add(A("a", capacity=1))
    world.router.start()
    try:
        routing = {"strategy": "load_balanced"}
        first = await world.task("first", routing=routing)
        second = await world.task("second", routing=routing)
        await world.reach(first.id, TaskStatus.ASSIGNED)
        await _complete(world.engine, await world.get(first.id))
        await world.reach(second.id, TaskStatus.ASSIGNED)
    finally:
        await world.router.stop()
    assert (await world.get(second.id)).assigned_to == world.ids["a"]


def test_a_candidate_counts_its_room_and_covers_skills() -> None:
    from app.agents.schemas import AgentRead

    agent = AgentRead.model_validate(
        {
            "id": "agt_1",
            "name": "a",
            "skills": ["go"],
            "max_concurrent_tasks": 2,
            "model": HAIKU,
            "version": 1,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        }
    )
    candidate = Candidate(agent, 1)
    assert candidate.has_room and candidate.covers(["go"]) and not candidate.covers(["go", "c"])
    assert not Candidate(agent, 2).has_room
    assert RoutingContext(RouteRequest(strategy=S.MANUAL)).find("a") is None


async def test_the_sweep_leaves_a_stopped_workflow_s_tasks_alone(
    world: World, bus: EventBus
) -> None:
    workflows = WorkflowCommands(world.sessionmaker, bus, world.engine)
    workflow = await workflows.create(
        WorkflowCreate.model_validate(
            {
                "name": "one routed step",
                "nodes": [
                    {"id": "s", "type": "start"},
                    {
                        "id": "who",
                        "type": "agent_assignment",
                        "config": {"strategy": "load_balanced"},
                    },
                    {"id": "t", "type": "task", "config": {"title": "Step"}},
                    {"id": "e", "type": "end"},
                ],
                "edges": [
                    {"id": "e1", "source": "s", "target": "who"},
                    {"id": "e2", "source": "who", "target": "t"},
                    {"id": "e3", "source": "t", "target": "e"},
                ],
            }
        )
    )
    execution = (await workflows.activate(workflow.id, ActivateRequest(), "tester")).execution
    await workflows.cancel(execution.id, None, "tester")
    await world.add(A("a"))
    assert await world.router.sweep() == 0
    assert (await world.get(execution.node_tasks["t"])).status is TaskStatus.CREATED


async def test_a_sweep_goes_on_past_a_task_that_moved_under_it(
    sessionmaker: async_sessionmaker[AsyncSession], engine: TaskEngine
) -> None:
    """Routed by hand while the strategy chose, or deleted before its failure was noted:
    logged, and the sweep goes on to the next task."""

    class Meddler:
        async def choose(
            self, task: TaskRead, candidates: Any, context: RoutingContext
        ) -> Choice | Unroutable:
            if task.title == "taken":
                await engine.submit(
                    TransitionTask(
                        task.id, TaskStatus.ASSIGNED, "person", overrides={"assigned_to": "ann"}
                    )
                )
                return Choice(meddled.ids["a"], "too late")
            await engine.submit(DeleteTask(task.id, "person"))
            return Unroutable("nobody")

    meddled = World(sessionmaker, engine)
    await meddled.add(A("a"))
    meddled.router = TaskRouter(
        sessionmaker, engine, PriceTable(), strategies={S.MANUAL: Meddler()}
    )
    taken = await meddled.task("taken", routing={"strategy": "manual"})
    await meddled.task("deleted", routing={"strategy": "manual"})
    assert await meddled.router.sweep() == 0
    assert (await meddled.get(taken.id)).assigned_to == "ann"
    with pytest.raises(InvalidTransition, match="only a created task is routed"):
        await engine.submit(AssignTask(taken.id, meddled.ids["a"], S.MANUAL, "tester", "x"))


async def test_a_reporting_loop_does_not_trap_the_walk() -> None:
    """The commands refuse loops; a walk over one (written around them) still ends."""
    from app.agents.schemas import AgentRead

    def member(agent_id: str, reports_to: str | None, held: int) -> Candidate:
        agent = AgentRead.model_validate(
            {
                "id": agent_id,
                "name": agent_id,
                "role": "engineer",
                "max_concurrent_tasks": 1,
                "model": HAIKU,
                "reports_to": reports_to,
                "version": 1,
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
            }
        )
        return Candidate(agent, held)

    team = {c.id: c for c in (member("m", "y", 0), member("x", "m", 1), member("y", "x", 1))}
    context = RoutingContext(RouteRequest(strategy=S.HIERARCHICAL, agent="m"), team)
    choice = await Hierarchical().choose(a_task(), list(team.values()), context)
    assert choice == Choice("m", "delegated: m", ("m",))
    assert context.find("x") is team["x"]


def a_task() -> TaskRead:
    return TaskRead.model_validate(
        {
            "id": "task_1",
            "title": "t",
            "created_by": "tester",
            "status": "created",
            "retry_count": 0,
            "version": 1,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        }
    )
