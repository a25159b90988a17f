"""The composition root: builds every service and component of a process once, in one
order with no object changed after it is built, starts the components in order and stops
them in reverse, also when start-up fails halfway.

Start order: database (embedded when no URL) → migrations → tokenizer → NOTIFY listener →
model providers → the workflow observer and the TaskEngine → task runs → task router →
review gate → coordinator → approval sweep → sprint clock → merge queue → idempotency sweep
→ history retention (only when a window is set) → group committer → reconciler (its first
pass reconciles at boot) → scheduler → chain relay → webhook deliverer → log retention →
MCP servers and workers → the component watchdog → the components an embedding
application adds. Stopping runs the same list backwards, after open streams are told to
end: workers stop claiming and give running loops their grace period, the deliverer gives
its attempts theirs, …, the listener stops, the pool is disposed, the embedded server
stops. The components with a wake loop (`runtime/components.py`) are supervised: `/readyz`
and the overview read them through `Components` (`runtime/lifecycle.py`)."""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.agents.engine import AgentCommands
from app.approvals.engine.approval_timeouts import ApprovalTimeoutScheduler
from app.approvals.engine.approvals import ApprovalCommands
from app.coordination.engine.commands import CoordinationCommands
from app.coordination.engine.coordinator import Coordinator
from app.coordination.engine.decomposer import Decomposer
from app.coordination.tools import coordinate_task_tool
from app.core.breakers import Breakers, CircuitBreakerPolicy
from app.core.config import Settings
from app.core.sessions import Sessions
from app.costs.engine.budgets import BudgetCommands
from app.db import migrate
from app.db.connection import libpq_url, make_engine, make_sessionmaker
from app.db.embedded_pg import start_embedded
from app.db.errors import is_connectivity_error
from app.db.idempotency_sweep import IdempotencySweep
from app.events.api.streams import read_stream, stream_end
from app.events.engine.bus import EventBus
from app.events.engine.pg_listener import PgListener
from app.events.engine.stream_slots import StreamSlots
from app.events.engine.stream_tails import StreamTails
from app.llm import tokens
from app.llm.policy import LLMRetryPolicy
from app.llm.prices import PriceTable
from app.llm.providers.registry import Providers, provider_warnings
from app.routing.engine.router import TaskRouter, strategies
from app.runs.engine.history_retention import HistoryRetention
from app.runs.engine.reconciler import Reconciler
from app.runs.engine.runs import RunCommands
from app.runs.engine.workers import WorkerPool
from app.runs.loop.boundary import BoundaryWrite, boundary_committer
from app.runs.loop.deps import LoopDeps, ProviderFactory
from app.runs.loop.kinds.auto import AutoLoopPolicy
from app.runs.loop.retry import RunRetryPolicy, ToolRetryPolicy
from app.runs.loop.run_loop import RunLoop
from app.runs.loop.tool_runner import ToolRunner
from app.runs.loop.watchers import stagnation_policy
from app.runs.schemas.runs import RunRead
from app.runs.tools.base import Tool
from app.runs.tools.builtins import BuiltinServices, builtin_tools
from app.runs.tools.http_request import HttpToolPolicy, make_http_request_tool
from app.runs.tools.journal_tools import journal_tools
from app.runs.tools.mcp.hub import McpHub
from app.runs.tools.mcp.policy import McpPolicy
from app.runs.tools.registry import ToolRegistry
from app.runtime.group_commit import GroupCommitter
from app.runtime.lifecycle import Component, Components
from app.services import Services
from app.sprints.engine.sprint_clock import SprintClock
from app.sprints.engine.sprints import SprintCommands
from app.tasks.engine.review_gate import ReviewGate
from app.tasks.engine.task_engine import TaskEngine
from app.tasks.engine.task_runs import TaskRuns
from app.tasks.tools import task_tools
from app.telemetry.metrics import Metrics
from app.triggers.engine.commands import TriggerCommands
from app.triggers.engine.firing import TriggerFiring
from app.triggers.engine.hooks import TriggerHooks
from app.triggers.engine.kinds import KINDS, SourceParts
from app.triggers.engine.log_retention import LogRetention
from app.webhooks.engine.commands import WebhookCommands
from app.webhooks.engine.deliverer import WebhookDeliverer
from app.webhooks.engine.policy import DeliveryPolicy
from app.workflows.engine.templates.instantiate import TemplateCommands
from app.workflows.engine.workflow_observer import ExecutionObserver
from app.workflows.engine.workflows import WorkflowCommands
from app.workspaces.engine.merge_queue import MergeQueue
from app.workspaces.engine.repos import Repos
from app.workspaces.engine.settings import WorkspaceCommands
from app.workspaces.engine.worktrees import Worktrees
from app.workspaces.tools import workspace_tools

