"""`create_app(settings)` and the lifespan: the composition root of a process.

Start order: database (embedded when no URL) → migrations → bus and NOTIFY listener →
TaskEngine and its observers (executions, task runs, review gate) → approval sweep →
idempotency sweep → group committer → reconciler (its first pass reconciles at boot) →
workers.
Shutdown runs in reverse: streams are told to end, workers stop claiming and give running
loops their grace period, the reconciler, idempotency sweep, approval sweep and committer
stop, the TaskEngine drains its queue, the listener stops, the pool is disposed.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import migrate
from app.api import agents, approvals, health, problems, tasks, workflow_executions, workflows
from app.api import metrics as metrics_api
from app.api import runs as runs_api
from app.api.body_limit import BodyLimit
from app.api.input_guard import InputGuard
from app.api.openapi import build_openapi, operation_id
from app.api.request_ids import install_request_ids
from app.core.breakers import Breakers, CircuitBreakerPolicy
from app.core.config import Settings, load_settings
from app.embedded_pg import start_embedded
from app.engine.agents import AgentCommands
from app.engine.approval_timeouts import ApprovalTimeoutScheduler
from app.engine.approvals import ApprovalCommands
from app.engine.bus import EventBus
from app.engine.group_commit import GroupCommitter
from app.engine.idempotency_sweep import IdempotencySweep
from app.engine.pg_listener import PgListener
from app.engine.reconciler import Reconciler
from app.engine.retry import RunRetryPolicy, ToolRetryPolicy
from app.engine.review_gate import ReviewGate
from app.engine.runs import RunCommands
from app.engine.task_engine import TaskEngine
from app.engine.task_runs import TaskRuns
from app.engine.workers import WorkerPool
from app.engine.workflow_observer import ExecutionObserver
from app.llm import tokens
from app.llm.policy import LLMRetryPolicy
from app.llm.providers import Providers
from app.loop.boundary import BoundaryWrite, write_boundaries
from app.loop.executor import LoopDeps, RunLoop
from app.loop.guards import stagnation_policy
from app.loop.tool_runner import ToolRunner
from app.loop.tools.base import Tool
from app.loop.tools.builtins import BuiltinServices, builtin_tools
from app.loop.tools.http_request import HttpToolPolicy, make_http_request_tool
from app.loop.tools.journal_tools import journal_tools
from app.loop.tools.registry import ToolRegistry
from app.loop.tools.task_tools import task_tools
from app.runtime import Runtime
from app.schemas.runs import RunRead
from app.store.db import libpq_url, make_engine, make_sessionmaker
from app.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

DESCRIPTION = """\
Loopwright runs LLM agent loops and task workflows durably on Postgres and streams what
they do over Server-Sent Events.

