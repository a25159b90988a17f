"""Helpers for run-loop tests: an injected clock, tools that record what they saw, a
recording model, and a Harness that assembles RunCommands, AgentCommands and WorkerPools
the way `app.main.build_workers` does, over the real database."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.engine import AgentCommands
from app.agents.schemas import AgentCreate, AgentRead, Limits
from app.approvals.engine.approvals import ApprovalCommands
from app.core.breakers import Breakers, CircuitBreakerPolicy
from app.core.config import ApprovalSettings, LLMSettings
from app.core.messages import Message, ToolResultBlock, for_provider
from app.core.model_config import ModelConfig, ScriptedTurn
from app.core.states import RUN_SETTLED, RunStatus
from app.core.streams import RUNS_STREAM, run_of, run_stream
from app.core.vocabulary import StepKind
from app.db.connection import libpq_url, make_sessionmaker
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.pg_listener import PgListener
from app.llm.provider import LLMRequest, LLMResponse, Provider, TextSink, UsageSink
from app.llm.providers.registry import Providers
from app.runs.engine.leases import LeaseTerm
from app.runs.engine.runs import RunCommands
from app.runs.engine.workers import WorkerPool
from app.runs.loop.boundary import boundary_committer
from app.runs.loop.deps import LoopDeps
from app.runs.loop.retry import RunRetryPolicy, ToolRetryPolicy
from app.runs.loop.run_loop import RunLoop
from app.runs.loop.tool_runner import ToolRunner
from app.runs.schemas.runs import MessageRead, RunCreate, RunRead
from app.runs.store import history
from app.runs.store import runs as run_store
from app.runs.tools.base import Tool, ToolContext, ToolFailure, ToolHandler, define_tool
from app.runs.tools.builtins import BuiltinServices, builtin_tools
from app.runs.tools.journal_tools import journal_tools
from app.runs.tools.registry import ToolRegistry
from app.tasks.engine.task_engine import TaskEngine

SAFETY_S = 10.0  # only ever reached when the code under test is broken: fail, do not hang
SECRET_PATH = "/srv/loopwright/secrets/token.txt"  # in an error that must not reach the model


class FakeClock:
    """The loop's clock: starts at the real time (the database stamps `started_at` at
    claim) and moves only when told."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def call(name: str, **arguments: Any) -> ScriptedTurn:
    """A scripted turn that calls one tool."""
    return ScriptedTurn.model_validate({"tool_calls": [{"name": name, "input": arguments}]})


def say(text: str) -> ScriptedTurn:
    return ScriptedTurn(text=text)


@dataclass
class Recorded:
    request: LLMRequest
    response: LLMResponse


class RecordingModel:
    """Passes calls to the real model of the test (scripted, or another test double) and
    keeps each request with its response."""

    def __init__(self, inner: Provider, log: list[Recorded]) -> None:
        self._inner = inner
        self._log = log

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        response = await self._inner.complete(request, on_text, on_usage)
        self._log.append(Recorded(request, response))
        return response