log = logging.getLogger(__name__)


# A background component an embedding application (or a test) adds to the process, made
# from its services; it starts after the process's own and stops before them.
ComponentFactory = Callable[[Services], Component]


@dataclass(frozen=True)
class Runtime:
    """What one process holds while it runs."""

    services: Services
    db: AsyncEngine
    workers: WorkerPool | None
    components: Components  # in start order


def load_plugin(entry: str) -> list[Tool]:
    """`package.module:function`, where the function returns the tools to add."""
    module_name, _, function_name = entry.partition(":")
    factory = getattr(importlib.import_module(module_name), function_name or "tools")
    tools = list(factory())
    if not all(isinstance(tool, Tool) for tool in tools):
        raise TypeError(f"plugin {entry!r} must return tools made with define_tool")
    return tools


def build_tools(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    extra_tools: Sequence[Tool],
    task_engine: TaskEngine | None = None,
    coordinations: CoordinationCommands | None = None,
    worktrees: Worktrees | None = None,
) -> ToolRegistry:
    """Every tool of this process: the built-ins, the task tools over `task_engine` (none
    without one), the workspace tools over `worktrees`, http_request under the configured
    address policy, the configured plugins', and whatever the embedding application adds."""
    tool_settings = settings.tools
    http_policy = HttpToolPolicy(
        allow_private=tool_settings.http_allow_private,
        allowed_networks=tuple(tool_settings.http_allowed_networks),
        idempotency_key_hosts=tuple(tool_settings.http_idempotency_key_hosts),
    )
    plugins = [tool for entry in tool_settings.plugins for tool in load_plugin(entry)]
    return ToolRegistry(
        [
            *builtin_tools(),
            *journal_tools(),
            *(task_tools(task_engine, sessionmaker) if task_engine is not None else ()),
            *([coordinate_task_tool(coordinations)] if coordinations is not None else []),
            *(workspace_tools(worktrees) if worktrees is not None else ()),
            make_http_request_tool(http_policy),
            *plugins,
            *extra_tools,
        ]
    )


def _sessions(settings: Settings) -> Sessions:
    """The dashboard's sessions, signed with the configured secret or, without one, with a
    random secret of this process (its sessions end when it stops)."""
    auth = settings.auth
    secret = auth.session_secret.get_secret_value().encode() if auth.session_secret else None
    keys = [key.get_secret_value() for key in auth.api_keys]
    return Sessions(keys, secret=secret, ttl_s=auth.session_ttl_s)


def build_workers(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    runs: RunCommands,
    providers: ProviderFactory,
    committer: GroupCommitter[BoundaryWrite, RunRead | None],
    registry: ToolRegistry,
    metrics: Metrics | None = None,
    breakers: Breakers | None = None,
    approvals: ApprovalCommands | None = None,
    mcp: McpHub | None = None,
) -> WorkerPool:
    """The run workers with the tools of `registry` (and each agent's MCP servers, under
    `mcp`'s policy). `breakers` are the process's circuit breakers (of tools and models),
    shared by every run."""
    breakers = breakers or Breakers(CircuitBreakerPolicy.from_settings(settings.resilience))
    worker_settings = settings.workers
    pool = WorkerPool(
        sessionmaker,
        bus,
        # Its loops are made when it claims runs, with `deps` (below): their tools lend
        # the pool's slot of a run that only waits for its children.
        lambda run, owner, term: RunLoop(deps, run, owner=owner, term=term),
        capacity=worker_settings.capacity,
        lease_ttl_s=worker_settings.lease_ttl_s,
        poll_interval_s=worker_settings.poll_interval_s,
    )
    services = BuiltinServices(runs, sessionmaker, bus, pools={pool.owner: pool})
    deps = LoopDeps(
        sessionmaker=sessionmaker,
        bus=bus,
        providers=providers,
        tools=ToolRunner(registry, ToolRetryPolicy(), breakers=breakers),
        clock=lambda: datetime.now(UTC),
        committer=committer,
        tool_services=services,
        run_retry=RunRetryPolicy(
            base_delay_s=settings.workers.retry_base_delay_s,
            factor=settings.workers.retry_factor,
            max_retries=settings.workers.max_retries,
        ),
        stagnation=stagnation_policy(settings.loop_guards),
        max_error_batches=settings.loop_guards.max_consecutive_error_batches,
        compaction=settings.compaction,
        metrics=metrics,
        breakers=breakers,
        llm_policy=LLMRetryPolicy.from_settings(settings.resilience),
        approvals=approvals,
        prices=PriceTable.from_settings(settings.costs),
        downgrade_at_percent=settings.costs.downgrade_at_percent,
        auto_loops=AutoLoopPolicy.from_settings(settings.auto_loop),
        mcp=mcp or McpHub(McpPolicy.from_settings(settings.mcp)),
    )
    return pool