Errors are RFC 9457 problem documents (`application/problem+json`) with a stable `code`.
Lists are paginated by cursor: pass `next_cursor` back as `cursor`.
"""


def load_plugin(entry: str) -> list[Tool]:
    """`package.module:function`, where the function returns the tools to add."""
    module_name, _, function_name = entry.partition(":")
    factory = getattr(importlib.import_module(module_name), function_name or "tools")
    tools = list(factory())
    if not all(isinstance(tool, Tool) for tool in tools):
        raise TypeError(f"plugin {entry!r} must return tools made with define_tool")
    return tools


def build_workers(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    runs: RunCommands,
    providers: Providers,
    committer: GroupCommitter[BoundaryWrite, RunRead | None],
    extra_tools: Sequence[Tool],
    metrics: Metrics | None = None,
    breakers: Breakers | None = None,
    approvals: ApprovalCommands | None = None,
    task_engine: TaskEngine | None = None,
) -> WorkerPool:
    """The run workers with their tools: built-ins, the task tools over `task_engine`
    (none without one), http_request under the configured address policy, and whatever
    the embedding application adds. `breakers` are the process's circuit breakers (of
    tools and models), shared by every run."""
    breakers = breakers or Breakers(CircuitBreakerPolicy.from_settings(settings.resilience))
    tool_settings = settings.tools
    http_policy = HttpToolPolicy(
        allow_private=tool_settings.http_allow_private,
        allowed_networks=tuple(tool_settings.http_allowed_networks),
    )
    plugins = [tool for entry in tool_settings.plugins for tool in load_plugin(entry)]
    registry = ToolRegistry(
        [
            *builtin_tools(),
            *journal_tools(),
            *(task_tools(task_engine, sessionmaker) if task_engine is not None else ()),
            make_http_request_tool(http_policy),
            *plugins,
            *extra_tools,
        ]
    )
    services = BuiltinServices(runs, sessionmaker, bus)
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
    )
    worker_settings = settings.workers
    pool = WorkerPool(
        sessionmaker,
        bus,
        lambda run, owner: RunLoop(deps, run, owner=owner),
        capacity=worker_settings.capacity,
        lease_ttl_s=worker_settings.lease_ttl_s,
        poll_interval_s=worker_settings.poll_interval_s,
    )
    services.attach_pool(pool)  # a run waiting for its children lends its slot
    return pool


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    embedded = None
    url = settings.database.url
    if url is None:
        embedded = await asyncio.to_thread(start_embedded, settings.database.embedded_data_dir)
        url = embedded.url
    db = make_engine(
        url,
        pool_size=settings.database.pool_size,
        pool_timeout_s=settings.database.pool_timeout_s,
    )
    if settings.database.migrate_on_start:
        await migrate.upgrade(db)
    sessionmaker = make_sessionmaker(db)
    bus = EventBus()
    listener = PgListener(libpq_url(url), bus)
    engine_settings = settings.task_engine
    task_engine = TaskEngine(
        sessionmaker,
        bus,
        queue_size=engine_settings.queue_size,
        max_batch=engine_settings.max_batch,
        queue_full_retry_after_s=engine_settings.queue_full_retry_after_s,
        idempotency_retention=settings.idempotency.retention,
    )
    breakers = Breakers(CircuitBreakerPolicy.from_settings(settings.resilience))
    app.state.metrics = Metrics(
        task_queue_depth=lambda: task_engine.queue_depth, breaker_states=breakers.snapshot
    )
    runs = RunCommands(
        sessionmaker,
        bus,
        metrics=app.state.metrics,
        idempotency_retention=settings.idempotency.retention,
    )
    providers = Providers(settings.llm)
    committer = GroupCommitter(sessionmaker, write_boundaries)
    approval_commands = ApprovalCommands(sessionmaker, bus, task_engine, settings.approvals)
    workers = None
    if settings.workers.enabled:
        workers = build_workers(
            settings,
            sessionmaker,
            bus,
            runs,
            providers,
            committer,
            app.state.tools,
            app.state.metrics,
            breakers,
            approval_commands,
            task_engine,
        )
    runtime = Runtime(
        settings=settings,
        database_url=url,
        db=db,
        sessionmaker=sessionmaker,
        bus=bus,
        listener=listener,
        tasks=task_engine,
        agents=AgentCommands(sessionmaker, idempotency_retention=settings.idempotency.retention),
        runs=runs,
        workers=workers,
        shutting_down=anyio.Event(),
    )
    app.state.runtime = runtime
    listener.start()
    workflow_observer = ExecutionObserver(sessionmaker, bus, task_engine)
    task_engine.add_observer(workflow_observer)
    workflow_observer.start()
    task_engine.start()
    task_runs = TaskRuns(
        sessionmaker, task_engine, runs, bus, poll_interval_s=settings.workers.poll_interval_s
    )
    task_runs.start()
    review_gate = ReviewGate(sessionmaker, task_engine, approval_commands)
    review_gate.start()
    approval_sweep = ApprovalTimeoutScheduler(
        sessionmaker,
        approval_commands,
        review_gate,
        interval_s=settings.approvals.sweep_interval_s,
    )
    approval_sweep.start()  # its first tick also catches up after a restart
    idempotency_sweep = IdempotencySweep(
        sessionmaker,
        retention=settings.idempotency.retention,
        interval_s=settings.idempotency.sweep_interval_s,
    )
    idempotency_sweep.start()
    reconciler = Reconciler(
        sessionmaker,
        bus,
        runs,
        interval_s=settings.reconciler.interval_s,
        auto_resume=settings.reconciler.auto_resume,
        max_resume_attempts=settings.reconciler.max_resume_attempts,
        cancel_timeout_s=settings.reconciler.cancel_timeout_s,
        metrics=app.state.metrics,
    )
    committer.start()
    # The tokenizer (compaction's estimates) loads once, here, not in a run's first turn.
    await asyncio.to_thread(tokens.encoding)
    reconciler.start()  # its first pass runs now: the boot reconciliation
    if workers is not None:
        workers.start()
    try:
        yield
    finally:
        runtime.shutting_down.set()
        if workers is not None:
            await workers.stop(settings.workers.grace_s)
        await reconciler.stop()
        await idempotency_sweep.stop()
        await approval_sweep.stop()
        await review_gate.stop()
        await committer.stop()
        await task_runs.stop()
        await task_engine.stop(engine_settings.drain_timeout_s)
        await workflow_observer.stop()
        await providers.aclose()
        await listener.stop()
        await db.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def create_app(settings: Settings | None = None, *, tools: Sequence[Tool] = ()) -> FastAPI:
    """The application; `tools` are added to the built-in ones for the run workers."""
    settings = settings or load_settings()
    app = FastAPI(
        title="Loopwright",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=_lifespan,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.tools = list(tools)
    problems.install(app)
    # Outermost last: request ids see every response; the guard reads the bounded body.
    app.add_middleware(InputGuard)
    app.add_middleware(BodyLimit, max_body_bytes=settings.server.max_body_bytes)
    install_request_ids(app)
    app.include_router(health.router)
    app.include_router(metrics_api.router)
    app.include_router(tasks.router)
    app.include_router(agents.router)
    app.include_router(runs_api.router)
    app.include_router(workflows.router)
    app.include_router(workflow_executions.router)
    app.include_router(approvals.router)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app