@dataclass
class Toolbox:
    """Tools whose behaviour tests steer and observe."""

    clock: FakeClock
    lanes: dict[str, str] = field(default_factory=dict)  # run id -> lane, filled by Harness
    calls: Counter[str] = field(default_factory=Counter)
    gate_entered: asyncio.Event = field(default_factory=asyncio.Event)
    gate_release: asyncio.Event = field(default_factory=asyncio.Event)
    flaky_failures: int = 0  # how many calls of `flaky` fail before it recovers
    # `probe`: concurrently active calls per lane, their maxima, and an enter/exit trace.
    active: Counter[str] = field(default_factory=Counter)
    max_active: Counter[str] = field(default_factory=Counter)
    max_total: int = 0
    trace: list[tuple[str, str]] = field(default_factory=list)
    overlap_target: int | None = None  # `probe` waits until this many calls are inside
    overlap: asyncio.Event = field(default_factory=asyncio.Event)
    while_probing: Callable[[str], Awaitable[None]] | None = None  # gets the run id

    async def _gate(self, context: ToolContext, arguments: dict[str, Any]) -> str:
        self.gate_entered.set()
        await self.gate_release.wait()
        return "the gate opened"

    async def _flaky(self, context: ToolContext, arguments: dict[str, Any]) -> str:
        if self.calls["flaky"] <= self.flaky_failures:
            raise ToolFailure("upstream answered 503", transient=True)
        return "flaky answered"

    async def _advance_clock(self, context: ToolContext, arguments: dict[str, Any]) -> str:
        self.clock.advance(float(arguments["seconds"]))
        return "time passed"

    async def _probe(self, context: ToolContext, arguments: dict[str, Any]) -> str:
        lane = self.lanes[context.run_id]
        self.active[lane] += 1
        self.max_active[lane] = max(self.max_active[lane], self.active[lane])
        self.max_total = max(self.max_total, sum(self.active.values()))
        self.trace.append(("enter", context.run_id))
        try:
            if self.overlap_target is not None:
                if sum(self.active.values()) >= self.overlap_target:
                    self.overlap.set()
                try:
                    async with asyncio.timeout(SAFETY_S):
                        await self.overlap.wait()
                except TimeoutError:
                    raise ToolFailure("the other lanes never ran alongside") from None
            if self.while_probing is not None:
                await self.while_probing(context.run_id)
        finally:
            self.active[lane] -= 1
            self.trace.append(("exit", context.run_id))
        return "probed"

    def all(self) -> list[Tool]:
        """`define_tool` defaults (side-effecting, needs permission) unless stated."""

        def counted(name: str, handler: ToolHandler, **options: Any) -> Tool:
            async def run(context: ToolContext, arguments: dict[str, Any]) -> str:
                self.calls[name] += 1
                return await handler(context, arguments)

            return define_tool(name, f"Test tool {name}.", {"type": "object"}, run, **options)

        async def raises(error: Exception) -> str:
            raise error

        async def returns(text: str) -> str:
            return text

        transient = ToolFailure("mail server timed out", transient=True)
        return [
            counted("gate", self._gate),
            counted("flaky", self._flaky, idempotent=True, retries=True, destructive=False),
            counted("send_email", lambda c, a: raises(transient)),
            counted("broken", lambda c, a: raises(ToolFailure("the widget is out of stock"))),
            counted("crash", lambda c, a: raises(RuntimeError(f"cannot read {SECRET_PATH}"))),
            counted("guarded", lambda c, a: returns("guarded ran")),
            counted("advance_clock", self._advance_clock),
            counted("probe", self._probe),
        ]