async def _database(settings: Settings, stack: AsyncExitStack) -> tuple[str, AsyncEngine]:
    """The database URL (an embedded server's when none is set) and its engine, migrated;
    both are given back (the pool disposed, the server stopped) when the stack unwinds."""
    url = settings.database.url
    if url is None:
        embedded = await asyncio.to_thread(start_embedded, settings.database.embedded_data_dir)
        stack.push_async_callback(asyncio.to_thread, embedded.stop)
        url = embedded.url
    db = make_engine(
        url,
        pool_size=settings.database.pool_size,
        pool_timeout_s=settings.database.pool_timeout_s,
    )
    stack.push_async_callback(db.dispose)
    if settings.database.migrate_on_start:
        await migrate.upgrade(db)
    return url, db


def build_runtime(
    settings: Settings, url: str, db: AsyncEngine, tools: Sequence[Tool] = ()
) -> Runtime:
    """Every service and component of a process, built once and not yet started."""
    sessionmaker = make_sessionmaker(db)
    bus = EventBus()
    retention = settings.idempotency.retention
    engine_settings = settings.task_engine
    task_engine = TaskEngine(
        sessionmaker,
        bus,
        queue_size=engine_settings.queue_size,
        max_batch=engine_settings.max_batch,
        queue_full_retry_after_s=engine_settings.queue_full_retry_after_s,
        idempotency_retention=retention,
    )
    breakers = Breakers(CircuitBreakerPolicy.from_settings(settings.resilience))
    stream_slots = StreamSlots(
        settings.streams.max_subscribers, settings.streams.full_retry_after_s
    )
    components = Components()  # filled once below, in start order
    metrics = Metrics(
        task_queue_depth=lambda: task_engine.queue_depth,
        breaker_states=breakers.snapshot,
        open_streams=lambda: stream_slots.open,
        component_restarts=components.restarts,
    )
    runs = RunCommands(sessionmaker, bus, metrics=metrics, idempotency_retention=retention)
    approvals = ApprovalCommands(sessionmaker, bus, task_engine, settings.approvals)
    coordinations = CoordinationCommands(sessionmaker, bus, idempotency_retention=retention)
    sprints = SprintCommands(sessionmaker, bus, idempotency_retention=retention)
    repos = Repos(settings.workspaces)
    worktrees = Worktrees(sessionmaker, repos)
    task_runs = TaskRuns(
        sessionmaker, task_engine, runs, bus, poll_interval_s=settings.workers.poll_interval_s
    )
    pull_waiting = task_runs.pull_project  # a freed worktree pulls the project's tasks
    merge_queue = MergeQueue(
        sessionmaker,
        bus,
        worktrees,
        approvals,
        runs,
        interval_s=settings.workspaces.merge_interval_s,
        on_freed=pull_waiting,
        metrics=metrics,
    )
    registry = build_tools(settings, sessionmaker, tools, task_engine, coordinations, worktrees)
    mcp = McpHub(McpPolicy.from_settings(settings.mcp))
    delivery_policy = DeliveryPolicy.from_settings(settings.webhooks)
    workflows = WorkflowCommands(sessionmaker, bus, task_engine, idempotency_retention=retention)
    firing = TriggerFiring(sessionmaker, bus, runs, workflows, metrics=metrics)
    prices = PriceTable.from_settings(settings.costs)
    providers = Providers(settings.llm)
    decomposer = Decomposer(providers, prices, sessionmaker)
    router = TaskRouter(
        sessionmaker,
        task_engine,
        prices,
        strategies=strategies(settings.routing, providers, prices, sessionmaker),
        interval_s=settings.workers.poll_interval_s,
    )
    coordinator = Coordinator(
        sessionmaker,
        bus,
        task_engine,
        runs,
        router,
        decomposer,
        coordinations,
        poll_interval_s=settings.workers.poll_interval_s,
        metrics=metrics,
    )
    services = Services(
        settings=settings,
        sessionmaker=sessionmaker,
        bus=bus,
        tasks=task_engine,
        router=router,
        agents=AgentCommands(
            sessionmaker,
            idempotency_retention=retention,
            known_tools=registry.names(),
            warnings=lambda agent: provider_warnings(settings.llm, agent) + mcp.warnings(agent),
        ),
        tools=registry.catalogue(),
        runs=runs,
        approvals=approvals,
        workflows=workflows,
        coordinations=coordinations,
        triggers=TriggerCommands(sessionmaker, bus, idempotency_retention=retention),
        firing=firing,
        hooks=TriggerHooks(sessionmaker, firing, settings.triggers),
        webhooks=WebhookCommands(
            sessionmaker, bus, delivery_policy, idempotency_retention=retention
        ),
        budgets=BudgetCommands(sessionmaker, idempotency_retention=retention),
        sprints=sprints,
        templates=TemplateCommands(
            sessionmaker, workflows, sprints, idempotency_retention=retention
        ),
        workspaces=WorkspaceCommands(sessionmaker, repos, bus, on_changed=pull_waiting),
        worktrees=worktrees,
        merge_queue=merge_queue,
        metrics=metrics,
        breakers=breakers,
        shutting_down=anyio.Event(),
        stream_slots=stream_slots,
        stream_tails=StreamTails(
            sessionmaker, settings.streams.replay_batch, read_stream, stream_end
        ),
        sessions=_sessions(settings),
        components=components,
    )
    committer = boundary_committer(sessionmaker)
    workers = None
    if settings.workers.enabled:
        workers = build_workers(
            settings,
            sessionmaker,
            bus,
            runs,
            providers,
            committer,
            registry,
            metrics,
            breakers,
            approvals,
            mcp,
        )
    listener = PgListener(libpq_url(url), bus)
    workflow_observer = ExecutionObserver(sessionmaker, bus, task_engine)
    review_gate = ReviewGate(sessionmaker, task_engine, approvals)
    approval_sweep = ApprovalTimeoutScheduler(
        sessionmaker, approvals, review_gate, interval_s=settings.approvals.sweep_interval_s
    )
    sprint_clock = SprintClock(
        sessionmaker, sprints, interval_s=settings.sprints.clock_interval_s, metrics=metrics
    )
    idempotency_sweep = IdempotencySweep(
        sessionmaker, retention=retention, interval_s=settings.idempotency.sweep_interval_s
    )
    reconciler = Reconciler(
        sessionmaker,
        bus,
        runs,
        interval_s=settings.reconciler.interval_s,
        auto_resume=settings.reconciler.auto_resume,
        max_resume_attempts=settings.reconciler.max_resume_attempts,
        cancel_timeout_s=settings.reconciler.cancel_timeout_s,
        metrics=metrics,
    )

    trigger_sources = KINDS.sources(SourceParts(sessionmaker, firing, settings.triggers, metrics))

    components.add(
        Component("listener", listener.start, listener.stop),
        Component("model providers", providers.warm_up, providers.aclose),
        Component("workflow observer", workflow_observer.start, workflow_observer.stop),
        Component(
            "task engine",
            task_engine.start,
            lambda: task_engine.stop(engine_settings.drain_timeout_s),
        ),
        Component.of("task runs", task_runs),
        # After task runs: the tasks its first sweep assigns are dispatched.
        Component.of("task router", router),
        Component("review gate", review_gate.start, review_gate.stop),
        # After the bridge, the router and the gate: it drives subtasks through them.
        Component.of("coordinator", coordinator),
        # Its first tick also catches up with approvals that expired while we were down.
        Component.of("approval sweep", approval_sweep),
        # Its first pass moves the sprints whose end date passed while we were down.
        Component.of("sprint clock", sprint_clock),
        # Recovers interrupted merges first; then follows the tasks, approvals and runs.
        Component.of("merge queue", merge_queue),
        Component.of("idempotency sweep", idempotency_sweep),
        *_history_retention(settings, sessionmaker, metrics),
        Component("group committer", committer.start, committer.stop),
        Component.of("reconciler", reconciler),  # first pass: at boot
        # The trigger kinds' sources (the scheduler, the chain relay) fire through the fire
        # path, which creates runs and executions: after the TaskEngine (an execution's
        # tasks) and the group committer.
        *(Component.of(name, source) for name, source in trigger_sources),
        *_webhook_deliverer(settings, sessionmaker, bus, delivery_policy, metrics),
        *_log_retention(settings, sessionmaker),
        *_workers(settings, workers, mcp),
        components.watchdog(),
        Component("streams", lambda: None, _end_streams(services)),
    )
    return Runtime(services, db, workers, components)


