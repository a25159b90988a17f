"""A claimed run as its loop holds it: the run as last committed, its live context and the
watchers' state, and the one way its loop writes, `commit`, fenced by the lease."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import Any

from app.core.messages import Message
from app.db.outage import connection_lost
from app.events.engine.published import published, run_written
from app.runs.engine.leases import LeaseTerm
from app.runs.loop.boundary import COUNTERS, Boundary, BoundaryWrite
from app.runs.loop.cancel_watch import CancelFlag, cancel_flag
from app.runs.loop.deps import LeaseLost, LoopDeps
from app.runs.loop.tool_batch import may_run_again
from app.runs.loop.watchers import Watchers
from app.runs.schemas.runs import RunRead, Usage
from app.runs.tools.mcp.run_servers import RunServers


class LeasedRun:
    """The state a run's loop carries between boundaries, and its commit (`RunLoop` drives
    it; a tool batch sees it as `BatchHost`)."""

    def __init__(self, deps: LoopDeps, run: RunRead, *, owner: str, term: LeaseTerm) -> None:
        self.deps = deps
        self.run = run  # as the last commit returned it
        self.owner = owner
        self.token = run.lease_token
        self.term = term  # the lease as this worker reckons it (its pool renews it)
        self.lease_lost = asyncio.Event()
        self.stop_requested = asyncio.Event()  # shutdown: hand the run back at a boundary
        self.history: list[Message] = []  # the live context: compacted prefix + transcript
        self.through = -1  # position of the last transcript message the history covers
        self.transcript_count = 0  # messages of the conversation's transcript
        self.watchers = Watchers()
        # The watchers' state as the history last recorded it: a step records it only when
        # it changed (the checkpoint reads the latest one recorded).
        self.loop_written: dict[str, Any] | None = None
        self.system_hash = ""  # of the agent's prompt, once the loop has read its agent
        # The run's tools: the process's, and its agent's MCP servers' (runs/loop/mcp_servers.py),
        # whose servers it stops when its execution ends.
        self.tools = deps.tools
        self.servers: RunServers | None = None

    def cancel_flag(self) -> AbstractContextManager[CancelFlag]:
        return cancel_flag(self.run.id, bus=self.deps.bus, sessionmaker=self.deps.sessionmaker)

    async def commit(self, boundary: Boundary, watchers: Watchers | None = None) -> RunRead:
        """Commit one boundary (through the group committer, alongside other runs'), fenced
        by this worker's lease; then take its messages, results and the watchers' new state
        (`watchers`, recorded in its checkpoint) into the loop's state."""
        if self.lease_lost.is_set():  # the heartbeat could not renew: stop here
            raise LeaseLost()
        watchers = watchers or self.watchers
        registry = self.tools.registry
        counters = {k: v for k, v in boundary.run_values.items() if k in COUNTERS}
        if "usage" in counters:
            counters["usage"] = Usage.model_validate(counters["usage"])
        write = BoundaryWrite(
            run=self.run.model_copy(update=counters),
            owner=self.owner,
            token=self.token,
            position=self.transcript_count,
            boundary=boundary,
            idempotent={c.id: may_run_again(registry, c) for c in boundary.started},
            now=self.deps.clock(),
            term=self.term,
            loop_counters=None if watchers.counters == self.loop_written else watchers.counters,
            prompt_hash=self.system_hash,
        )
        try:
            run = await self.deps.committer.submit(write)
        except Exception as exc:
            # The committer waits for a lost database while the lease's term lasts; a
            # write that failed on one anyway outlived it: the run is no longer ours.
            if connection_lost(exc):
                raise LeaseLost() from exc
            raise
        if run is None:
            if self.deps.metrics is not None:
                self.deps.metrics.stale_appends.inc()
            raise LeaseLost()
        events = [*boundary.opening, *boundary.events]
        # Local waiters (pools, wait tools) hear of it now, not at their next poll.
        published(
            self.deps.bus, [run_written(run, events, worker=self.owner)], metrics=self.deps.metrics
        )
        if boundary.context is not None:
            self.history = list(boundary.context[1])
        self.history += boundary.messages
        self.through += len(boundary.messages)
        self.transcript_count += len(boundary.messages)
        self.watchers = watchers
        self.loop_written = watchers.counters
        self.run = run
        return run