class Harness:
    """The run machinery of one process over the test database, with test tools and a
    recording model. Every pool it made is stopped on close."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        retry_policy: ToolRetryPolicy | None = None,
        run_retry: RunRetryPolicy | None = None,
        breaker_policy: CircuitBreakerPolicy | None = None,
        extra_tools: Sequence[Tool] = (),
        **loop_options: Any,
    ) -> None:
        """`loop_options` go to `LoopDeps` (compaction and stagnation settings, ...);
        `extra_tools` join the registry (a tool under test)."""
        self.engine = engine
        self.sessionmaker = make_sessionmaker(engine)
        self.bus = EventBus()
        self.clock = FakeClock()
        self.tools = Toolbox(self.clock)
        self.registry = ToolRegistry(
            [*builtin_tools(), *journal_tools(), *self.tools.all(), *extra_tools]
        )
        self.sleeps: list[float] = []
        self.runs = RunCommands(self.sessionmaker, self.bus)
        # Tool approvals; its TaskEngine (for reviews) starts only in tests that need one.
        self.task_engine = TaskEngine(self.sessionmaker, self.bus)
        self.approvals = ApprovalCommands(
            self.sessionmaker, self.bus, self.task_engine, ApprovalSettings(), clock=self.clock
        )
        self.agents = AgentCommands(self.sessionmaker)
        self.models: dict[str, Provider] = {}  # agent id -> a model other than its script
        self.llm_calls: dict[str, list[Recorded]] = {}  # agent id -> what its model saw
        self.claims: list[tuple[str, str]] = []  # (run id, owner), in claim order
        self._scripted = Providers(LLMSettings())  # kept per run, as the service does
        # The breakers of tools and models, on the injected clock.
        self.breakers = Breakers(breaker_policy, clock=lambda: self.clock.now.timestamp())
        self.committer = boundary_committer(self.sessionmaker)
        self.services = BuiltinServices(self.runs, self.sessionmaker, self.bus)
        self.deps = LoopDeps(
            sessionmaker=self.sessionmaker,
            bus=self.bus,
            providers=self._provider,
            tools=ToolRunner(
                self.registry,
                retry_policy or ToolRetryPolicy((0.0, 0.0, 0.0)),
                self._sleep,
                breakers=self.breakers,
            ),
            clock=self.clock,
            committer=self.committer,
            tool_services=self.services,
            run_retry=run_retry or RunRetryPolicy(max_retries=0),
            breakers=self.breakers,
            sleep=self._sleep,
            approvals=self.approvals,
            **loop_options,
        )
        self._pools: list[WorkerPool] = []
        self._background: list[asyncio.Task[None]] = []
        self._listener: PgListener | None = None
        self.pool = self.new_pool(capacity=4, owner="pool-a")  # drained by the tests

    @classmethod
    @asynccontextmanager
    async def open(cls, engine: AsyncEngine, **options: Any) -> AsyncIterator[Harness]:
        harness = cls(engine, **options)
        harness.committer.start()
        try:
            yield harness
        finally:
            await harness.close()

    async def close(self) -> None:
        self.tools.gate_release.set()
        self.tools.overlap.set()
        for pool in self._pools:
            await pool.stop(grace_s=SAFETY_S)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.committer.stop()
        if self._listener is not None:
            await self._listener.stop()

    # -- assembly --------------------------------------------------------------------

    async def _sleep(self, delay_s: float) -> None:
        self.sleeps.append(delay_s)

    def _provider(self, agent: AgentRead, run_id: str) -> Provider:
        inner = self.models.get(agent.id) or self._scripted(agent, run_id)
        return RecordingModel(inner, self.llm_calls.setdefault(agent.id, []))

    def _loop(self, run: RunRead, owner: str, term: LeaseTerm) -> RunLoop:
        self.claims.append((run.id, owner))
        return RunLoop(self.deps, run, owner=owner, term=term)

    def new_pool(self, *, capacity: int, owner: str) -> WorkerPool:
        """A pool of its own; in the background it also polls often, as a stand-in for
        wake-ups that only another process's NOTIFY would bring."""
        pool = WorkerPool(
            self.sessionmaker,
            self.bus,
            self._loop,
            capacity=capacity,
            owner=owner,
            poll_interval_s=0.05,
        )
        self.services.pools[pool.owner] = pool  # its runs lend their slots while they wait
        self._pools.append(pool)
        return pool

    async def listen(self) -> None:
        """Feed the bus from NOTIFY, as a process does: runs settled by one loop wake
        the workers and waiters of the others."""
        self._listener = PgListener(
            libpq_url(self.engine.url.render_as_string(hide_password=False)), self.bus
        )
        self._listener.start()
        async with asyncio.timeout(SAFETY_S):
            await self._listener.connected.wait()

    # -- acting ----------------------------------------------------------------------

    async def agent(
        self,
        *script: ScriptedTurn,
        tools: Sequence[str] | None = None,
        limits: Limits | None = None,
        name: str = "scripted-agent",
        auto_approve: Sequence[str] | None = None,
    ) -> AgentRead:
        """A scripted agent; by default it may use every tool the registry knows, without
        asking for approvals (tests of approvals name the tools that need none)."""
        names = list(self.registry.names() if tools is None else tools)
        return await self.agents.create(
            AgentCreate(
                name=name,
                tools=names,
                auto_approve=list(names if auto_approve is None else auto_approve),
                model=ModelConfig(provider="scripted", name="scripted", script=list(script)),
                limits=limits or Limits(),
            )
        )

    async def start(self, agent: AgentRead, text: str = "Please help.", **fields: Any) -> RunRead:
        run, _ = await self.runs.create(RunCreate(agent_id=agent.id, input=text, **fields))
        self.tools.lanes[run.id] = run.lane
        return run

    async def finish(self, agent: AgentRead, text: str = "Please help.", **fields: Any) -> RunRead:
        """Start a run and drain the pool: the run as it ended (or paused)."""
        run = await self.start(agent, text, **fields)
        await self.drain()
        return await self.run(run.id)

    async def drain(self) -> None:
        async with asyncio.timeout(SAFETY_S * 3):
            await self.pool.run_until_idle()

    def drain_in_background(self) -> asyncio.Task[None]:
        task = asyncio.create_task(self.drain(), name="test-drain")
        self._background.append(task)
        return task

    async def wait_until_settled(self, run_ids: Sequence[str]) -> list[RunRead]:
        """For pools running in the background: re-read on every wake-up of the runs board
        (a tick stands in for a missed one) until every run is settled or paused."""
        done = RUN_SETTLED | {RunStatus.WAITING_ON_HUMAN}
        with self.bus.subscribe(RUNS_STREAM) as wake:
            async with asyncio.timeout(SAFETY_S * 3):
                while True:
                    found = [await self.run(run_id) for run_id in run_ids]
                    if all(run.status in done for run in found):
                        return found
                    await wake.wait(0.1)

    # -- reading ---------------------------------------------------------------------

    async def run(self, run_id: str) -> RunRead:
        async with self.sessionmaker() as session:
            run = await run_store.get_run(session, run_id)
        assert run is not None, run_id
        return run

    async def events(self, run_id: str) -> list[event_store.StoredEvent]:
        return await self.stream(run_stream(run_id))

    async def stream(self, stream: str) -> list[event_store.StoredEvent]:
        """The stream's events in order (a run's: each step's, numbered by its step)."""
        async with self.sessionmaker() as session:
            run_id = run_of(stream)
            if run_id is None:
                return await event_store.read_events(session, stream, after=0, limit=10_000)
            steps = await history.steps(session, run_id, after=0, limit=10_000)
        return [
            event_store.StoredEvent(
                stream, s.seq, kind, {"run_id": s.run_id, "status": s.status.value} | data, s.at
            )
            for s in steps
            for kind, data in history.step_events(s)
        ]

    async def event_types(self, run_id: str) -> list[str]:
        return [e.type for e in await self.events(run_id)]

    async def messages(self, conversation_id: str) -> list[MessageRead]:
        async with self.sessionmaker() as session:
            return await history.read_messages(session, conversation_id)

    async def transcript(self, conversation_id: str) -> list[Message]:
        return [
            Message(role=m.role, content=m.content) for m in await self.messages(conversation_id)
        ]

    async def checkpoint_kinds(self, run_id: str) -> list[str]:
        """The kinds of the run's resume points, in order."""
        async with self.sessionmaker() as session:
            steps = await history.steps(session, run_id, after=0, limit=100_000)
        return [s.kind.value for s in steps if s.kind is not StepKind.NOTE]


def tool_results(messages: Sequence[Message | MessageRead]) -> list[ToolResultBlock]:
    return [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]


def assert_valid_transcript(messages: Sequence[Message | MessageRead]) -> None:
    """What a provider accepts, once consecutive user messages are merged as the loop
    sends them: user first, roles alternating, and each assistant message's tool calls
    answered, exactly, by the results in the message after it."""
    merged = for_provider([Message(role=m.role, content=m.content) for m in messages])
    roles = [m.role for m in merged]
    assert roles == [("user", "assistant")[i % 2] for i in range(len(roles))], roles
    assert merged, "the transcript is empty"
    assert not tool_results(merged[:1]), "results before any call"
    for index, message in enumerate(merged):
        if message.role == "assistant":
            answers = {b.tool_use_id for b in tool_results(merged[index + 1 : index + 2])}
            calls = {use.id for use in message.tool_uses}
            assert answers == calls, f"message {index}: calls {calls} but results {answers}"
