"""Built-in tools: `ask_human`, `spawn_child_runs`, `wait_for_child_runs` and `echo`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.states import RUN_SETTLED, RunStatus
from app.core.streams import RUNS_STREAM
from app.db.idempotency import request_hash
from app.events.engine.bus import EventBus
from app.runs.engine.runs import RunCommands
from app.runs.schemas.runs import RunCreate, RunRead
from app.runs.store import runs as run_store
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool


class SlotLender(Protocol):
    """A worker pool, as `wait_for_child_runs` sees it (`app.runs.engine.workers.WorkerPool`)."""

    @property
    def owner(self) -> str: ...

    def lend_slot(self, run_id: str) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True)
class BuiltinServices:
    """What built-in tools reach through `ToolContext.services`. `pools`: the worker
    pools that run loops with these services, keyed by owner, which is the lease owner in
    a tool's context."""

    runs: RunCommands
    sessionmaker: async_sessionmaker[AsyncSession]
    bus: EventBus
    pools: dict[str, SlotLender] = field(default_factory=dict)

    def lend_slot(self, context: ToolContext) -> AbstractAsyncContextManager[None]:
        """While the caller's run only waits, its pool's slot goes to another run; without
        a pool holding the run (tests, other callers) this does nothing."""
        pool = self.pools.get(context.lease_owner) if context.lease_owner else None
        return pool.lend_slot(context.run_id) if pool else contextlib.nullcontext()


def _services(context: ToolContext) -> BuiltinServices:
    if not isinstance(context.services, BuiltinServices):
        raise ToolFailure("this tool is not available here")
    return context.services


async def _ask_human(context: ToolContext, arguments: dict[str, Any]) -> str:
    question = str(arguments.get("question") or "").strip()
    if not question:
        raise ToolFailure("ask_human needs a non-empty `question`")
    return question


async def _spawn(context: ToolContext, arguments: dict[str, Any]) -> str:
    services = _services(context)
    wanted = arguments.get("runs")
    if not isinstance(wanted, list) or not wanted or len(wanted) > 20:
        raise ToolFailure("`runs` must be a list of 1 to 20 {input, agent_id?} objects")
    run_ids = []
    for index, spec in enumerate(wanted):
        if not isinstance(spec, dict) or not str(spec.get("input") or "").strip():
            raise ToolFailure(f"runs[{index}] needs an `input`")
        body = RunCreate(
            agent_id=str(spec.get("agent_id") or context.agent_id), input=spec["input"]
        )
        # Keyed on this tool call, so a re-run after a crash finds the children it made.
        key = f"{context.idempotency_key}:{index}"
        child, _ = await services.runs.create(
            body,
            parent_run_id=context.run_id,
            idempotency_key=key,
            request_hash=request_hash(body.model_dump(mode="json")),
        )
        run_ids.append(child.id)
    return json.dumps({"run_ids": run_ids})


async def _wait(context: ToolContext, arguments: dict[str, Any]) -> str:
    services = _services(context)
    run_ids = arguments.get("run_ids")
    if not isinstance(run_ids, list) or not run_ids:
        raise ToolFailure("`run_ids` must be a non-empty list")
    timeout_s = float(arguments.get("timeout_s") or 300)
    # The parent only waits here: its worker slot goes to another run (its children,
    # perhaps) meanwhile, so waiting parents cannot starve their own children.
    async with services.lend_slot(context):
        found = await _wait_settled(services, [str(i) for i in run_ids], timeout_s)
    return json.dumps(
        [
            {
                "run_id": r.id,
                "status": r.status.value,
                "result": r.result,
                "error": r.error.message if r.error else None,
            }
            for r in found
            if r is not None
        ]
    )


async def _wait_settled(
    services: BuiltinServices, run_ids: list[str], timeout_s: float
) -> list[RunRead | None]:
    """Re-read the runs on every wake-up of the runs board until each is settled or waits
    on a human, or `timeout_s` passed: the runs as last read."""
    with services.bus.subscribe(RUNS_STREAM) as wake:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            async with services.sessionmaker() as session:
                found = [await run_store.get_run(session, i) for i in run_ids]
            done = [
                r
                for r in found
                if r is not None
                and (r.status in RUN_SETTLED or r.status is RunStatus.WAITING_ON_HUMAN)
            ]
            if len(done) == len(run_ids) or loop.time() >= deadline:
                break
            await wake.wait(min(1.0, max(0.0, deadline - loop.time())))
    return found


async def _echo(context: ToolContext, arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True)


def builtin_tools() -> list[Tool]:
    return [
        define_tool(
            "ask_human",
            "Ask the person supervising this run a question and wait for the answer.",
            {
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
            _ask_human,
            idempotent=True,  # asking again (after a crash) is harmless
            pauses_run=True,
            destructive=False,
            requires_permission=False,
            requires_approval=False,  # it is itself a question to a person
        ),
        define_tool(
            "spawn_child_runs",
            "Start child runs, each in a conversation and lane of its own. Returns their ids.",
            {
                "type": "object",
                "properties": {
                    "runs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "input": {"type": "string"},
                                "agent_id": {"type": "string"},
                            },
                            "required": ["input"],
                        },
                    }
                },
                "required": ["runs"],
            },
            _spawn,
            idempotent=True,  # each child is created under an idempotency key of this call
            destructive=False,
        ),
        define_tool(
            "wait_for_child_runs",
            "Wait until the given runs finish (or wait on a human); returns their results.",
            {
                "type": "object",
                "properties": {
                    "run_ids": {"type": "array", "items": {"type": "string"}},
                    "timeout_s": {"type": "number"},
                },
                "required": ["run_ids"],
            },
            _wait,
            idempotent=True,
            destructive=False,
        ),
        define_tool(
            "echo",
            "Return the arguments it is given, as JSON.",
            {"type": "object"},
            _echo,
            idempotent=True,
            retries=True,
            destructive=False,
            requires_permission=False,
        ),
    ]
