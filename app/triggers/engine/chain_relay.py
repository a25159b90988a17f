"""The chain relay: fires the chain triggers that a run settling or an execution finishing
matches, then forgets the event.

The database copies each such event into `chain_events` in the transaction that wrote it
(while any chain is enabled), so the relay never misses one: a pass takes a batch (locked,
SKIP LOCKED, so several processes share the work), fires each matching chain through the
fire path with the source event as the fire's key (`<stream>:<seq>`: the database makes one
fire of each, so a pass cut short and done again fires nothing twice), and deletes the
batch in the transaction that took it.

A chain's template context has `source`: the run (`kind: run`, id, agent_id, status,
result, stop_reason, error, conversation_id, input, metadata) or the execution
(`kind: workflow`, id, workflow_id, status, context, reason) as it is when relayed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.streams import RUNS_STREAM, execution_of
from app.core.vocabulary import TargetKind
from app.runs.store import runs as run_store
from app.runtime.components import Loop, Wakes
from app.triggers.schemas import ChainConfig
from app.triggers.store import chain_events
from app.triggers.store.chain_events import ChainSourceEvent, EnabledChain
from app.workflows import store as workflows

log = logging.getLogger(__name__)

# fire(trigger_id, context, fire_key, depth): start the chain's target; `depth` is how many
# chains led to it (1 for a chain off a run no chain started).
FireChain = Callable[[str, dict[str, Any], str, int], Awaitable[object]]


class ChainRelay:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        fire: FireChain,
        *,
        interval_s: float = 1.0,
        batch: int = 100,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._fire = fire
        self._batch = batch
        self.loop = Loop("chain-relay", self.run_once, Wakes(interval_s), sleep=sleep)

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def run_once(self) -> int:
        """Relay every event waiting now; the number of chains fired."""
        fired = 0
        while True:
            async with self._sessionmaker() as session, session.begin():
                events = await chain_events.take(session, limit=self._batch)
                if not events:
                    return fired
                chains = await chain_events.enabled_chains(session)
                for event in events:
                    fired += await self._relay(session, event, chains)
                await chain_events.done(session, [e.id for e in events])

    async def _relay(
        self, session: AsyncSession, event: ChainSourceEvent, chains: list[EnabledChain]
    ) -> int:
        found = await _source(session, event)
        if found is None:
            return 0
        kind, owner, source, depth = found
        key = f"{event.stream}:{event.seq}"
        fired = 0
        for chain in chains:
            config = ChainConfig.model_validate(chain.config)
            named = config.agent_id if kind is TargetKind.RUN else config.workflow_id
            if config.source is kind and named == owner and source["status"] in config.statuses:
                await self._fire(chain.id, {"source": source}, key, depth + 1)
                fired += 1
        return fired


async def _source(
    session: AsyncSession, event: ChainSourceEvent
) -> tuple[TargetKind, str, dict[str, Any], int] | None:
    """The source of an event (its kind, its agent or workflow, its template view, and the
    chain depth it was started at); None when it is gone or the event is not a settle."""
    if event.stream == RUNS_STREAM:
        run = await run_store.get_run(session, event.data["run_id"])
        if run is None or event.data.get("status") != run.status.value:
            return None  # a retry or a resume moved it on: a later event settles it
        started_by = run.metadata.get("trigger")
        depth = started_by.get("depth", 0) if isinstance(started_by, dict) else 0
        view = {
            "kind": TargetKind.RUN.value,
            "id": run.id,
            "agent_id": run.agent_id,
            "status": run.status.value,
            "result": run.result,
            "stop_reason": run.stop_reason.value if run.stop_reason else None,
            "error": run.error.model_dump(mode="json") if run.error else None,
            "conversation_id": run.conversation_id,
            "input": run.input,
            "metadata": run.metadata,
        }
        return TargetKind.RUN, run.agent_id, view, int(depth)
    execution_id = execution_of(event.stream)
    if execution_id is not None:
        execution = await workflows.get_execution(session, execution_id)
        if execution is None:
            return None
        view = {
            "kind": TargetKind.WORKFLOW.value,
            "id": execution.id,
            "workflow_id": execution.workflow_id,
            "status": execution.status.value,
            "context": execution.context,
            "reason": execution.reason,
        }
        return TargetKind.WORKFLOW, execution.workflow_id, view, 0
    return None