def _workers(settings: Settings, workers: WorkerPool | None, mcp: McpHub) -> list[Component]:
    """The run workers, when this process runs runs."""
    if workers is None:
        return []
    pool = workers
    return [
        # Stopped after the workers: the MCP servers their runs could not stop.
        Component("mcp servers", lambda: None, mcp.stop),
        Component("workers", pool.start, lambda: pool.stop(settings.workers.grace_s)),
    ]


def _history_retention(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], metrics: Metrics
) -> list[Component]:
    """History retention, only when a window is set (off by default: history is kept)."""
    retention = settings.history.retention
    if retention is None:
        return []
    pruner = HistoryRetention(
        sessionmaker,
        retention=retention,
        interval_s=settings.history.prune_interval_s,
        chunk=settings.history.prune_chunk,
        metrics=metrics,
    )
    return [Component.of("history retention", pruner)]


def _log_retention(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> list[Component]:
    """The delivery and fire logs kept for their windows (none when both keep all)."""
    deliveries, fires = settings.webhooks.retention_s, settings.triggers.fire_retention_s
    pruner = LogRetention(
        sessionmaker,
        deliveries=None if deliveries is None else timedelta(seconds=deliveries),
        fires=None if fires is None else timedelta(seconds=fires),
    )
    return [] if pruner.keeps_everything else [Component.of("log retention", pruner)]


def _webhook_deliverer(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    policy: DeliveryPolicy,
    metrics: Metrics,
) -> list[Component]:
    """The deliverer of outbound webhooks, unless this process is told not to send them."""
    if not settings.webhooks.enabled:
        return []
    deliverer = WebhookDeliverer(
        sessionmaker,
        bus,
        policy,
        metrics=metrics,
        poll_interval_s=settings.webhooks.poll_interval_s,
    )
    return [Component.of("webhook deliverer", deliverer)]


def _end_streams(services: Services) -> Callable[[], Awaitable[None]]:
    """The first step of a shutdown: open SSE streams are told to end."""

    async def end() -> None:
        services.shutting_down.set()

    return end


@asynccontextmanager
async def running(
    settings: Settings,
    tools: Sequence[Tool] = (),
    *,
    components: Sequence[ComponentFactory] = (),
    build: Callable[[Settings, str, AsyncEngine, Sequence[Tool]], Runtime] = build_runtime,
) -> AsyncIterator[Runtime]:
    """A started process: its components (and `components`, made from its services, after
    them) run inside the block and are stopped, in reverse order of their start, when it
    exits, or at once when a start fails (what started is stopped, the pool disposed); the
    error then propagates."""
    async with AsyncExitStack() as stack:
        url, db = await _database(settings, stack)
        runtime = build(settings, url, db, tools)
        runtime.components.add(*(make(runtime.services) for make in components))
        # The tokenizer (compaction's estimates) loads once, here, not in a run's first turn.
        await asyncio.to_thread(tokens.encoding)
        for component in runtime.components:
            component.start()
            stack.push_async_callback(component.stop)
        await _warn_about_agents(runtime.services.agents)
        yield runtime


async def _warn_about_agents(agents: AgentCommands) -> None:
    """Each stored agent whose runs would fail as configured now is logged at start-up. A
    database that is down does not stop the start (requests get 503 until it is back)."""
    try:
        misconfigured = await agents.misconfigured()
    except Exception as exc:
        if not is_connectivity_error(exc):
            raise
        log.warning("agents not checked at start-up: the database cannot be reached")
        return
    for agent in misconfigured:
        log.warning(
            "agent %s (%s) cannot run as configured: %s",
            agent.name,
            agent.id,
            "; ".join(agent.warnings),
            extra={"fields": {"agent_id": agent.id}},
        )
